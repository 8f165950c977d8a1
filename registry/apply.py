"""The pure projection: apply_event(session, event) -> session.

Replay-safe by construction, so applying an event twice, or events in any order, yields the
same session: sets are unions, times are min/max, and every single-valued field is a
last-writer-wins register ordered by (time, rank, event id), which an older or replayed
event can never win.

Fencing: after a take-over (TakenOver), a write of a session it superseded, stamped at or
after it, is kept as that run's late write and merges nothing else, not even the ticket's
last activity. Whether a write is late is decided from the events themselves (the write's
session and time against the take-overs'), so a replay, and a fold of the log in time
order, decide it alike; a write that reaches the store before the take-over that fences it
was not late when it came and stays merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import reduce
from typing import Any, TypeVar

from pydantic import BaseModel

from baton import clock
from baton.registry.model import (
    PHASE_RANK,
    Bound,
    CheckEntry,
    CheckpointRecord,
    CheckpointTaken,
    CheckRecorded,
    ConstraintAdded,
    DecisionRecorded,
    DecisionSuperseded,
    DependencyAdded,
    Ended,
    Entry,
    Event,
    EvidenceRecorded,
    FailureRecorded,
    FilesTouched,
    GoalSet,
    HandoffRecord,
    HandoffVerified,
    HandoffWritten,
    LateWrite,
    LeaseEntry,
    LeaseGranted,
    LeaseReleased,
    NextActionSet,
    Phase,
    PhaseChanged,
    Provenance,
    ReleaseEntry,
    RunEntry,
    RunStarted,
    SecretsRedacted,
    Session,
    StageRecorded,
    Stamp,
    Status,
    StepCompleted,
    TakenOver,
    TakeoverEntry,
    Touch,
    VerificationRecord,
    WorkflowRecord,
    WorkRemaining,
    supersede_link,
)

EntryT = TypeVar("EntryT", bound=Entry)

# Events a run does not make for itself: a take-over, and those that carry another's time and
# session to mark this ticket (a supersede link, a lease's release, a redaction). A lease's
# grant is decided by the registry at once (baton.skills.services.leases), so it is never late.
_NEVER_LATE = (TakenOver, DecisionSuperseded, LeaseGranted, LeaseReleased, SecretsRedacted)
# The events each recorded as an entry of its text, by the session field it goes to.
_TEXT_ENTRIES = {StepCompleted: "completed_steps", FailureRecorded: "failures", ConstraintAdded: "constraints",
                 WorkRemaining: "remaining_work", EvidenceRecorded: "evidence"}


def _union(current: list[str], more: list[str]) -> list[str]:
    return sorted(set(current).union(more))


def _with_entry(entries: list[EntryT], entry: EntryT) -> list[EntryT]:
    """Entries keyed by text; the earliest recording of a text is the one kept."""
    kept = [e for e in entries if e.text != entry.text]
    same = [e for e in entries if e.text == entry.text]
    first = min([*same, entry], key=lambda e: (e.at, e.event_id))
    return sorted([*kept, first], key=lambda e: (e.at, e.event_id, e.text))


def _entry(record: type[EntryT], event: Event, text: str, /, **fields: Any) -> EntryT:
    """The entry keyed by text that event records, with its time, session and id."""
    return record(text=text, at=event.at, session_id=event.session_id, event_id=str(event.event_id), **fields)


def _register(session: Session, name: str, stamp: Stamp, **values: object) -> dict:
    """The register name's values with its stamp (the field `{name}_stamp`) when that stamp is later
    than the session's; else nothing."""
    current = getattr(session, f"{name}_stamp")
    return {**values, f"{name}_stamp": stamp} if current is None or stamp.order() > current.order() else {}


def _phase(session: Session, phase: Phase, stamp: Stamp) -> dict:
    return _register(session, "phase", stamp.model_copy(update={"rank": PHASE_RANK[phase]}), phase=phase)


def _kept(event: Event, record: type[BaseModel]) -> dict:
    """The event's fields that record declares too, but for an entry's own (its key and
    stamp), as the event holds them."""
    return event.model_dump(include=set(record.model_fields) - set(Entry.model_fields))


def fold(events: Iterable[Event]) -> Session | None:
    """The projection of a ticket's whole log (None for no events)."""
    return reduce(apply_event, events, None)


def fold_onto(stored: Callable[[str], Session | None], events: Iterable[Event]) -> dict[str, Session]:
    """The sessions the events change, each folded onto stored(ticket), its stored
    projection: what a read shows of events not projected yet."""
    sessions: dict[str, Session] = {}
    for event in events:
        task_id = event.task_id
        sessions[task_id] = apply_event(sessions[task_id] if task_id in sessions else stored(task_id), event)
    return sessions


