"""The write skills: bind, update and end (touch and decide, on the hook's budget, are
skills.touch and skills.decide).

Every write is one or more registry events (the source of truth), projected into the
graph and the recall index by skills.projection, then signalled. If one of the derived
stores fails, the write still stands and the failure is returned as a warning; if the
registry's server is down, the events wait locally (skills.pending).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.ids import BATON_NAMESPACE, check_task_id
from baton.outcome import Found, NotFound, Unavailable
from registry.model import (
    Bound,
    CheckRecorded,
    ConstraintAdded,
    DependencyAdded,
    Ended,
    Event,
    EvidenceRecorded,
    FailureRecorded,
    GoalSet,
    NextActionSet,
    Phase,
    PhaseChanged,
    Provenance,
    Status,
    StepCompleted,
    WorkRemaining,
)
from registry.wire import event_adapter
from signals.model import Signal, SignalType
from skills.binding import ActiveTask, Binding, Place, read_binding, write_binding
from skills.pending import keep_or_raise
from skills.projection import project
from skills.signalling import signal
from skills.stores import Stores
from skills.write_report import MAX_TEXT, WriteReport

if TYPE_CHECKING:
    from skills.checks import CheckResult



def _event_id() -> uuid.UUID:
    return uuid.uuid4()


def _commit(stores: Stores, events: list[Event], report: WriteReport, *, deliver_later: bool = False) -> None:
    """Project events into every store, or hand them to the projector through Kafka; if the
    registry's server is down, keep them locally. deliver_later: with Kafka, keep them for
    the background delivery instead of waiting for Kafka's acknowledgement."""
    adapter = event_adapter()
    if stores.event_log is not None:
        messages = [(str(e.event_id), e.task_id, adapter.dump_json(e).decode()) for e in events]
        try:
            if deliver_later:
                stores.event_log.keep(messages)
            else:
                stores.event_log.append(messages)
        except StoreUnavailable as exc:
            report.warnings.append(str(exc))
        return
    try:
        _, warnings = project(stores, events)
    except StoreUnavailable as exc:
        report.warnings.append(keep_or_raise(stores, [adapter.dump_json(e).decode() for e in events], exc))
        return
    report.warnings += warnings


def _deliver_kept_writes_later(stores: Stores) -> None:
    """deliver_later kept the writes in the Kafka outboxes (without Kafka they were applied):
    start their background delivery."""
    if stores.settings.kafka_bootstrap:
        from skills.relay import start_background_delivery

        start_background_delivery(stores.settings)


def _publish(stores: Stores, signals: list[Signal], report: WriteReport, *,
             deliver_later: bool = False) -> list[bool] | None:
    try:
        return stores.signals.publish(signals, deliver=not deliver_later)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
        return None


