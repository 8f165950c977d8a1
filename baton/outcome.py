"""The three answers of every read: Found, NotFound or Unavailable(reason).

A read never answers None, so "no history" and "store down" can never be confused.
These are plain frozen dataclasses: they are built on hot paths and never serialised as such.

`answer.unwrap(store)` is how a service that cannot go on without the store turns an
answer into a value: Found gives its value, Unavailable raises StoreUnavailable(store,
reason), and NotFound gives None. A missing key is an answer (a ticket with no history),
not a failure, so it never raises; a caller to whom absence matters tests for NotFound
(or None) itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Generic, NoReturn, ParamSpec, TypeVar

from baton.errors import StoreUnavailable

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Found(Generic[T]):
    value: T

    def unwrap(self, store: str) -> T:
        return self.value


@dataclass(frozen=True, slots=True)
class NotFound:
    key: str

    def unwrap(self, store: str) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Unavailable:
    reason: str

    def __post_init__(self) -> None:
        from baton.masking import mask

        object.__setattr__(self, "reason", mask(self.reason))  # never a server's credentials

    def unwrap(self, store: str) -> NoReturn:
        raise StoreUnavailable(store, self.reason)


def answering(read: Callable[P, T]) -> Callable[P, T | Unavailable]:
    """A read that answers Unavailable(reason) where it would raise StoreUnavailable."""

    @wraps(read)
    def answer(*args: P.args, **kwargs: P.kwargs) -> T | Unavailable:
        try:
            return read(*args, **kwargs)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    return answer
