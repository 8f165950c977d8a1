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
from typing import TypeVar

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


def _newer(candidate: Stamp, current: Stamp | None) -> bool:
    return current is None or candidate.order() > current.order()


def _union(current: list[str], more: list[str]) -> list[str]:
    return sorted(set(current).union(more))


def _with_entry(entries: list[EntryT], entry: EntryT) -> list[EntryT]:
    """Entries keyed by text; the earliest recording of a text is the one kept."""
    kept = [e for e in entries if e.text != entry.text]
    same = [e for e in entries if e.text == entry.text]
    first = min([*same, entry], key=lambda e: (e.at, e.event_id))
    return sorted([*kept, first], key=lambda e: (e.at, e.event_id, e.text))


def _phase(session: Session, phase: Phase, stamp: Stamp) -> dict:
    if _newer(stamp, session.phase_stamp):
        return {"phase": phase, "phase_stamp": stamp}
    return {}


def _lifecycle(session: Session, status: Status, stamp: Stamp) -> dict:
    if _newer(stamp, session.lifecycle_stamp):
        return {"lifecycle": status, "lifecycle_stamp": stamp}
    return {}


def new_session(event: Event) -> Session:
    return Session(task_id=event.task_id, created_at=event.at, last_activity=event.at)


def fold(events: Iterable[Event]) -> Session | None:
    """The projection of a ticket's whole log (None for no events)."""
    session = None
    for event in events:
        session = apply_event(session, event)
    return session


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
        session = new_session(event)
    if session.task_id != event.task_id:
        raise ValueError(f"event for {event.task_id} applied to session {session.task_id}")
    event_id = str(event.event_id)
    if not isinstance(event, _NEVER_LATE):
        fence = session.fenced_by(event.session_id, event.at)
        if fence is not None:
            return session.model_copy(update={
                "session_ids": _union(session.session_ids, [event.session_id]),
                "late_writes": _with_entry(session.late_writes, LateWrite(
                    text=event_id, at=event.at, session_id=event.session_id, event_id=event_id,
                    provenance=Provenance.observed, kind=event.type, run_id=fence.superseded_run,
                    token=fence.token))})
    stamp = Stamp(at=event.at, event_id=event_id)
    update: dict = {
        "created_at": min(session.created_at, event.at),
        "last_activity": max(session.last_activity, event.at),
        "session_ids": _union(session.session_ids, [event.session_id]),
    }
    if isinstance(event, Bound):
        update |= _lifecycle(session, Status.active, stamp)
        if _newer(stamp, session.location_stamp):
            update |= {"repo": event.repo, "worktree_path": event.worktree_path,
                       "branch": event.branch, "bound_session": event.session_id, "location_stamp": stamp}
        # A bind that does not name its agent says nothing about it: the recorded one stays.
        if event.agent is not None and _newer(stamp, session.agent_stamp):
            update |= {"agent": event.agent, "agent_stamp": stamp}
        if event.reopens:
            update["reopened_by"] = _union(session.reopened_by, [event_id])
            update |= _phase(session, Phase.planning, stamp.model_copy(update={"rank": PHASE_RANK[Phase.planning]}))
    elif isinstance(event, FilesTouched):
        files = dict(session.files)
        for ref in event.files:
            seen = files.get(ref.key)
            if seen is None or seen.last_at < event.at:
                files[ref.key] = Touch(repo=ref.repo, path=ref.path, last_at=event.at)
        update["files"] = files
    elif isinstance(event, DecisionRecorded):
        update["decisions"] = _with_entry(session.decisions, Entry(
            text=event.text, context=event.context, at=event.at, session_id=event.session_id,
            event_id=event_id, inherited_from=event.inherited_from))
        if event.replaces:
            update["replaces"] = _union(session.replaces, [f"{event_id} {link}" for link in event.replaces])
    elif isinstance(event, DecisionSuperseded):
        update["superseded_by"] = _union(session.superseded_by, [supersede_link(
            str(event.decision_event_id), event.by_task_id, str(event.by_event_id))])
    elif isinstance(event, (StepCompleted, FailureRecorded)):
        field = "completed_steps" if isinstance(event, StepCompleted) else "failures"
        update[field] = _with_entry(getattr(session, field), Entry(
            text=event.text, at=event.at, session_id=event.session_id, event_id=event_id))
    elif isinstance(event, PhaseChanged):
        update |= _phase(session, event.phase, stamp.model_copy(update={"rank": PHASE_RANK[event.phase]}))
    elif isinstance(event, NextActionSet):
        if _newer(stamp, session.next_action_stamp):
            update |= {"next_action": event.text, "next_action_stamp": stamp}
    elif isinstance(event, DependencyAdded):
        update["depends_on"] = _union(session.depends_on, list(event.depends_on))
    elif isinstance(event, GoalSet):
        if _newer(stamp, session.goal_stamp):
            update |= {"goal": event.text, "goal_inherited_from": event.inherited_from, "goal_stamp": stamp}
    elif isinstance(event, (ConstraintAdded, WorkRemaining, EvidenceRecorded)):
        field = {ConstraintAdded: "constraints", WorkRemaining: "remaining_work",
                 EvidenceRecorded: "evidence"}[type(event)]
        update[field] = _with_entry(getattr(session, field), Entry(
            text=event.text, at=event.at, session_id=event.session_id, event_id=event_id,
            provenance=event.provenance if isinstance(event, EvidenceRecorded) else Provenance.reported,
            inherited_from=event.inherited_from if isinstance(event, ConstraintAdded) else None))
    elif isinstance(event, CheckRecorded):
        result = "timed out or not run" if event.exit_status is None else f"exit {event.exit_status}"
        update["checks"] = _with_entry(session.checks, CheckEntry(
            text=f"{event.command} -> {result} at {clock.to_text(event.at)}", command=event.command,
            exit_status=event.exit_status, summary=event.summary, provenance=event.provenance,
            at=event.at, session_id=event.session_id, event_id=event_id, snapshot=event.snapshot))
    elif isinstance(event, HandoffWritten):
        if _newer(stamp, session.handoff_stamp):
            update |= {"handoff": HandoffRecord(path=event.path, written_at=event.at, claims=event.claims),
                       "handoff_stamp": stamp}
    elif isinstance(event, HandoffVerified):
        if _newer(stamp, session.handoff_verification_stamp):
            update |= {"handoff_verification": VerificationRecord(
                path=event.path, written_at=event.written_at, verified_at=event.at, verified=event.verified,
                changed=event.changed, failed=event.failed, not_run=event.not_run, stale=event.stale),
                "handoff_verification_stamp": stamp}
    elif isinstance(event, StageRecorded):
        if _newer(stamp, session.workflow_stamp):
            update |= {"workflow": WorkflowRecord(state=event.state, proofs=event.proofs, history=event.history,
                                                  recorded_at=event.at), "workflow_stamp": stamp}
    elif isinstance(event, CheckpointTaken):
        if _newer(stamp, session.checkpoint_stamp):
            update |= {"checkpoint": CheckpointRecord(
                id=event.checkpoint_id, boundary=event.boundary, label=event.label, base=event.base,
                staged_tree=event.staged_tree, worktree_tree=event.worktree_tree, artifacts_tree=event.artifacts_tree,
                environment=event.environment, run_id=event.run_id, repo=event.repo,
                worktree_path=event.worktree_path, taken_at=event.at, remote=event.remote), "checkpoint_stamp": stamp}
    elif isinstance(event, RunStarted):
        update["run_log"] = _with_entry(session.run_log, RunEntry(
            text=event_id, at=event.at, session_id=event.session_id, event_id=event_id, provenance=Provenance.observed,
            kind=event.run_kind, parent_run_id=event.parent_run_id, parent_task_id=event.parent_task_id,
            diverged_at=event.diverged_at, base=event.base, environment=event.environment))
    elif isinstance(event, LeaseGranted):
        update["leases"] = _with_entry(session.leases, LeaseEntry(
            text=event_id, at=event.at, session_id=event.session_id, event_id=event_id, repo=event.repo,
            pattern=event.pattern, exclusive=event.exclusive, ttl_seconds=event.ttl_seconds, reason=event.reason,
            agent=event.agent))
    elif isinstance(event, LeaseReleased):
        update["lease_releases"] = _with_entry(session.lease_releases, ReleaseEntry(
            text=str(event.lease_id), at=event.at, session_id=event.session_id, event_id=event_id,
            released_at=event.released_at, forced=event.forced, by=event.by, reason=event.reason))
    elif isinstance(event, TakenOver):
        update["takeovers"] = _with_entry(session.takeovers, TakeoverEntry(
            text=str(event.token), at=event.at, session_id=event.session_id, event_id=event_id,
            provenance=Provenance.observed, token=event.token, holder=event.session_id,
            superseded=sorted(event.superseded), superseded_run=event.superseded_run, run_id=event.run_id,
            repo=event.repo, worktree_path=event.worktree_path, from_worktree_path=event.from_worktree_path))
    elif isinstance(event, Ended):
        update |= _lifecycle(session, Status(event.status), stamp)
        if event.status == Status.completed:
            update |= _phase(session, Phase.completed, stamp.model_copy(update={"rank": PHASE_RANK[Phase.completed]}))
    return session.model_copy(update=update)
