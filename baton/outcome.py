"""The three answers of every read: Found, NotFound or Unavailable(reason).

A read never answers None, so "no history" and "store down" can never be confused.
These are plain frozen dataclasses: they are built on hot paths and never serialised as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Found(Generic[T]):
    value: T


@dataclass(frozen=True, slots=True)
class NotFound:
    key: str


@dataclass(frozen=True, slots=True)
class Unavailable:
    reason: str

