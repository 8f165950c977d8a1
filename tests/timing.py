"""Wall-clock bounds that hold on a busy machine. A test that bounds how long a command
took measures, in the same test, what the same command costs with nothing wrong (its
floor: the interpreter's start, Baton's imports, the machine's load at that moment), and
allows what the case adds on top of it (a store's budget). Speed targets live in bench/.
Every test and test server waits with wait_for: polled, with a deadline."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# A command on 2 cores that other work keeps busy runs several times slower than on an
# idle machine, and its floor with it: the bound scales with the floor and adds a fixed
# allowance for one scheduling delay.
LOAD_FACTOR = 2.0
ALLOWANCE = 0.5


def timed(run: Callable[[], subprocess.CompletedProcess]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = run()
    return result, time.monotonic() - started


def cpu_timed(run: Callable[[], subprocess.CompletedProcess]) -> tuple[subprocess.CompletedProcess, float]:
    """run()'s result and the CPU seconds (user and system) of the processes it ran and
    waited for: what a command costs, which a busy machine stretches far less than its wall
    time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def floor(run: Callable[[], subprocess.CompletedProcess], times: int = 3) -> float:
    """The median time of `times` runs of a command that meets nothing wrong."""
    return statistics.median(timed(run)[1] for _ in range(times))


def bound(floor_seconds: float, extra: float = 0.0) -> float:
    """How long a command whose healthy run takes floor_seconds may take when the case adds
    `extra` seconds of waiting (a stalled store's budget), on a busy machine."""
    return LOAD_FACTOR * floor_seconds + extra + ALLOWANCE


def store_budget(floor_seconds: float, least: float = 2.0) -> float:
    """A BATON_STORE_TIMEOUT for a command whose healthy run takes floor_seconds: at least
    `least`, and twice that floor. The budget is charged while a server's client is imported
    and connects, which on a busy machine alone can outlast 2 s; a server that never had its
    fair chance is (rightly) not recorded as down, nor a healthy one told apart from it."""
    return max(least, round(2 * floor_seconds, 1))


def interpreter_floor(cwd: Path) -> float:
    """A fresh interpreter that imports Baton's CLI and exits: the least any command costs."""
    code = "import baton.skills.frontends.cli"
    return floor(lambda: subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, timeout=60))


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    """Poll condition() until it returns something true, and return that; raise TimeoutError
    after timeout seconds naming what was awaited (a bounded wait, never a fixed sleep).
    The polls start 10 ms apart and back off to 100 ms: a quick answer is seen at once, a
    slow one (a server starting) is not asked hundreds of times a second."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g}s for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
