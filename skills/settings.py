"""Settings read once from the environment, validated, frozen."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from baton.clock import parse_duration
from baton.errors import BadInput
from baton.home import data_home


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    store_timeout: float
    stale_after: timedelta
    recall_min_score: float

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            home=data_home(),
            store_timeout=_number("BATON_STORE_TIMEOUT", 2.0),
            stale_after=_duration("BATON_STALE_AFTER", "24h"),
            recall_min_score=_number("BATON_RECALL_MIN_SCORE", 0.3, minimum=-1.0),
        )


def _number(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name} must be a number, got {raw!r}") from None
    if value < minimum or (minimum == 0.0 and value == 0.0):
        raise BadInput(f"{name} is out of range: {raw!r}")
    return value


def _duration(name: str, default: str) -> timedelta:
    try:
        return parse_duration(os.environ.get(name) or default)
    except ValueError as exc:
        raise BadInput(f"{name}: {exc}") from None
