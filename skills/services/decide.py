"""The decide skill: record a decision within the hook's budget (100 ms per call).

Like baton.skills.services.touch it stays off pydantic and every recall library: the event,
the queue entry and the decision_recorded signal are built by hand (baton.registry.wire,
baton.recall.wire, baton.signals.wire) and kept by the sink; embedding happens later, in the
background indexer.

Each `--supersedes TICKET[#N]` (repeatable) reads the registry (the one decide that does) to
name a decision replaced: TICKET's Nth decision, 1-based, or its latest. Each link is the
replaced ticket's own event (DecisionSuperseded), kept with the decision in the same write,
so recall's ranking learns it from the registry at read time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.ids import parse_ticket_id, random_uuid
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.core.commit import wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import MAX_TEXT, WriteReport
from baton.skills.runtime.stores import Stores

REASON_LENGTH = 200


@dataclass(frozen=True)
class Replaced:
    """The decision a --supersedes names: its ticket, event id, and a session and time of that ticket."""

    task_id: str
    event_id: str
    session_id: str
    last_activity: datetime


def replaced_decision(stores: Stores, reference: str) -> Replaced:
    """The decision TICKET[#N] names (N 1-based, the latest without it). Raises BadInput for an
    unknown ticket, one without decisions or an N it does not have, and StoreUnavailable."""
    ticket, hashed, nth = reference.strip().partition("#")
    task_id = parse_ticket_id(ticket)
    if hashed and not (nth.isdigit() and int(nth) >= 1):
        raise BadInput(f"--supersedes {reference!r}: N in TICKET#N must be a positive whole number")
    session = stores.registry.get(task_id).unwrap("registry")
    if session is None:
        raise BadInput(f"--supersedes: no ticket {task_id} in this project")
    if not session.decisions:
        raise BadInput(f"--supersedes: {task_id} has no decision recorded")
    index = int(nth) if hashed else len(session.decisions)
    if index > len(session.decisions):
        raise BadInput(f"--supersedes: {task_id} has {len(session.decisions)} decisions, not {index}")
    entry = session.decisions[index - 1]
    return Replaced(task_id, entry.event_id, entry.session_id, session.last_activity)


def decide(stores: Stores, task: ActiveTask, text: str, context: str, place: Place,
           *, at: datetime | None = None, supersedes: Sequence[str] = ()) -> WriteReport:
    """Record a decision, signal it and queue it for recall; recall and signal failures only warn.
    supersedes: each a TICKET[#N], an earlier decision this one replaces. Raises BadInput for
    empty or over-long text or a bad supersedes, StoreUnavailable when the registry cannot take
    the write (or, with supersedes, be read)."""
    text, context = text.strip(), context.strip()
    if not text:
        raise BadInput("decision text is empty")
    for label, value in (("decision text", text), ("--context", context)):
        if len(value) > MAX_TEXT:
            raise BadInput(f"{label} is longer than {MAX_TEXT} characters")
    # The ticket replaced may be among the writes kept on this machine: delivered first, as a read command does.
    delivery = stores.sink.deliver() if supersedes else []
    replaced = list(dict.fromkeys(replaced_decision(stores, reference) for reference in supersedes))
    # Secrets never reach a store, a signal or a vector (baton.redaction).
    text, context = stores.redact(text), stores.redact(context)
    from baton.recall.wire import decision_payload, decision_point_id
    from baton.skills.core.indexing import queue_payloads, start_background_indexer

    at = at or clock.now()
    event_id = random_uuid()
    report = WriteReport(session_id=task.session_id, warnings=delivery)
    signal = wire_signal(SignalType.decision_recorded, event_id, task, place.repo, at, reason=text[:REASON_LENGTH])
    # Kept: the projection, wherever the event is delivered, queues the decision there; the
    # embedded registry takes it unprojected, and the sink queues it here.
    def queue() -> None:
        report.warnings += queue_payloads(stores, task.task_id, [(
            decision_point_id(stores.project, task.task_id, text),
            decision_payload(stores.project, task.task_id, task.session_id, text, context, at.isoformat(),
                             place.repo))])
        if not report.warnings:
            start_background_indexer(stores.settings)

    events = [wire_event("decision_recorded", task.task_id, task.session_id, at, event_id=event_id, text=text,
                         context=context, repo=place.repo, inherited_from=None,
                         replaces=[f"{old.task_id} {old.event_id}" for old in replaced])]
    for old in replaced:
        link_id = random_uuid()
        events.append(wire_event("decision_superseded", old.task_id, old.session_id, old.last_activity,
                                 event_id=link_id, decision_event_id=old.event_id, by_task_id=task.task_id,
                                 by_event_id=event_id))
    stores.sink.keep(events, derive=queue)
    try:
        stores.sink.keep_signals([signal])
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
    return report  # closing the stores starts the delivery of what was kept
