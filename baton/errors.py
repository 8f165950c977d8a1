"""One exception root; each failure category says what the caller can do about it."""


class BatonError(Exception):
    """Root of every error Baton raises on purpose."""

    exit_code = 1


class BadInput(BatonError):
    """The caller gave something Baton refuses; nothing was written."""

    exit_code = 2


class StoreUnavailable(BatonError):
    """A store could not be reached, read or written within its timeout."""

    exit_code = 3

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(f"{store} unavailable: {reason}")
        self.store = store
        self.reason = reason


class ServerUnreachable(StoreUnavailable):
    """The store's server could not be reached or heard from: refused, unreachable, timed
    out or the connection was lost (what the health record remembers), as opposed to a
    server that answered with an error."""
