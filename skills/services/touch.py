"""The touch skill: the hot path of an agent's PostToolUse hook (budget 100 ms per call).

It imports neither pydantic nor any recall library: the registry appends a pending event,
the graph records the touches and answers the overlaps through its file index, and only
a new overlap builds a signal (and so imports the signal model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import FileRef, WorktreeLocator
from baton.graph.conflicts import FileConflict
from baton.ids import random_uuid
from baton.registry.wire import files_touched_body
from baton.skills.core.binding import ActiveTask
from baton.skills.core.commit import WireEvent
from baton.skills.core.overlaps import signal_new_overlaps
from baton.skills.runtime.stores import Stores

MAX_PATHS_PER_CALL = 1000


@dataclass
class TouchReport:
    files: list[FileRef]
    warnings: list[str] = field(default_factory=list)
    conflicts: list[FileConflict] = field(default_factory=list)
    new_conflicts: list[FileConflict] = field(default_factory=list)
    conflict_paths: dict[str, list[str]] = field(default_factory=dict)
    forks: dict[str, str] = field(default_factory=dict)  # new overlaps with a fork or its parent: expected


def file_refs(raw_paths: list[str], cwd: Path, locator: WorktreeLocator,
              ignored: list[str] | None = None) -> list[FileRef]:
    """The files raw_paths name. A path that cannot be recorded (WorktreeLocator.file_ref)
    raises BadInput, or, given ignored, is left out with its reason added there."""
    if not raw_paths:
        raise BadInput("no paths given")
    if len(raw_paths) > MAX_PATHS_PER_CALL:
        raise BadInput(f"too many paths in one call: {len(raw_paths)} (at most {MAX_PATHS_PER_CALL})")
    refs: dict[str, FileRef] = {}
    for raw in raw_paths:
        try:
            ref = locator.file_ref(raw, cwd)
        except BadInput as exc:
            if ignored is None:
                raise
            ignored.append(f"ignored: {exc}")
            continue
        refs.setdefault(ref.key, ref)
    return list(refs.values())


def touch(stores: Stores, task: ActiveTask, raw_paths: list[str], cwd: Path, locator: WorktreeLocator,
          *, at: datetime | None = None, skip_refused: bool = False) -> TouchReport:
    """Record touched files; report overlaps with other active tickets, each new one signalled once.

    On the embedded default the overlap is found and warned about at once; where the sink keeps
    writes for a server, the hook may not import a server's client (its budget is 100 ms), so the
    overlap is found where the touch is projected, as a conflict_detected signal. Raises BadInput
    for a bad path (nothing recorded), or with skip_refused (hooks and the guard) leaves it out
    with a warning; StoreUnavailable when the registry cannot take the write."""
    ignored: list[str] = []
    refs = file_refs(raw_paths, cwd, locator, ignored if skip_refused else None)
    at = at or clock.now()
    report = TouchReport(files=refs, warnings=ignored)
    if not refs:
        return report
    event_id = random_uuid()
    body = files_touched_body(event_id, task.task_id, task.session_id, at, refs)
    # Kept for a server, closing the stores starts its delivery, whose projection checks the
    # overlaps; the embedded registry takes it unprojected and the sink runs the overlaps' part.
    stores.sink.keep([WireEvent(event_id, task.task_id, "files_touched", at, body)],
                     derive=lambda: _overlaps(stores, task, refs, at, report))
    return report


def _overlaps(stores: Stores, task: ActiveTask, refs: list[FileRef], at: datetime, report: TouchReport) -> None:
    """The graph, and the overlaps it answers, brought up to date with a touch the embedded
    registry took, at once and without the event models."""
    try:
        active = stores.graph.touch(task.task_id, refs, at)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return
    if not active:
        return
    found = signal_new_overlaps(stores, task, refs, at, report.warnings)
    if found is not None:
        report.conflicts, report.conflict_paths, report.new_conflicts = found.conflicts, found.paths, found.new
        report.forks = found.forks

