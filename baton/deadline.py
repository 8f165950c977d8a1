"""One deadline per command: every wait of a command draws on it (its servers through the
store budget, baton.budget; git, baton.git; the handoff probes; the toolchains' versions;
the checkpoints' git), and each kind of wait keeps a cap of its own below it. A wait lasts
min(its cap, what the deadline has left), and one the deadline cut says so: which part ran
out, of what.

BATON_COMMAND_BUDGET is the deadline of a whole command. As with the store budget, its
clock runs while at least one wait is in flight and stops in between, so the time a
command spends on what the user asked for itself (a check, a setup command) is never taken
from what it may wait afterwards; waits side by side are charged once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

SETTING = "BATON_COMMAND_BUDGET"


class WaitClock:
    """Seconds of waiting, spent while at least one wait is in flight (however many overlap)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._spent = 0.0
        self._in_flight = 0
        self._busy_since = 0.0

    def left(self) -> float:
        """Seconds still to wait (never below 0)."""
        with self._lock:
            running = time.monotonic() - self._busy_since if self._in_flight else 0.0
            return max(self.seconds - self._spent - running, 0.0)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Charge the time this block runs (once, however many blocks overlap)."""
        with self._lock:
            if not self._in_flight:
                self._busy_since = time.monotonic()
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self._spent += time.monotonic() - self._busy_since

    def renew(self) -> None:
        """All the seconds again, for the next unit of a long-running command."""
        with self._lock:
            self._spent = 0.0
            self._busy_since = time.monotonic()


class Deadline(WaitClock):
    """The command's: what every wait of it draws on."""

    def __str__(self) -> str:
        return f"the command's {self.seconds:g} s deadline ({SETTING})"


class Wait:
    """One wait: how long it may last, and how its running out is told (its own cap, or
    what was left of the command's deadline when that was less). A plain class: this module
    is on the touch's path (baton.budget), where making a dataclass costs half a millisecond."""

    __slots__ = ("limit", "seconds")

    def __init__(self, seconds: float, limit: str) -> None:
        self.seconds = seconds
        self.limit = limit

    def no_answer(self, what: str) -> str:
        return f"{what}: no answer within {self.limit}"


def wait_for(cap: float, deadline: Deadline | None) -> Wait:
    """The wait of a kind capped at `cap`, starting now, within the command's deadline."""
    left = cap if deadline is None else deadline.left()
    if left < cap:
        return Wait(left, f"{left:.1f} s, what was left of {deadline}")
    return Wait(cap, f"{cap:.3g} s")
