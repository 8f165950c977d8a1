"""The bind skill: bind a worktree to a ticket and record the session (baton.skills.core.commit
commits its event)."""

from __future__ import annotations

import uuid
from datetime import datetime

from baton import clock
from baton.errors import StoreUnavailable
from baton.ids import BATON_NAMESPACE, check_task_id
from baton.outcome import Found, NotFound, Unavailable
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Binding, Place, write_binding
from baton.skills.core.commit import commit, publish, read_binding_quietly, wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores
from baton.store_names import Store


def bind(stores: Stores, task_id: str, place: Place, *, agent: str | None = None,
         session_id: str | None = None, at: datetime | None = None) -> WriteReport:
    """Bind the worktree to task_id and record the session; a completed ticket is reopened.

    A bind without an agent keeps the one already recorded. A session claims its ticket
    once per run: the claim's id, and a reopening bind's, derive from the ticket, the
    session and the run, so binding again (a second resume) emits nothing new, even when
    the first bind is still on its way to the registry.

    The binding file is written even when the registry is down, so the worktree always
    knows its ticket.
    """
    check_task_id(task_id)
    at = at or clock.now()
    report = WriteReport()
    previous = read_binding_quietly(place)
    same_task = previous if previous is not None and previous.task_id == task_id else None
    if session_id is None:
        session_id = same_task.session_id if same_task else uuid.uuid4().hex
    report.session_id = session_id
    report.previous_task = previous.task_id if previous and not same_task else None
    rebinding = same_task is not None and same_task.session_id == session_id
    write_binding(place, Binding(task_id, session_id, at, agent or (same_task.agent if same_task else None)))
    current = stores.registry.get(task_id)
    if isinstance(current, Unavailable) and stores.sink.writes_need_registry:
        raise StoreUnavailable(Store.SESSION_REGISTRY, current.reason)
    # Unknown while the server is down: the bind still makes the ticket active when it lands.
    reopens = isinstance(current, Found) and current.value.status == "completed"
    run = current.value.runs + reopens if isinstance(current, Found) else 1 if isinstance(current, NotFound) else None
    claim = f"{task_id}:{session_id}:run {run}"
    event = wire_event("bound", task_id, session_id, at,
                       event_id=str(uuid.uuid5(BATON_NAMESPACE, f"reopen:{claim}")) if reopens else None,
                       agent=agent, repo=place.repo, worktree_path=str(place.root),
                       branch=place.worktree.branch if place.worktree else None, reopens=reopens)
    commit(stores, [event], report)
    if run is not None or not rebinding:  # with the run unknown, a session that bound already has claimed
        task = ActiveTask(task_id, session_id, "bind")
        publish(stores, [wire_signal(SignalType.ticket_claimed, claim, task, place.repo, at,
                                     reason="reopened" if reopens else "")], report)
    return report
