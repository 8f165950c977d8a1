"""Read commands shared by the CLI and the MCP server, with their input checks."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.ids import parse_ticket_id
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.signals.model import Signal
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.decision_age import AgedDecision


def signals_since(stores: Stores, *, task_id: str | None, since: str | None, limit: int) -> list[Signal]:
    """Signals (about task_id, if given) emitted after `since` (ISO 8601), oldest first."""
    if task_id:
        parse_ticket_id(task_id)
    try:
        after = clock.parse(since) if since else None
    except ValueError:
        raise BadInput(f"since is not an ISO 8601 time: {since!r}") from None
    if limit <= 0:
        raise BadInput("limit must be positive")
    return stores.signals.recent(task_id=task_id, after=after, limit=limit).unwrap(Store.SIGNAL_LOG)


def recall_decisions(stores: Stores, text: str, limit: int) -> list[AgedDecision]:
    """The limit results nearest in meaning to text, best first, marked and ordered as
    baton.skills.services.decision_age ranks them (a superseded decision and its replacement
    are one result). A text query loads the model anyway, so it
    first indexes the decisions that wait: one recorded just before is found (without the
    model they stay queued, and the keyword leg finds them by their words)."""
    if not text.strip():
        raise BadInput("search text is empty")
    if limit <= 0:
        raise BadInput("limit must be positive")
    client = stores.recall()
    if stores.embedding_queue.count():
        from baton.skills.core.indexing import index_decisions

        with suppress(StoreUnavailable):  # the search says what is unavailable, if both legs are
            index_decisions(stores)
    from baton.skills.services.decision_age import aged

    return aged(stores, client.search_text(text, limit, extra=limit), clock.now())[:limit]
