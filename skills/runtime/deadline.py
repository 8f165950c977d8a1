"""Run store reads side by side with one deadline, so a hung store cannot hang a resume.

A read still running at the deadline is abandoned, not waited for: its thread may sit in a
driver call that never returns, or in a native library whose exit handler would wait for
it. The process therefore never closes what such a thread uses and never runs the
interpreter's exit with it alive: `leave(code)` ends the process at once instead.

The deadline follows the command's budget (baton.budget, itself within the command's
deadline, baton.deadline): a read is given up SLACK after the budget ran out, so each store
waits at most what is left and reports its own, precise reason first; the deadline only
catches a call that ignores its timeout. As the budget's clock, it runs only while a server
is waited on: the work a read does before it asks one (loading the model to embed a query,
slow on busy cores) is never told as a server's silence. A read that works longer than the
command's whole deadline without a wait is given up too."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from baton.budget import Budget, abandon, abandoned
from baton.errors import StoreUnavailable
from baton.outcome import Unavailable

SLACK = 0.5  # seconds past the budget before a call still running is given up
POLL = 0.02  # seconds between looks at the budget while a read runs


def leave(code: int) -> None:
    """End the process with code: at once when an abandoned read still runs (after flushing
    what was written), else through the interpreter's normal exit."""
    if abandoned():
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def gather(calls: dict[str, Callable[[], Any]], budget: Budget) -> dict[str, Any]:
    """Run each call in its own daemon thread until SLACK after the command's budget ran out;
    a call still running then answers Unavailable (the budget's "no answer within"), and one
    that raises StoreUnavailable answers Unavailable(reason).

    Daemon threads: a stuck driver call must not keep the process alive after it answered.
    """
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        try:
            results[name] = call()
        except StoreUnavailable as exc:
            results[name] = Unavailable(exc.reason)
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread below
            errors[name] = exc

    threads = {name: threading.Thread(target=run, args=(name, call), daemon=True, name=f"baton-{name}")
               for name, call in calls.items()}
    for thread in threads.values():
        thread.start()
    started = time.monotonic()
    busy_cap = budget.deadline.seconds if budget.deadline is not None else budget.seconds
    ran_out: float | None = None  # when the budget's clock reached 0
    for name, thread in threads.items():
        while thread.is_alive():
            now = time.monotonic()
            if ran_out is None and budget.remaining() <= 0:
                ran_out = now
            if (ran_out is not None and now - ran_out >= SLACK) or now - started >= busy_cap + SLACK:
                break
            thread.join(POLL)
        if thread.is_alive():
            said = budget.no_answer() if ran_out is not None else f"still working after {busy_cap:g} s"
            results[name] = Unavailable(said)
            abandon(thread)
    for exc in errors.values():
        raise exc
    return {name: results[name] for name in calls}