def apply_event(session: Session | None, event: Event) -> Session:
    """Return session with event merged in; session None means the ticket's first event.

    A SecretsRedacted event changes nothing here (it carries the time and session of the
    latest event it rewrites): the store rewrites the events it names and folds the log
    again (SessionStore.append)."""
    if session is None:
        session = Session(task_id=event.task_id, created_at=event.at, last_activity=event.at)
    if session.task_id != event.task_id:
        raise ValueError(f"event for {event.task_id} applied to session {session.task_id}")
    event_id = str(event.event_id)
    if not isinstance(event, _NEVER_LATE):
        fence = session.fenced_by(event.session_id, event.at)
        if fence is not None:
            return session.model_copy(update={
                "session_ids": _union(session.session_ids, [event.session_id]),
                "late_writes": _with_entry(session.late_writes, _entry(
                    LateWrite, event, event_id, provenance=Provenance.observed, kind=event.type,
                    run_id=fence.superseded_run, token=fence.token))})
    stamp = Stamp(at=event.at, event_id=event_id)
    update: dict = {
        "created_at": min(session.created_at, event.at),
        "last_activity": max(session.last_activity, event.at),
        "session_ids": _union(session.session_ids, [event.session_id]),
    }
    if isinstance(event, Bound):
        update |= _register(session, "lifecycle", stamp, lifecycle=Status.active)
        update |= _register(session, "location", stamp, repo=event.repo, worktree_path=event.worktree_path,
                            branch=event.branch, bound_session=event.session_id)
        # A bind that does not name its agent says nothing about it: the recorded one stays.
        if event.agent is not None:
            update |= _register(session, "agent", stamp, agent=event.agent)
        if event.reopens:
            update["reopened_by"] = _union(session.reopened_by, [event_id])
            update |= _phase(session, Phase.planning, stamp)
    elif isinstance(event, FilesTouched):
        files = dict(session.files)
        for ref in event.files:
            seen = files.get(ref.key)
            if seen is None or seen.last_at < event.at:
                files[ref.key] = Touch(repo=ref.repo, path=ref.path, last_at=event.at)
        update["files"] = files
    elif isinstance(event, DecisionRecorded):
        update["decisions"] = _with_entry(session.decisions, _entry(
            Entry, event, event.text, context=event.context, inherited_from=event.inherited_from))
        if event.replaces:
            update["replaces"] = _union(session.replaces, [f"{event_id} {link}" for link in event.replaces])
    elif isinstance(event, DecisionSuperseded):
        update["superseded_by"] = _union(session.superseded_by, [supersede_link(
            str(event.decision_event_id), event.by_task_id, str(event.by_event_id))])
    elif isinstance(event, PhaseChanged):
        update |= _phase(session, event.phase, stamp)
    elif isinstance(event, NextActionSet):
        update |= _register(session, "next_action", stamp, next_action=event.text)
    elif isinstance(event, DependencyAdded):
        update["depends_on"] = _union(session.depends_on, list(event.depends_on))
    elif isinstance(event, GoalSet):
        update |= _register(session, "goal", stamp, goal=event.text, goal_inherited_from=event.inherited_from)
    elif isinstance(event, (StepCompleted, FailureRecorded, ConstraintAdded, WorkRemaining, EvidenceRecorded)):
        field = _TEXT_ENTRIES[type(event)]
        update[field] = _with_entry(getattr(session, field), _entry(
            Entry, event, event.text,
            provenance=event.provenance if isinstance(event, EvidenceRecorded) else Provenance.reported,
            inherited_from=event.inherited_from if isinstance(event, ConstraintAdded) else None))
    elif isinstance(event, CheckRecorded):
        result = "timed out or not run" if event.exit_status is None else f"exit {event.exit_status}"
        update["checks"] = _with_entry(session.checks, _entry(
            CheckEntry, event, f"{event.command} -> {result} at {clock.to_text(event.at)}",
            provenance=event.provenance, **_kept(event, CheckEntry)))
    elif isinstance(event, HandoffWritten):
        update |= _register(session, "handoff", stamp,
                            handoff=HandoffRecord(path=event.path, written_at=event.at, claims=event.claims))
    elif isinstance(event, HandoffVerified):
        update |= _register(session, "handoff_verification", stamp, handoff_verification=VerificationRecord(
            verified_at=event.at, **_kept(event, VerificationRecord)))
    elif isinstance(event, StageRecorded):
        update |= _register(session, "workflow", stamp, workflow=WorkflowRecord(
            recorded_at=event.at, **_kept(event, WorkflowRecord)))
    elif isinstance(event, CheckpointTaken):
        update |= _register(session, "checkpoint", stamp, checkpoint=CheckpointRecord(
            id=event.checkpoint_id, taken_at=event.at, **_kept(event, CheckpointRecord)))
    elif isinstance(event, RunStarted):
        update["run_log"] = _with_entry(session.run_log, _entry(
            RunEntry, event, event_id, provenance=Provenance.observed, kind=event.run_kind,
            **_kept(event, RunEntry)))
    elif isinstance(event, LeaseGranted):
        update["leases"] = _with_entry(session.leases, _entry(LeaseEntry, event, event_id, **_kept(event, LeaseEntry)))
    elif isinstance(event, LeaseReleased):
        update["lease_releases"] = _with_entry(session.lease_releases, _entry(
            ReleaseEntry, event, str(event.lease_id), **_kept(event, ReleaseEntry)))
    elif isinstance(event, TakenOver):
        update["takeovers"] = _with_entry(session.takeovers, _entry(
            TakeoverEntry, event, str(event.token), provenance=Provenance.observed, holder=event.session_id,
            **{**_kept(event, TakeoverEntry), "superseded": sorted(event.superseded)}))
    elif isinstance(event, Ended):
        update |= _register(session, "lifecycle", stamp, lifecycle=Status(event.status))
        if event.status == Status.completed:
            update |= _phase(session, Phase.completed, stamp)
    return session.model_copy(update=update)
