"""UTC timestamps with one text form, so stored times compare correctly as strings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

MAX_DURATION = timedelta(days=36500)  # a century: far from timedelta's and datetime's limits


def now() -> datetime:
    return datetime.now(UTC)


def to_text(moment: datetime) -> str:
    """Fixed-width ISO 8601 in UTC: lexicographic order equals time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def shown(moment: datetime) -> str:
    """A time as Baton shows it to people and agents."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def minute(moment: datetime) -> str:
    """ISO 8601 to the minute in UTC, as lease and take-over notices state a time."""
    return f"{to_text(moment)[:16]}Z"


def parse(text: str) -> datetime:
    """Parse an ISO 8601 time; a time without a zone is taken as UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_duration(text: str) -> timedelta:
    """Parse '90s', '30m', '24h', '7d' or a plain number of seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip().lower()
    scale = units.get(text[-1:])
    number = text[:-1] if scale else text
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 24h, 7d)") from None
    if not seconds > 0:  # NaN too
        raise ValueError(f"duration must be positive: {text!r}")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration is longer than {MAX_DURATION.days} days: {text!r}")
    return timedelta(seconds=seconds)
