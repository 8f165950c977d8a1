"""Building coordination signals from what a skill just recorded."""

from __future__ import annotations

from datetime import datetime

from baton.files import FileRef
from baton.graph.conflicts import FileConflict
from baton.signals.wire import SignalType, WireSignal, derived_signal_text
from baton.skills.core.binding import ActiveTask


def wire_signal(kind: SignalType, source: str, task: ActiveTask, repo: str, at: datetime, *, reason: str = "",
                phase: str | None = None) -> WireSignal:
    """The signal of a recorded event, built without pydantic."""
    return WireSignal(signal_id=derived_signal_text(kind, source), signal_type=kind, task_id=task.task_id,
                      session_id=task.session_id, repo=repo, emitted_at=at, file_paths=(), related_task_id=None,
                      reason=reason, phase=phase)


def conflict_signal(conflict: FileConflict, task: ActiveTask, files: list[FileRef], at: datetime) -> WireSignal:
    """The conflict_detected signal of one overlap; its id is the overlap's, so it is stored
    once. Built without pydantic: a touch on the hook's hot path publishes it."""
    repos = {f.repo for f in files}
    repo = repos.pop() if len(repos) == 1 else ""
    paths = tuple(f.path if repo else f.key for f in files)
    return WireSignal(signal_id=conflict.signal_id, signal_type=SignalType.conflict_detected, task_id=task.task_id,
                      session_id=task.session_id, repo=repo, emitted_at=at, file_paths=paths,
                      related_task_id=conflict.other_task_id,
                      reason=f"{task.task_id} and {conflict.other_task_id} both touched {', '.join(paths)}")
