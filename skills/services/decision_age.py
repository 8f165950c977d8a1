"""Which recalled decisions still hold: a ranking applied after any search (vector, keyword
or fused), so it composes with however recall finds its hits.

A decision is not current when a later decision was recorded as replacing it (`baton decide
--supersedes`), when its ticket was ended as stalled (abandoned), or when it is older than
the recall horizon (BATON_RECALL_HORIZON). Such a decision ranks below every current one
and carries its marks; nothing is dropped here (resume leaves them out unless asked).

The links and the tickets' states are read from the registry at read time, not stored in
recall's payloads: a supersede arrives after the replaced decision was indexed, and recall
stays an enrichment that never has to be rewritten for the registry to be right. With the
registry unavailable, the hits keep their order, unmarked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from baton.outcome import Found
from baton.recall.base import ScoredDecision
from baton.registry.model import Session, Status
from baton.shown_text import clipped
from baton.skills.runtime.stores import Stores

SHOWN_TEXT = 80  # of a replacing decision, in a mark


@dataclass(frozen=True)
class AgedDecision:
    hit: ScoredDecision
    marks: tuple[str, ...] = ()  # why it is not current: "superseded by T: ...", "abandoned", "older than N days"

    @property
    def current(self) -> bool:
        return not self.marks


def aged(stores: Stores, hits: list[ScoredDecision], now: datetime) -> list[AgedDecision]:
    """hits, marked: current ones first, then the others, fewer reasons first (each group in
    the search's order)."""
    sessions: dict[str, Session | None] = {}

    def session(task_id: str) -> Session | None:
        if task_id not in sessions:
            found = stores.registry.get(task_id)
            sessions[task_id] = found.value if isinstance(found, Found) else None
        return sessions[task_id]

    horizon = stores.settings.recall_horizon
    ranked = []
    for hit in hits:
        owner = session(hit.record.task_id)
        marks = [] if owner is None else [_superseded(by_task, by_event, session(by_task))
                                          for by_task, by_event in owner.superseders(hit.record.text)]
        if owner is not None and owner.status is Status.stalled:
            marks.append("abandoned")
        if horizon.total_seconds() > 0 and now - datetime.fromisoformat(hit.record.recorded_at) > horizon:
            marks.append(f"older than {horizon.days} days")
        ranked.append(AgedDecision(hit, tuple(marks)))
    return sorted(ranked, key=lambda a: len(a.marks))


def _superseded(by_task: str, by_event: str, by: Session | None) -> str:
    decision = None if by is None else next((d for d in by.decisions if d.event_id == by_event), None)
    if decision is None:
        return f"superseded by {by_task}"
    text = clipped(decision.text, SHOWN_TEXT)
    return f"superseded by {by_task}: {text}"
