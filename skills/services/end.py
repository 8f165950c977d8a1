"""The end skill: end a ticket's session as completed or stalled."""

from __future__ import annotations

from baton import clock
from baton.errors import BadInput
from baton.outcome import NotFound
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Place, resolve_task
from baton.skills.core.commit import commit, publish, read_binding_quietly, wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores


def end(stores: Stores, place: Place, task_id: str | None, status: str) -> tuple[ActiveTask, WriteReport]:
    """End the session of the ticket named, else the worktree's, as completed or stalled,
    checkpointed first. A ticket this worktree is bound to has a session (its bind recorded
    one), so only another ticket is looked up first."""
    from baton.skills.services.checkpoint import checkpoint_here

    if status not in ("completed", "stalled"):
        raise BadInput(f"unknown status {status!r}: use completed or stalled")
    task = resolve_task(task_id, place, stores.settings.ambient)
    binding = read_binding_quietly(place)
    bound_here = binding is not None and binding.task_id == task.task_id
    if not bound_here and isinstance(stores.registry.get(task.task_id), NotFound):
        raise BadInput(f"no session for {task.task_id}: nothing to end")
    # Whoever picks the ticket up next, on this machine or another, starts from here. Taken
    # before the end is recorded: an event after a stall would make the ticket active again.
    report = WriteReport(warnings=checkpoint_here(stores, task, place, status, push=True))
    at = clock.now()
    event = wire_event("ended", task.task_id, task.session_id, at, status=str(status))
    commit(stores, [event], report)
    if status == "completed":
        publish(stores, [wire_signal(SignalType.ticket_completed, event.event_id, task, place.repo, at,
                                     reason=f"{task.task_id} completed")], report)
    return task, report
