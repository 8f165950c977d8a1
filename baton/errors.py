"""One exception root; each failure category says what the caller can do about it.

Each edge translates the root: the CLI prints one line and exits with `exit_code`; an MCP
tool answers `{"error": {"type": kind, "store", "message", "recoverable"}}`.
"""


class BatonError(Exception):
    """Root of every error Baton raises on purpose."""

    exit_code = 1
    kind = "error"
    recoverable = False  # whether the same call may succeed later, unchanged
    store: str | None = None


class BadInput(BatonError):
    """The caller gave something Baton refuses; nothing was written."""

    exit_code = 2
    kind = "bad_input"


class Refused(BatonError):
    """The request is well formed but another holds what it asks for (a lease): one line
    naming the holder; nothing was written. The same call may succeed once that is released."""

    kind = "refused"
    recoverable = True


class StoreUnavailable(BatonError):
    """A store could not be reached, read or written within its timeout."""

    exit_code = 3
    kind = "store_unavailable"
    recoverable = True
    store: str  # always named, unlike other errors

    def __init__(self, store: str, reason: str) -> None:
        from baton.masking import mask

        reason = mask(reason)  # a reason may quote a server's URL or a client's error: never its credentials
        super().__init__(f"{store} unavailable: {reason}")
        self.store = store
        self.reason = reason


class ServerUnreachable(StoreUnavailable):
    """The store's server could not be reached or heard from: refused, unreachable, timed
    out or the connection was lost (what the health record remembers), as opposed to a
    server that answered with an error."""


class Untrusted(BatonError):
    """Something Baton would read or talk to is not the user's own (baton.trust): another
    user could have planted it. Nothing was read from it or sent to it."""

    exit_code = 3
    kind = "untrusted"


class GitFailed(BatonError):
    """A git command Baton ran itself (baton.git.run_git) failed, could not start or gave
    no answer in time; the reason is one line naming the command and what went wrong."""

    exit_code = 3
    kind = "git_failed"
    recoverable = True

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
