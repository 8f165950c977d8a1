"""Run store reads side by side with one deadline, so a hung store cannot hang a resume."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from baton.errors import StoreUnavailable
from baton.outcome import Unavailable


def gather(calls: dict[str, Callable[[], Any]], timeout: float) -> dict[str, Any]:
    """Run each call in its own daemon thread; a call still running at the deadline answers
    Unavailable, and one that raises StoreUnavailable answers Unavailable(reason).

    Daemon threads: a stuck driver call must not keep the process alive after it answered.
    """
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        try:
            results[name] = call()
        except StoreUnavailable as exc:
            results[name] = Unavailable(exc.reason)
        except BaseException as exc:  # re-raised in the caller's thread below
            errors[name] = exc

    threads = {name: threading.Thread(target=run, args=(name, call), daemon=True, name=f"baton-{name}")
               for name, call in calls.items()}
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + timeout
    for name, thread in threads.items():
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            results[name] = Unavailable(f"no answer within {timeout:g}s")
    for exc in errors.values():
        raise exc
    return {name: results[name] for name in calls}
