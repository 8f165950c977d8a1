"""One policy for trying again after a failure, as psycopg's pool has one ConnectionAttempt:
the first wait is `initial` seconds and each next one `factor` times the last, up to `most`,
each stretched by up to `jitter` of itself so processes that failed together do not try
again together; once `give_up_after` seconds have passed since the policy began or last
saw a success, there is no next try."""

from __future__ import annotations

import time


class Backoff:
    __slots__ = ("_next", "_since", "factor", "give_up_after", "initial", "jitter", "most")

    def __init__(self, initial: float, *, factor: float = 2.0, most: float = 30.0, jitter: float = 0.1,
                 give_up_after: float | None = None) -> None:
        self.initial, self.factor, self.most, self.jitter = initial, factor, most, jitter
        self.give_up_after = give_up_after
        self.reset()

    def reset(self) -> None:
        """A success: the next failure waits `initial` again, and giving up counts from now."""
        self._next = self.initial
        self._since = time.monotonic()

    def failed(self) -> float | None:
        """Seconds to wait before the next try (longer each time), or None: give up."""
        if self.give_up_after is not None and time.monotonic() - self._since > self.give_up_after:
            return None
        import random  # only once something failed

        delay = self._next * (1 + self.jitter * random.random())
        self._next = min(self._next * self.factor, self.most)
        return delay

    def wait(self) -> bool:
        """Sleep before the next try; False at once when it is time to give up."""
        delay = self.failed()
        if delay is not None:
            time.sleep(delay)
        return delay is not None
