"""Run store reads side by side with one deadline, so a hung store cannot hang a resume.

A read still running at the deadline is abandoned, not waited for: its thread may sit in a
driver call that never returns, or in a native library whose exit handler would wait for
it. The process therefore never closes what such a thread uses and never runs the
interpreter's exit with it alive: `leave(code)` ends the process at once instead.

The deadline is what the command's budget (baton.budget, itself within the command's
deadline, baton.deadline) has left plus SLACK: each store waits at most what is left and
reports its own, precise reason first; the deadline only catches a call that ignores its
timeout."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from baton.budget import SLACK, Budget, abandon, abandoned
from baton.errors import StoreUnavailable
from baton.outcome import Unavailable


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
    """Run each call in its own daemon thread, until what the command's budget has left
    plus SLACK; a call still running then answers Unavailable (the budget's "no answer
    within"), and one that raises StoreUnavailable answers Unavailable(reason).

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
    deadline = time.monotonic() + max(budget.remaining(), 0.0) + SLACK
    for name, thread in threads.items():
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            results[name] = Unavailable(budget.no_answer())
            abandon(thread)
    for exc in errors.values():
        raise exc
    return {name: results[name] for name in calls}
