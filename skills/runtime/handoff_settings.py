"""Handoff and probe settings: the `[handoff]` table of baton.toml, overridden by the environment.

    [handoff]
    probe_timeout = 10          # seconds one probe may run when a handoff is re-verified
    probe_budget = 30           # seconds all probes of one re-verification may take together
    key_file = "~/team/baton-handoff.key"   # a team's shared signing key
    allow = ["pytest -q", "make check **"]  # unsigned probes that may run anyway
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from baton.errors import BadInput

_KNOWN_KEYS = {"probe_timeout", "probe_budget", "key_file", "allow"}
PROBE_TIMEOUT = 10.0
PROBE_BUDGET = 30.0


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    probe_timeout: float = PROBE_TIMEOUT
    probe_budget: float = PROBE_BUDGET
    key_file: Path | None = None
    allow: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_config(cls, table: dict, source: str) -> HandoffSettings:
        """From the `[handoff]` table of `source` (a path, for messages) and the environment."""
        unknown = set(table) - _KNOWN_KEYS
        if unknown:
            raise BadInput(f"{source}: unknown key in [handoff]: {', '.join(sorted(unknown))}")
        allow = table.get("allow", [])
        if not isinstance(allow, list) or not all(isinstance(entry, str) for entry in allow):
            raise BadInput(f"{source}: [handoff] allow must be a list of commands (strings)")
        patterns = _patterns(allow, source) if allow else ()
        key_file = os.environ.get("BATON_HANDOFF_KEY_FILE") or table.get("key_file")
        if key_file is not None and not isinstance(key_file, str):
            raise BadInput(f"{source}: [handoff] key_file must be a string")
        return cls(probe_timeout=_seconds("BATON_PROBE_TIMEOUT", table, "probe_timeout", source, PROBE_TIMEOUT),
                   probe_budget=_seconds("BATON_PROBE_BUDGET", table, "probe_budget", source, PROBE_BUDGET),
                   key_file=Path(key_file).expanduser() if key_file else None, allow=patterns)


def _patterns(allow: list[str], source: str) -> tuple[tuple[str, ...], ...]:
    # Imported only when configured: every command reads the settings.
    from baton.skills.handoff.probes import parse_command

    try:
        return tuple(tuple(parse_command(entry)) for entry in allow)
    except BadInput as exc:
        raise BadInput(f"{source}: [handoff] allow: {exc}") from None


def _seconds(variable: str, table: dict, key: str, source: str, default: float) -> float:
    raw = os.environ.get(variable)
    where = variable
    if not raw:
        raw, where = table.get(key, default), f"{source}: [handoff] {key}"
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise BadInput(f"{where} must be a number of seconds, got {raw!r}") from None
    if not 0 < value <= 86400:
        raise BadInput(f"{where} is out of range: {raw!r}")
    return value