def bind(stores: Stores, task_id: str, place: Place, *, agent: str | None = None,
         session_id: str | None = None, at: datetime | None = None, deliver_later: bool = False) -> WriteReport:
    """Bind the worktree to task_id and record the session; a completed ticket is reopened.

    A bind without an agent keeps the one already recorded. A session claims its ticket
    once per run: the claim's id, and a reopening bind's, derive from the ticket, the
    session and the run, so binding again (a second resume) emits nothing new, even when
    the first bind is still on its way to the registry.

    deliver_later (what resume asks for): with Kafka, the event and its signal are kept for
    the background delivery, so the answer never waits for a Kafka producer's first message.

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
    reopens = isinstance(current, Found) and current.value.status is Status.completed
    run = current.value.runs + reopens if isinstance(current, Found) else 1 if isinstance(current, NotFound) else None
    claim = f"{task_id}:{session_id}:run {run}"
    event = Bound(event_id=uuid.uuid5(BATON_NAMESPACE, f"reopen:{claim}") if reopens else _event_id(),
                  task_id=task_id, session_id=session_id, at=at, agent=agent,
                  repo=place.repo, worktree_path=str(place.root),
                  branch=place.worktree.branch if place.worktree else None, reopens=reopens)
    _commit(stores, [event], report, deliver_later=deliver_later)
    if run is not None or not rebinding:  # with the run unknown, a session that bound already has claimed
        task = ActiveTask(task_id, session_id, "bind")
        _publish(stores, [signal(SignalType.ticket_claimed, claim, task, place.repo, at,
                                  reason="reopened" if reopens else "")], report, deliver_later=deliver_later)
    if deliver_later:
        _deliver_kept_writes_later(stores)
    return report


def read_binding_quietly(place: Place) -> Binding | None:
    """The current binding, or None when it is missing or unreadable (bind rewrites it)."""
    try:
        return read_binding(place)
    except BadInput:
        return None


def update(stores: Stores, task: ActiveTask, place: Place, *, phase: Phase | None = None,
           next_action: str | None = None, done: list[str] = (), failed: list[str] = (),
           depends_on: list[str] = (), goal: str | None = None, constraints: list[str] = (),
           remaining: list[str] = (), evidence: list[str] = (), checks: Sequence[CheckResult] = (),
           at: datetime | None = None) -> WriteReport:
    """Record phase, next action, steps, failures, dependencies and the journal's goal,
    constraints, remaining work, evidence (reported by the agent) and checks (each with its
    own provenance)."""
    at = at or clock.now()
    common = {"task_id": task.task_id, "session_id": task.session_id, "at": at}
    for label, values in (("--done", done), ("--failed", failed), ("--constraint", constraints),
                          ("--todo", remaining), ("--evidence", evidence),
                          ("--next", [next_action] if next_action is not None else []),
                          ("--goal", [goal] if goal is not None else [])):
        for value in values:
            if not value.strip():
                raise BadInput(f"{label} text is empty")
            if len(value.strip()) > MAX_TEXT:
                raise BadInput(f"{label} text is longer than {MAX_TEXT} characters")
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
    if goal is not None:
        events.append(GoalSet(event_id=_event_id(), text=goal, **common))
    events += [ConstraintAdded(event_id=_event_id(), text=t, **common) for t in constraints]
    events += [WorkRemaining(event_id=_event_id(), text=t, **common) for t in remaining]
    events += [EvidenceRecorded(event_id=_event_id(), text=t, provenance=Provenance.reported, **common) for t in evidence]
    events += [CheckRecorded(event_id=_event_id(), command=c.command, exit_status=c.exit_status,
                             summary=c.summary, provenance=c.provenance, **common) for c in checks]
    if not events:
        raise BadInput("nothing to update: give --phase, --next, --done, --failed, --depends-on, --goal, "
                       "--constraint, --todo, --evidence or --check")
    report = WriteReport()
    _commit(stores, events, report)
    if phase is not None:
        _publish(stores, [signal(SignalType.phase_changed, str(events[0].event_id), task, place.repo, at,
                                  phase=phase.value, reason=f"phase {phase.value}")], report)
    return report


def record_events(stores: Stores, events: list[Event], *, deliver_later: bool = False) -> list[str]:
    """Commit events as every write does (projection, or the Kafka log, or kept locally
    while the registry's server is down); returns the warnings. deliver_later: as for bind."""
    report = WriteReport()
    _commit(stores, events, report, deliver_later=deliver_later)
    if deliver_later:
        _deliver_kept_writes_later(stores)
    return report.warnings


def end(stores: Stores, task: ActiveTask, status: Status, place: Place, *, at: datetime | None = None) -> WriteReport:
    at = at or clock.now()
    current = stores.registry.get(task.task_id)
    if isinstance(current, NotFound):
        raise BadInput(f"no session for {task.task_id}: nothing to end")
    event = Ended(event_id=_event_id(), task_id=task.task_id, session_id=task.session_id, at=at, status=status)
    report = WriteReport()
    _commit(stores, [event], report)
    if status is Status.completed:
        _publish(stores, [signal(SignalType.ticket_completed, str(event.event_id), task, place.repo, at,
                                  reason=f"{task.task_id} completed")], report)
    return report
