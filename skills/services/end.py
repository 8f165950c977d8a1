"""The end skill: end a ticket's session as completed or stalled."""

from __future__ import annotations

from datetime import datetime

from baton import clock
from baton.errors import BadInput
from baton.outcome import NotFound
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.core.commit import commit, publish, read_binding_quietly, wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores


def end(stores: Stores, task: ActiveTask, status: str, place: Place, *, at: datetime | None = None) -> WriteReport:
    """End the ticket's session as completed or stalled. A ticket this worktree is bound to
    has a session (its bind recorded one), so only another ticket is looked up first."""
    if status not in ("completed", "stalled"):
        raise BadInput(f"unknown status {status!r}: use completed or stalled")
    at = at or clock.now()
    binding = read_binding_quietly(place)
    bound_here = binding is not None and binding.task_id == task.task_id
    if not bound_here and isinstance(stores.registry.get(task.task_id), NotFound):
            raise BadInput(f"no session for {task.task_id}: nothing to end")
    event = wire_event("ended", task.task_id, task.session_id, at, status=str(status))
    report = WriteReport()
    commit(stores, [event], report)
    if status == "completed":
        publish(stores, [wire_signal(SignalType.ticket_completed, event.event_id, task, place.repo, at,
                                     reason=f"{task.task_id} completed")], report)
    return report
