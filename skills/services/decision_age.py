"""Which recalled decisions still hold: a ranking applied after any search (vector, keyword
or fused), so it composes with however recall finds its hits.

A decision is not current when a later one was recorded as replacing it (`baton decide
--supersedes`), when its ticket ended stalled (abandoned), or when it is older than the
recall horizon (BATON_RECALL_HORIZON). It carries its marks; nothing is dropped here.
A superseded decision is shown with its replacement (the newest of its chain of links), the
replacement first, as one result where the better of the two ranked: it takes one of the
limit's places, and the other is read by the link from the registry when it did not score.
Abandoned and old decisions, and a superseded one whose replacement cannot be read, rank
below the current ones.

The links and the tickets' states are read from the registry at read time, not stored in
recall's payloads: a supersede arrives after the replaced decision was indexed, and recall
stays an enrichment that never has to be rewritten. With the registry unavailable, the hits
keep their order, unmarked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from uuid import UUID

from baton.outcome import Found
from baton.recall.base import DecisionRecord, ScoredDecision
from baton.registry.model import Session, Status
from baton.shown_text import clipped
from baton.skills.core.indexing import decision_record
from baton.skills.runtime.stores import Stores

SHOWN_TEXT = 80  # of a replacing decision, in a mark


@dataclass(frozen=True)
class AgedDecision:
    hit: ScoredDecision
    marks: tuple[str, ...] = ()  # why it is not current: "superseded by T: ...", "abandoned", "older than N days"
    replaces: tuple[AgedDecision, ...] = ()  # the superseded decisions shown in its place, nearest first

    @property
    def current(self) -> bool:
        return not self.marks


def aged(stores: Stores, hits: list[ScoredDecision], now: datetime) -> list[AgedDecision]:
    """hits, marked, each superseded one in its replacement's replaces (nearest first along the
    chain), then those with other marks, fewer first (each group in the search's order)."""
    sessions: dict[tuple[str, str], Session | None] = {}

    def session(project: str, task_id: str) -> Session | None:
        if (project, task_id) not in sessions:
            found = stores.for_project(project).registry.get(task_id)
            sessions[project, task_id] = found.value if isinstance(found, Found) else None
        return sessions[project, task_id]

    horizon = stores.settings.recall_horizon

    def marked(hit: ScoredDecision) -> AgedDecision:
        record = hit.record
        owner = session(record.project, record.task_id)
        marks = [] if owner is None else [
            f"superseded by {by_task}" + (f": {clipped(later.text, SHOWN_TEXT)}" if later else "")
            for by_task, by_event in owner.superseders(record.text)
            for later in [_decision(record.project, by_task, by_event, session(record.project, by_task))]]
        if owner is not None and owner.status is Status.stalled:
            marks.append("abandoned")
        if horizon.total_seconds() > 0 and now - datetime.fromisoformat(record.recorded_at) > horizon:
            marks.append(f"older than {horizon.days} days")
        return AgedDecision(hit, tuple(marks))

    def newest(record: DecisionRecord) -> tuple[DecisionRecord, int] | None:
        """The decision that replaces record at the end of its chain of links (the first link's
        where several replace one), and how many links away; None when nothing readable does."""
        found, depth, seen = None, 0, {record.point_id}
        while (owner := session(record.project, record.task_id)) is not None:
            later = next((r for by_task, by_event in owner.superseders(record.text)
                          if (r := _decision(record.project, by_task, by_event, session(record.project, by_task)))
                          is not None and r.point_id not in seen), None)
            if later is None:
                break
            found, depth, record = later, depth + 1, later
            seen.add(later.point_id)
        return None if found is None else (found, depth)

    def older(record: DecisionRecord) -> list[tuple[DecisionRecord, int]]:
        """The decisions record replaces, along their own links in turn, and how many links away."""
        found, todo, seen = [], [(record, 0)], {record.point_id}
        while todo:
            newer, depth = todo.pop(0)
            owner = session(newer.project, newer.task_id)
            for old_task, old_event in [] if owner is None else owner.replaced(newer.text):
                old = _decision(newer.project, old_task, old_event, session(newer.project, old_task))
                if old is not None and old.point_id not in seen:
                    seen.add(old.point_id)
                    found.append((old, depth + 1))
                    todo.append((old, depth + 1))
        return found

    heads: dict[UUID, AgedDecision] = {}
    under: dict[UUID, list[tuple[int, int, AgedDecision]]] = {}  # head -> (links away, rank, decision)
    placed: set[UUID] = set()
    for rank, hit in enumerate(hits):
        key = hit.record.point_id
        chain = newest(hit.record) if key not in heads else None
        if chain is None:
            heads.setdefault(key, marked(hit))
            placed.add(key)
            continue
        head, depth = chain
        if head.point_id not in heads:
            heads[head.point_id] = marked(ScoredDecision(record=head, score=hit.score))
        under.setdefault(head.point_id, []).append((depth, rank, marked(hit)))
        placed |= {head.point_id, key}
    for head_rank, (key, head_shown) in enumerate(list(heads.items())):
        for old, depth in older(head_shown.hit.record):  # what no hit brought: after the hits at its depth
            if old.point_id not in placed:
                placed.add(old.point_id)
                under.setdefault(key, []).append(
                    (depth, len(hits) + head_rank, marked(ScoredDecision(record=old, score=head_shown.hit.score))))
    ranked = sorted(heads, key=lambda key: len(heads[key].marks))
    return [replace(heads[key], replaces=tuple(a for _, _, a in sorted(under.get(key, []), key=lambda u: u[:2])))
            for key in ranked]


def _decision(project: str, task_id: str, event_id: str, owner: Session | None) -> DecisionRecord | None:
    entry = None if owner is None else next((d for d in owner.decisions if d.event_id == event_id), None)
    return None if owner is None or entry is None else decision_record(project, owner, entry)
