"""What the stores load once and keep, loaded ahead by a long-lived process (the resident)
so that the commands it forks find it ready: pydantic's schema of the events, the embedding
model and the embedded recall index's memory map."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.skills.runtime.settings import Settings


def warm(settings: Settings) -> None:
    """Fill the stores' caches; what cannot be loaded (no model) is left to the command
    that needs it, which says why as it does without a resident."""
    with suppress(Exception):
        from baton.registry.wire import event_adapter

        event_adapter()
    from baton.recall.embedding import keep_loaded

    with suppress(Exception):
        keep_loaded()
    if not settings.qdrant_url:
        keep_index_mapped(settings.home.absolute())


def keep_index_mapped(home: Path) -> None:
    """Map the embedded recall index of the data home, or map it again when it was
    rewritten since (a stat otherwise)."""
    from baton.recall.embedded import keep_mapped

    keep_mapped(home / "recall")
