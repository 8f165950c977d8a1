"""Exclusive lock files between the processes of one data home, each wait bounded."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from baton.home import make_directory


@contextmanager
def held(path: Path, *, within: float) -> Iterator[bool]:
    """Hold an exclusive lock on the file at path, waiting at most `within` seconds for the
    process that holds it; yields whether this process got it. The lock is released when
    the block ends (or the process dies)."""
    make_directory(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + within
        while not (got := _lock(fd)) and time.monotonic() <= deadline:
            time.sleep(0.01)
        yield got
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def taken(path: Path) -> int | None:
    """The descriptor of an exclusive lock on the file at path, taken at once, or None when
    another process holds it. Closing the descriptor (or the process ending) releases it."""
    make_directory(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by children (PEP 446)
    if _lock(fd):
        return fd
    os.close(fd)
    return None


def _lock(fd: int) -> bool:
    """Take the lock on fd if no other process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def linger(path: Path, work: Callable[[], bool], waiting: Callable[[], object], *, idle: float) -> None:
    """A background worker's loop: under the lock at path (at once, or not at all: the process
    holding it does the work), call work() (False: stop) until waiting() stays false for
    `idle` seconds; then release the lock and look once more, so work queued meanwhile by a
    writer that saw the lock held is never left waiting."""
    while (fd := taken(path)) is not None:
        try:
            while work():
                until = time.monotonic() + idle
                while time.monotonic() < until and not waiting():
                    time.sleep(0.05)
                if not waiting():
                    break
            else:
                return
        finally:
            os.close(fd)  # releases the lock
        if not waiting():
            return
