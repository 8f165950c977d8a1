"""Apply registry events to every store: the registry first (the source of truth), then the
conflict graph and the recall queue, which are derived from it. Touches that reach the
stores here (from the projector or a delayed delivery) are checked for overlaps, and each
new overlap is signalled, as `baton touch` does on the embedded default. Decisions are
queued for the indexer (baton.skills.core.indexing), never embedded here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from baton.errors import StoreUnavailable
from baton.registry.model import DecisionRecorded, Event, FilesTouched, Session, Status
from baton.skills.core.binding import ActiveTask
from baton.skills.core.indexing import queue_decisions, start_background_indexer
from baton.skills.core.overlaps import signal_new_overlaps
from baton.skills.runtime.stores import Stores


def project(stores: Stores, events: Sequence[Event], *,
            renew: Callable[[], None] | None = None) -> tuple[dict[str, Session], list[str]]:
    """Append events to the registry and bring the graph and recall up to date.

    Raises StoreUnavailable when the registry cannot take them; a failing graph or recall
    queue only adds a warning (recall heals on the next resume, the graph on the next write).
    Queued decisions start a background indexer (baton.skills.core.indexing), in the projector too.
    renew: called before each ticket's graph write while the graph answers, by long-running
    work (the projector) whose batches may need more server time than one command's budget.
    """
    sessions = stores.registry.append(events)
    warnings: list[str] = []
    graph_failed = False
    for task_id, session in sessions.items():
        mine = [e for e in events if e.task_id == task_id]
        files = [f for e in mine if isinstance(e, FilesTouched) for f in e.files]
        at = max(e.at for e in mine)
        if renew is not None and not graph_failed:
            renew()
        try:
            stores.graph.record(task_id, session.status.value, files, at,
                                session_id=mine[-1].session_id, depends_on=session.depends_on)
        except StoreUnavailable as exc:
            warnings.append(str(exc))
            graph_failed = True
            continue
        if files and session.status is Status.active:
            signal_new_overlaps(stores, ActiveTask(task_id, mine[-1].session_id, "projection"), files, at, warnings)
    decisions = [e for e in events if isinstance(e, DecisionRecorded)]
    if decisions:
        from baton.recall.base import DecisionRecord

        trouble = queue_decisions(stores, [DecisionRecord(task_id=e.task_id, session_id=e.session_id, text=e.text,
                                                          context=e.context, recorded_at=e.at.isoformat(), repo=e.repo)
                                           for e in decisions])
        warnings += trouble
        if not trouble:
            start_background_indexer(stores.settings)
    return sessions, warnings
