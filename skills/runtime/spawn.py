"""Detached `baton` processes: the background delivery and the background indexer."""

from __future__ import annotations

import os
import sys


def spawn_baton(*args: str) -> None:
    """Start `baton ARGS` in its own session with no terminal and no output; costs the
    caller a spawn, no wait."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        os.posix_spawn(sys.executable, [sys.executable, "-m", "baton.skills.frontends.cli", *args], os.environ,
                       file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                                     (os.POSIX_SPAWN_DUP2, devnull, 2)],
                       setsid=True)
    finally:
        os.close(devnull)
