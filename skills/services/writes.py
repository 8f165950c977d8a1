"""The write skills: bind, update and end (touch and decide, on the hook's budget, are
baton.skills.services.touch and baton.skills.services.decide).

Every write is one or more registry events (the source of truth) and its signals. With
every store embedded they are projected at once into the registry, the graph and the
recall queue (baton.skills.core.projection); a failing derived store only adds a warning. With a
store on a server a write never waits for one: its events and signals are kept in the data
home (the Kafka outboxes, or the pending writes) and the background delivery takes them,
as a touch does (baton.skills.services.delivery). So the events and signals are built here as their JSON,
without pydantic, and validated where they are applied: keeping an update costs about
what a touch does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.ids import BATON_NAMESPACE, check_task_id
from baton.outcome import Found, NotFound, Unavailable
from baton.registry.wire import PHASES, event_body
from baton.signals.wire import SignalType, WireSignal
from baton.skills.core.binding import ActiveTask, Binding, Place, check_session_id, read_binding, write_binding
from baton.skills.core.signalling import wire_signal
from baton.skills.runtime.stores import Stores
from baton.skills.core.write_report import MAX_TEXT, WriteReport

if TYPE_CHECKING:
    from baton.registry.model import Event
    from baton.skills.handoff.checks import CheckResult


@dataclass(frozen=True, slots=True)
class WireEvent:
    """A registry event as its JSON, keyed as the event log wants it."""

    event_id: str
    task_id: str
    body: str


def _event(event_type: str, task_id: str, session_id: str, at: datetime, *, event_id: str | None = None,
           **fields) -> WireEvent:
    check_session_id(session_id)
    event_id = event_id or str(uuid.uuid4())
    return WireEvent(event_id, task_id, event_body(event_type, event_id=event_id, task_id=task_id,
                                                   session_id=session_id, at=at, **fields))


def _commit(stores: Stores, events: Sequence[WireEvent], report: WriteReport) -> None:
    """Keep the events for the background delivery when a store they go to is on a server
    (in the Kafka outbox, or among the pending writes); else project them into every store
    now. Raises StoreUnavailable when they can be neither kept nor applied."""
    if stores.settings.uses_servers:
        if stores.event_log is not None:
            stores.event_log.keep([(e.event_id, e.task_id, e.body) for e in events])
        else:
            stores.pending.keep([e.body for e in events])
        return
    from baton.registry.wire import event_adapter
    from baton.skills.core.projection import project

    adapter = event_adapter()
    _, warnings = project(stores, [adapter.validate_json(e.body) for e in events])
    report.warnings += warnings


def _publish(stores: Stores, signals: list[WireSignal], report: WriteReport) -> None:
    """Signal what was recorded: kept for the delivery where the signal log is Kafka."""
    try:
        stores.signals.publish(signals, deliver=False)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))


def _text(label: str, value: str) -> str:
    """value as baton.registry.model.Text stores it (stripped), or BadInput."""
    stripped = value.strip()
    if not stripped:
        raise BadInput(f"{label} is empty")
    if len(stripped) > MAX_TEXT:
        raise BadInput(f"{label} is longer than {MAX_TEXT} characters")
    return stripped


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
    same_task = previous is not None and previous.task_id == task_id
    if session_id is None:
        session_id = previous.session_id if same_task else uuid.uuid4().hex
    report.session_id = session_id
    report.previous_task = previous.task_id if previous and not same_task else None
    rebinding = same_task and previous.session_id == session_id
    write_binding(place, Binding(task_id, session_id, at, agent or (previous.agent if same_task else None)))
    current = stores.registry.get(task_id)
    if isinstance(current, Unavailable) and not stores.settings.database_url:
        raise StoreUnavailable("session registry", current.reason)
    # Unknown while the server is down: the bind still makes the ticket active when it lands.
    reopens = isinstance(current, Found) and current.value.status == "completed"
    run = current.value.runs + reopens if isinstance(current, Found) else 1 if isinstance(current, NotFound) else None
    claim = f"{task_id}:{session_id}:run {run}"
    event = _event("bound", task_id, session_id, at,
                   event_id=str(uuid.uuid5(BATON_NAMESPACE, f"reopen:{claim}")) if reopens else None,
                   agent=agent, repo=place.repo, worktree_path=str(place.root),
                   branch=place.worktree.branch if place.worktree else None, reopens=reopens)
    _commit(stores, [event], report)
    if run is not None or not rebinding:  # with the run unknown, a session that bound already has claimed
        task = ActiveTask(task_id, session_id, "bind")
        _publish(stores, [wire_signal(SignalType.ticket_claimed, claim, task, place.repo, at,
                                      reason="reopened" if reopens else "")], report)
    return report


def read_binding_quietly(place: Place) -> Binding | None:
    """The current binding, or None when it is missing or unreadable (bind rewrites it)."""
    try:
        return read_binding(place)
    except BadInput:
        return None


def update(stores: Stores, task: ActiveTask, place: Place, *, phase: str | None = None,
           next_action: str | None = None, done: list[str] = (), failed: list[str] = (),
           depends_on: list[str] = (), goal: str | None = None, constraints: list[str] = (),
           remaining: list[str] = (), evidence: list[str] = (), checks: Sequence[CheckResult] = (),
           at: datetime | None = None) -> WriteReport:
    """Record phase, next action, steps, failures, dependencies and the journal's goal,
    constraints, remaining work, evidence (reported by the agent) and checks (each with its
    own provenance)."""
    at = at or clock.now()
    texts = {label: [_text(f"{label} text", value) for value in values] for label, values in (
        ("--done", done), ("--failed", failed), ("--constraint", constraints), ("--todo", remaining),
        ("--evidence", evidence), ("--next", [next_action] if next_action is not None else []),
        ("--goal", [goal] if goal is not None else []))}
    dependencies = [check_task_id(d) for d in depends_on]
    if task.task_id in dependencies:
        raise BadInput(f"{task.task_id} cannot depend on itself")
    if phase is not None and phase not in PHASES:
        raise BadInput(f"unknown phase {phase!r}: use one of {', '.join(PHASES)}")
    common = (task.task_id, task.session_id, at)
    events = []
    if phase is not None:
        current = stores.registry.get(task.task_id)
        if isinstance(current, Found) and current.value.status == "completed" and phase != "completed":
            raise BadInput(f"{task.task_id} is completed; `baton bind {task.task_id}` reopens it")
        events.append(_event("phase_changed", *common, phase=str(phase)))
    events += [_event("next_action_set", *common, text=t) for t in texts["--next"]]
    events += [_event("step_completed", *common, text=t) for t in texts["--done"]]
    events += [_event("failure_recorded", *common, text=t) for t in texts["--failed"]]
    if dependencies:
        events.append(_event("dependency_added", *common, depends_on=dependencies))
    events += [_event("goal_set", *common, text=t) for t in texts["--goal"]]
    events += [_event("constraint_added", *common, text=t) for t in texts["--constraint"]]
    events += [_event("work_remaining", *common, text=t) for t in texts["--todo"]]
    events += [_event("evidence_recorded", *common, text=t, provenance="reported") for t in texts["--evidence"]]
    events += [_event("check_recorded", *common, command=_text("--check command", c.command),
                      exit_status=c.exit_status, summary=c.summary[:MAX_TEXT], provenance=str(c.provenance))
               for c in checks]
    if not events:
        raise BadInput("nothing to update: give --phase, --next, --done, --failed, --depends-on, --goal, "
                       "--constraint, --todo, --evidence or --check")
    report = WriteReport()
    _commit(stores, events, report)
    if phase is not None:
        _publish(stores, [wire_signal(SignalType.phase_changed, events[0].event_id, task, place.repo, at,
                                      phase=str(phase), reason=f"phase {phase}")], report)
    return report


def record_events(stores: Stores, events: list[Event]) -> list[str]:
    """Commit events as every write does (projected now, or kept for the delivery);
    returns the warnings."""
    from baton.registry.wire import event_adapter

    adapter = event_adapter()
    report = WriteReport()
    _commit(stores, [WireEvent(str(e.event_id), e.task_id, adapter.dump_json(e).decode()) for e in events], report)
    return report.warnings


def end(stores: Stores, task: ActiveTask, status: str, place: Place, *, at: datetime | None = None) -> WriteReport:
    """End the ticket's session as completed or stalled. A ticket this worktree is bound to
    has a session (its bind recorded one), so only another ticket is looked up first."""
    if status not in ("completed", "stalled"):
        raise BadInput(f"unknown status {status!r}: use completed or stalled")
    at = at or clock.now()
    binding = read_binding_quietly(place)
    if binding is None or binding.task_id != task.task_id:
        if isinstance(stores.registry.get(task.task_id), NotFound):
            raise BadInput(f"no session for {task.task_id}: nothing to end")
    event = _event("ended", task.task_id, task.session_id, at, status=str(status))
    report = WriteReport()
    _commit(stores, [event], report)
    if status == "completed":
        _publish(stores, [wire_signal(SignalType.ticket_completed, event.event_id, task, place.repo, at,
                                      reason=f"{task.task_id} completed")], report)
    return report
