"""The touch skill: the hot path of an agent's PostToolUse hook (budget 100 ms per call).

It imports neither pydantic nor any recall library: the registry appends a pending event,
the graph records the touches and answers the overlaps through its file index, and only
a new overlap builds a signal (and so imports the signal model).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import FileRef, WorktreeLocator
from baton.outcome import Found
from graph.conflicts import FileConflict, should_emit_conflict_signal
from skills.binding import ActiveTask
from skills.stores import Stores

MAX_PATHS_PER_CALL = 1000


@dataclass
class TouchReport:
    files: list[FileRef]
    warnings: list[str] = field(default_factory=list)
    conflicts: list[FileConflict] = field(default_factory=list)
    new_conflicts: list[FileConflict] = field(default_factory=list)
    conflict_paths: dict[str, list[str]] = field(default_factory=dict)


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
          *, at: datetime | None = None) -> TouchReport:
    """Record touched files; report overlaps with other active tickets, each new one signalled once.

    On the embedded default the overlap is found and warned about at once. With any
    server configured, the hook may not import a server's client (its budget is 100 ms),
    so the touch is only kept locally; the next other command delivers it, and the overlap
    check runs where it is projected (skills.projection), as a conflict_detected signal.

    Raises BadInput for bad paths and StoreUnavailable when the registry cannot take the
    write; a failing graph or signal log only adds a warning.
    """
    refs = file_refs(raw_paths, cwd, locator)
    at = at or clock.now()
    report = TouchReport(files=refs)
    if stores.settings.uses_servers:
        _keep_for_delivery(stores, task, refs, at)
        return report
    stores.registry.record_touch(task.task_id, task.session_id, at, refs, event_id=str(uuid.uuid4()))
    try:
        active = stores.graph.touch(task.task_id, refs, at)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return report
    if not active:
        return report
    shared = stores.graph.shared_files(task.task_id)
    if not isinstance(shared, Found):
        report.warnings.append(f"conflict graph unavailable: {shared.reason}")
        return report
    report.conflicts, report.conflict_paths, by_key = overlaps(task.task_id, shared.value)
    touched = {ref.key for ref in refs}
    candidates = [c for c in report.conflicts if touched.intersection(c.shared_files)]
    if candidates:
        report.new_conflicts = _signal_new(stores, task, candidates, by_key, at, report)
    return report


def overlaps(task_id: str, shared: dict[str, list[FileRef]]):
    """The conflicts of task_id given the files each other ticket shares with it."""
    by_key = {f.key: f for files in shared.values() for f in files}
    conflicts = should_emit_conflict_signal(
        {"task_id": task_id, "files_touched": list(by_key)},
        [{"task_id": other, "files_touched": [f.key for f in files]} for other, files in shared.items()])
    return conflicts, {other: [f.path for f in files] for other, files in shared.items()}, by_key


def _keep_for_delivery(stores: Stores, task: ActiveTask, refs: list[FileRef], at: datetime) -> None:
    """Keep the touch event in the data home: in the Kafka outbox, or among the pending writes."""
    from registry.wire import files_touched_body

    event_id = str(uuid.uuid4())
    body = files_touched_body(event_id, task.task_id, task.session_id, at, refs)
    if stores.event_log is not None:
        stores.event_log.keep([(event_id, task.task_id, body)])
    else:
        stores.pending.keep([body])


def _signal_new(stores: Stores, task: ActiveTask, candidates: list[FileConflict], by_key: dict[str, FileRef],
                at: datetime, report: TouchReport) -> list[FileConflict]:
    """Publish one conflict_detected per overlap; the ones the log had not seen are new."""
    try:
        known = stores.signals.known([str(c.signal_id) for c in candidates])
        candidates = [c for c in candidates if str(c.signal_id) not in known]
        if not candidates:
            return []
        from skills.signalling import conflict_signal

        signals = [conflict_signal(c, task, [by_key[k] for k in c.shared_files], at) for c in candidates]
        fresh = stores.signals.publish(signals)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return candidates
    return [c for c, new in zip(candidates, fresh, strict=True) if new]
