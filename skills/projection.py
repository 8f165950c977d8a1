"""Apply registry events to every store: the registry first (the source of truth), then the
conflict graph and the recall index, which are derived from it. Touches that reach the
stores here (from the projector or a delayed delivery) are checked for overlaps, and each
new overlap is signalled, as `baton touch` does on the embedded default."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.outcome import Found
from registry.model import DecisionRecorded, Event, FilesTouched, Session, Status
from skills.stores import Stores


def _signal_overlaps(stores: Stores, task_id: str, session_id: str, files: list[FileRef], at: datetime,
                     warnings: list[str]) -> None:
    from skills.binding import ActiveTask
    from skills.signalling import conflict_signal
    from skills.touch import overlaps

    shared = stores.graph.shared_files(task_id)
    if not isinstance(shared, Found):
        warnings.append(f"conflict graph unavailable: {shared.reason}")
        return
    conflicts, _, by_key = overlaps(task_id, shared.value)
    touched = {f.key for f in files}
    candidates = [c for c in conflicts if touched.intersection(c.shared_files)]
    if not candidates:
        return
    try:
        known = stores.signals.known([str(c.signal_id) for c in candidates])
        task = ActiveTask(task_id, session_id, "projection")
        stores.signals.publish([conflict_signal(c, task, [by_key[k] for k in c.shared_files], at)
                                for c in candidates if str(c.signal_id) not in known])
    except StoreUnavailable as exc:
        warnings.append(str(exc))


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
        at = max(e.at for e in mine)
        try:
            stores.graph.record(task_id, session.status.value, files, at,
                                session_id=mine[-1].session_id, depends_on=session.depends_on)
        except StoreUnavailable as exc:
            warnings.append(str(exc))
            continue
        if files and session.status is Status.active:
            _signal_overlaps(stores, task_id, mine[-1].session_id, files, at, warnings)
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
