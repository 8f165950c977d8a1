"""The write skills: bind, touch, decide, update and end.

Every write is one or more registry events (the source of truth). The conflict graph,
the signal log and the recall index are then brought up to date; if one of them fails,
the write still stands and the failure is returned as a warning.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import FileRef, WorktreeLocator
from baton.ids import check_task_id
from baton.outcome import Found, NotFound
from graph.conflicts import FileConflict, should_emit_conflict_signal
from registry.model import (
    Bound, DecisionRecorded, DependencyAdded, Ended, FailureRecorded, FilesTouched, NextActionSet, Phase,
    PhaseChanged, Session, Status, StepCompleted,
)
from signals.model import Signal, SignalPayload, SignalType, derived_signal_id
from skills.binding import ActiveTask, Binding, Place, read_binding, write_binding
from skills.stores import Stores

MAX_PATHS_PER_CALL = 1000


@dataclass
class WriteReport:
    session: Session | None = None
    warnings: list[str] = field(default_factory=list)
    conflicts: list[FileConflict] = field(default_factory=list)
    new_conflicts: list[FileConflict] = field(default_factory=list)
    conflict_paths: dict[str, list[str]] = field(default_factory=dict)
    session_id: str | None = None
    binding_path: Path | None = None
    previous_task: str | None = None


def _event_id() -> uuid.UUID:
    return uuid.uuid4()


def _sync_graph(stores: Stores, session: Session, files: list[FileRef], at: datetime, report: WriteReport) -> bool:
    try:
        stores.graph.record(session.task_id, session.status.value, files, at)
        return True
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return False


def _publish(stores: Stores, signals: list[Signal], report: WriteReport) -> list[bool] | None:
    try:
        return stores.signals.publish(signals)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return None


def _signal(kind: SignalType, source: str, task: ActiveTask, repo: str, at: datetime, **payload) -> Signal:
    return Signal(signal_id=derived_signal_id(kind, source), signal_type=kind, task_id=task.task_id,
                  session_id=task.session_id, repo=repo, emitted_at=at, payload=SignalPayload(**payload))


def bind(stores: Stores, task_id: str, place: Place, *, agent: str | None = None,
         session_id: str | None = None, at: datetime | None = None) -> WriteReport:
    """Bind the worktree to task_id and record the session; a completed ticket is reopened.

    The binding file is written even when the registry is down (then StoreUnavailable is
    raised after it), so the worktree always knows its ticket.
    """
    check_task_id(task_id)
    at = at or clock.now()
    report = WriteReport()
    previous = read_binding_quietly(place)
    if session_id is None:
        session_id = previous.session_id if previous and previous.task_id == task_id else uuid.uuid4().hex
    report.session_id = session_id
    report.previous_task = previous.task_id if previous and previous.task_id != task_id else None
    report.binding_path = write_binding(place, Binding(task_id, session_id, at, agent))
    current = stores.registry.get(task_id)
    if not isinstance(current, (Found, NotFound)):
        raise StoreUnavailable("session registry", current.reason)
    reopens = isinstance(current, Found) and current.value.status is Status.completed
    event = Bound(event_id=_event_id(), task_id=task_id, session_id=session_id, at=at, agent=agent,
                  repo=place.repo, worktree_path=str(place.root),
                  branch=place.worktree.branch if place.worktree else None, reopens=reopens)
    session = stores.registry.append([event])[task_id]
    report.session = session
    _sync_graph(stores, session, [], at, report)
    task = ActiveTask(task_id, session_id, "bind")
    _publish(stores, [_signal(SignalType.ticket_claimed, str(event.event_id), task, place.repo, at,
                              reason="reopened" if reopens else "")], report)
    return report


def read_binding_quietly(place: Place) -> Binding | None:
    """The current binding, or None when it is missing or unreadable (bind rewrites it)."""
    try:
        return read_binding(place)
    except BadInput:
        return None


def file_refs(raw_paths: list[str], cwd: Path, locator: WorktreeLocator) -> list[FileRef]:
    if not raw_paths:
        raise BadInput("no paths given")
    if len(raw_paths) > MAX_PATHS_PER_CALL:
        raise BadInput(f"too many paths in one call: {len(raw_paths)} (at most {MAX_PATHS_PER_CALL})")
    refs: dict[str, FileRef] = {}
    for raw in raw_paths:
        ref = locator.file_ref(raw, cwd)
        refs.setdefault(ref.key, ref)
    return list(refs.values())


def touch(stores: Stores, task: ActiveTask, raw_paths: list[str], cwd: Path, locator: WorktreeLocator,
          *, at: datetime | None = None) -> WriteReport:
    """Record touched files; report overlaps with other active tickets, new ones first signalled."""
    refs = file_refs(raw_paths, cwd, locator)
    at = at or clock.now()
    report = WriteReport()
    event = FilesTouched(event_id=_event_id(), task_id=task.task_id, session_id=task.session_id, at=at, files=refs)
    session = stores.registry.append([event])[task.task_id]
    report.session = session
    if not _sync_graph(stores, session, refs, at, report) or session.status is not Status.active:
        return report
    shared = stores.graph.shared_files(task.task_id)
    if not isinstance(shared, Found):
        report.warnings.append(f"conflict graph unavailable: {shared.reason}")
        return report
    by_key = {key: FileRef(repo=t.repo, path=t.path) for key, t in session.files.items()}
    for files in shared.value.values():
        by_key.update({f.key: f for f in files})
    report.conflicts = should_emit_conflict_signal(
        {"task_id": task.task_id, "files_touched": list(session.files)},
        [{"task_id": other, "files_touched": [f.key for f in files]} for other, files in shared.value.items()])
    report.conflict_paths = {other: [f.path for f in files] for other, files in shared.value.items()}
    touched = {ref.key for ref in refs}
    candidates = [c for c in report.conflicts if touched.intersection(c.shared_files)]
    if not candidates:
        return report
    signals = [conflict_signal(c, task, [by_key[k] for k in c.shared_files], at) for c in candidates]
    fresh = _publish(stores, signals, report)
    report.new_conflicts = candidates if fresh is None else [c for c, new in zip(candidates, fresh) if new]
    return report


def conflict_signal(conflict: FileConflict, task: ActiveTask, files: list[FileRef], at: datetime) -> Signal:
    repos = {f.repo for f in files}
    repo = repos.pop() if len(repos) == 1 else ""
    paths = [f.path if repo else f.key for f in files]
    return Signal(signal_id=conflict.signal_id, signal_type=SignalType.conflict_detected, task_id=task.task_id,
                  session_id=task.session_id, repo=repo, emitted_at=at,
                  payload=SignalPayload(file_paths=paths, related_task_id=conflict.other_task_id,
                                        reason=f"{task.task_id} and {conflict.other_task_id} both touched {', '.join(paths)}"))


def decide(stores: Stores, task: ActiveTask, text: str, context: str, place: Place,
           *, at: datetime | None = None) -> WriteReport:
    """Record a decision, signal it, and index it for recall (recall failures only warn)."""
    if not text.strip():
        raise BadInput("decision text is empty")
    at = at or clock.now()
    report = WriteReport()
    event = DecisionRecorded(event_id=_event_id(), task_id=task.task_id, session_id=task.session_id, at=at,
                             text=text, context=context.strip(), repo=place.repo)
    session = stores.registry.append([event])[task.task_id]
    report.session = session
    _sync_graph(stores, session, [], at, report)
    _publish(stores, [_signal(SignalType.decision_recorded, str(event.event_id), task, place.repo, at,
                              reason=event.text[:200])], report)
    from recall.base import DecisionRecord

    try:
        stores.recall().record([DecisionRecord(task_id=task.task_id, session_id=task.session_id, text=event.text,
                                               context=event.context, recorded_at=at.isoformat(), repo=place.repo)])
    except StoreUnavailable as exc:
        report.warnings.append(f"{exc}; the decision is kept and will be indexed on a later resume")
    return report


def update(stores: Stores, task: ActiveTask, place: Place, *, phase: Phase | None = None,
           next_action: str | None = None, done: list[str] = (), failed: list[str] = (),
           depends_on: list[str] = (), at: datetime | None = None) -> WriteReport:
    at = at or clock.now()
    common = {"task_id": task.task_id, "session_id": task.session_id, "at": at}
    for label, values in (("--done", done), ("--failed", failed)):
        if any(not v.strip() for v in values):
            raise BadInput(f"{label} text is empty")
    if next_action is not None and not next_action.strip():
        raise BadInput("--next text is empty")
    dependencies = [check_task_id(d) for d in depends_on]
    if task.task_id in dependencies:
        raise BadInput(f"{task.task_id} cannot depend on itself")
    events = []
    if phase is not None:
        current = stores.registry.get(task.task_id)
        if isinstance(current, Found) and current.value.status is Status.completed and phase is not Phase.completed:
            raise BadInput(f"{task.task_id} is completed; `baton bind {task.task_id}` reopens it")
        events.append(PhaseChanged(event_id=_event_id(), phase=phase, **common))
    if next_action is not None:
        events.append(NextActionSet(event_id=_event_id(), text=next_action, **common))
    events += [StepCompleted(event_id=_event_id(), text=t, **common) for t in done]
    events += [FailureRecorded(event_id=_event_id(), text=t, **common) for t in failed]
    if dependencies:
        events.append(DependencyAdded(event_id=_event_id(), depends_on=dependencies, **common))
    if not events:
        raise BadInput("nothing to update: give --phase, --next, --done, --failed or --depends-on")
    report = WriteReport()
    session = stores.registry.append(events)[task.task_id]
    report.session = session
    _sync_graph(stores, session, [], at, report)
    if phase is not None:
        _publish(stores, [_signal(SignalType.phase_changed, str(events[0].event_id), task, place.repo, at,
                                  phase=phase.value, reason=f"phase {phase.value}")], report)
    return report


def end(stores: Stores, task: ActiveTask, status: Status, place: Place, *, at: datetime | None = None) -> WriteReport:
    at = at or clock.now()
    current = stores.registry.get(task.task_id)
    if isinstance(current, NotFound):
        raise BadInput(f"no session for {task.task_id}: nothing to end")
    event = Ended(event_id=_event_id(), task_id=task.task_id, session_id=task.session_id, at=at, status=status)
    report = WriteReport()
    session = stores.registry.append([event])[task.task_id]
    report.session = session
    _sync_graph(stores, session, [], at, report)
    if status is Status.completed:
        _publish(stores, [_signal(SignalType.ticket_completed, str(event.event_id), task, place.repo, at,
                                  reason=f"{task.task_id} completed")], report)
    return report
