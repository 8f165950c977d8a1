"""What a write tells its caller, kept apart from the write skills so that the hot paths
(baton.skills.services.touch, baton.skills.services.decide) import it without the event models."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_TEXT = 4000  # baton.registry.model.Text


@dataclass
class WriteReport:
    warnings: list[str] = field(default_factory=list)
    session_id: str | None = None
    previous_task: str | None = None
