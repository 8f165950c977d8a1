"""Detached `baton` processes: the background delivery, the background indexer and the
resident process."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from baton.locks import taken
from baton.pydantic_plugins import as_given
from baton.skills.runtime.resident_client import LOCK_NAME, SOCKET_NAME

CLI = "baton.skills.frontends.cli"  # a command run in the process
CONSOLE = "baton.skills.frontends.entry"  # the console script's: by the resident when one listens
RESIDENT_LOCK_FD = 3  # where the resident finds resident.lock, held for it by its spawner
# After a start that never got to listen, the next waits RETRY_FIRST seconds, doubling with
# each further such start up to RETRY_MOST; a start longer ago than that is not held against it.
RETRY_FIRST, RETRY_MOST = 1.0, 60.0


def spawn_baton(*args: str, module: str = CLI, keep: int | None = None,
                idle: bool = False) -> None:
    """Start `python -m MODULE ARGS` (default: `baton ARGS`) in its own session with no
    terminal and no output, with keep (a descriptor) as RESIDENT_LOCK_FD; costs the caller a
    spawn, no wait. -P: the caller's directory never shadows a module. idle: at the lowest
    priority from its start (baton.processes run as a program), its imports included."""
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    if keep is not None:
        actions.append((os.POSIX_SPAWN_DUP2, keep, RESIDENT_LOCK_FD))
    program = ["baton.processes", module] if idle else [module]
    try:
        os.posix_spawn(sys.executable, [sys.executable, "-P", "-m", *program, *args],
                       as_given(), file_actions=actions, setsid=True)
    finally:
        os.close(devnull)


def spawn_resident(home: Path) -> bool:
    """Start the resident process for home unless one runs or is starting (resident.lock is held:
    taken here and handed to the new process, so two commands never start two), or the last
    start failed and its backoff (retry_wait) has not passed; whether one was started. The lock
    file holds the last start's time and the failures in a row before it; a resident that died
    is replaced by the next command at once."""
    if not home.is_dir():
        return False  # nothing was written yet; the next command starts one
    fd = taken(home / LOCK_NAME)
    if fd is None:
        return False
    try:
        now = time.time()
        failed = _failed_starts(home, os.pread(fd, 64, 0), now)
        if failed is None:
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{now!r} {failed}".encode(), 0)
        spawn_baton("--lock-fd", str(RESIDENT_LOCK_FD), module="baton.skills.frontends.resident", keep=fd)
        return True
    finally:
        os.close(fd)  # the lock stays with the resident's copy


def retry_wait(failed: int) -> float:
    """Seconds from a failed start to the next, when `failed` starts failed in a row."""
    return min(RETRY_FIRST * 2 ** (failed - 1), RETRY_MOST)


def _failed_starts(home: Path, record: bytes, now: float) -> int | None:
    """How many starts in a row failed, counting the last (whose process is gone: the lock
    was free); None while the backoff after them lasts."""
    started_text, _, failed_text = record.decode("ascii", "replace").partition(" ")
    try:
        started = float(started_text)
    except ValueError:
        return 0  # never started here (or an unreadable record)
    failed = int(failed_text) if failed_text.strip().isdigit() else 0
    try:
        listened = os.stat(home / SOCKET_NAME).st_mtime >= started
    except OSError:
        listened = False  # never bound, or removed by a resident that left (idle, stale) in good order
    if listened or not 0 <= now - started < RETRY_MOST:
        return 0
    failed += 1
    return failed if now - started >= retry_wait(failed) else None
