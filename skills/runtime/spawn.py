"""Detached `baton` processes: the background delivery, the background indexer and the
resident process."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import suppress
from pathlib import Path

from baton.skills.runtime.resident_client import LOCK_NAME

RESIDENT_LOCK_FD = 3  # where the resident finds resident.lock, held for it by its spawner
RESPAWN_AFTER = 60.0  # seconds between two starts of the resident process


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
    held: taken here and handed to the new process, so two commands never start two), or
    one was started less than RESPAWN_AFTER seconds ago (one that cannot start is not
    started again by every command). Whether one was started."""
    if not home.is_dir():
        return False  # nothing was written yet; the next command starts one
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        started = os.pread(fd, 32, 0)  # when the last one was started, as the lock file's text
        now = time.time()
        with suppress(ValueError):
            if 0 <= now - float(started) < RESPAWN_AFTER:
                return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, repr(now).encode(), 0)
        spawn_baton("--lock-fd", str(RESIDENT_LOCK_FD), module="baton.skills.frontends.resident", keep=fd)
        return True
    finally:
        os.close(fd)  # the lock stays with the resident's copy
