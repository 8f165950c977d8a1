"""Detached `baton` processes: the background delivery, the background indexer and the
resident process."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from baton.skills.runtime.resident_client import LOCK_NAME

RESIDENT_LOCK_FD = 3  # where the resident finds resident.lock, held for it by its spawner


def spawn_baton(*args: str, module: str = "baton.skills.frontends.cli", keep: int | None = None) -> None:
    """Start `python -m MODULE ARGS` (default: `baton ARGS`) in its own session with no
    terminal and no output, with keep (a descriptor) as RESIDENT_LOCK_FD; costs the caller a
    spawn, no wait. -P: the caller's directory never shadows a module."""
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    if keep is not None:
        actions.append((os.POSIX_SPAWN_DUP2, keep, RESIDENT_LOCK_FD))
    try:
        os.posix_spawn(sys.executable, [sys.executable, "-P", "-m", module, *args],
                       os.environ, file_actions=actions, setsid=True)
    finally:
        os.close(devnull)


def spawn_resident(home: Path) -> bool:
    """Start the resident process for home unless one runs or is starting (resident.lock is
    held: taken here and handed to the new process, so two commands never start two).
    Whether one was started."""
    if not home.is_dir():
        return False  # nothing was written yet; the next command starts one
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        spawn_baton("--lock-fd", str(RESIDENT_LOCK_FD), module="baton.skills.frontends.resident", keep=fd)
        return True
    finally:
        os.close(fd)  # the lock stays with the resident's copy
