"""The unit of work a front end opens: the runtime's (baton.skills.runtime.unit), its stores
applying events through the projection, which lives in the core, above the runtime."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from baton.skills.runtime import unit

if TYPE_CHECKING:
    from baton.registry.model import Event
    from baton.skills.runtime.stores import Stores


def _projection(stores: Stores, events: Sequence[Event]) -> list[str]:
    """The projection (baton.skills.core.commit.apply_events), imported when a unit first
    applies an event: most hooks never do, and the prompt's hook stays off the commit module."""
    from baton.skills.core.commit import apply_events

    return apply_events(stores, events)


unit_of_work = partial(unit.unit_of_work, projection=_projection)
