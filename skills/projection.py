"""Apply registry events to every store: the registry first (the source of truth), then the
conflict graph and the recall index, which are derived from it."""

from __future__ import annotations

from collections.abc import Sequence

from baton.errors import StoreUnavailable
from registry.model import DecisionRecorded, Event, FilesTouched, Session
from skills.stores import Stores


def project(stores: Stores, events: Sequence[Event]) -> tuple[dict[str, Session], list[str]]:
    """Append events to the registry and bring the graph and recall up to date.

    Raises StoreUnavailable when the registry cannot take them; a failing graph or recall
    index only adds a warning (recall heals on the next resume, the graph on the next write).
    """
    sessions = stores.registry.append(events)
    warnings: list[str] = []
    for task_id, session in sessions.items():
        mine = [e for e in events if e.task_id == task_id]
        files = [f for e in mine if isinstance(e, FilesTouched) for f in e.files]
        try:
            stores.graph.record(task_id, session.status.value, files, max(e.at for e in mine),
                                session_id=mine[-1].session_id, depends_on=session.depends_on)
        except StoreUnavailable as exc:
            warnings.append(str(exc))
    decisions = [e for e in events if isinstance(e, DecisionRecorded)]
    if decisions:
        from recall.base import DecisionRecord

        try:
            stores.recall().record([DecisionRecord(task_id=e.task_id, session_id=e.session_id, text=e.text,
                                                   context=e.context, recorded_at=e.at.isoformat(), repo=e.repo)
                                    for e in decisions])
        except StoreUnavailable as exc:
            warnings.append(f"{exc}; the decision is kept and will be indexed on a later resume")
    return sessions, warnings
