"""The stage skill: record a workflow transition once the evidence its stage's authority
asks for holds (`baton stage`), and re-check every completed stage's claim for resume.

The lifecycle is `[workflow]` (Settings.workflow), else the default (baton.skills.core.stages).
A pass naming an authority needs its proof now (baton.skills.core.stage_authority); the event
keeps the evidence of every completed stage, so a resume re-checks each claim against the
worktree then, and the next stage falls back to the first that no longer holds. A recorded
state the lifecycle no longer accepts is replayed to its latest safe predecessor, and the
answer says so.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from baton import clock
from baton.errors import BadInput
from baton.skills.core.binding import ActiveTask, Place, resolve_task
from baton.skills.core.commit import commit, wire_event
from baton.skills.core.stage_authority import (
    Proof,
    RecordedCheck,
    WorktreeSnapshot,
    artifact_proof,
    check_proof,
    commit_proof,
    head_commit,
    stale_line,
)
from baton.skills.core.stages import (
    DEFAULT_LIFECYCLE,
    Lifecycle,
    StageRequest,
    WorkflowState,
    advance,
    fall_back,
    parse_lifecycle,
    replay,
    state_from_dict,
)
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.registry.model import Session, WorkflowRecord
    from baton.skills.runtime.settings import Settings

_WHAT = {"review": "review", "artifact": "result artifact"}


def lifecycle_of(settings: Settings) -> Lifecycle:
    """The team's lifecycle from baton.toml, validated whole (BadInput), else the default."""
    return parse_lifecycle(dict(settings.workflow)) if settings.workflow else DEFAULT_LIFECYCLE


def current_state(lifecycle: Lifecycle, record: WorkflowRecord | None) -> tuple[WorkflowState, list[str]]:
    """The recorded state, checked against the lifecycle; when it no longer fits, the state
    the recorded transitions replay to, with a note saying so."""
    if record is None:
        return lifecycle.start(), []
    try:
        return state_from_dict(lifecycle, record.state), []
    except BadInput as exc:
        requests = [StageRequest(h["status"], **{f.name: h.get(f.name) for f in fields(StageRequest)[1:]})
                    for h in record.history if isinstance(h.get("status"), str)]
        state, skipped = replay(lifecycle, requests)
        notes = [(f"the recorded state does not fit the lifecycle ({exc}); reconstructed from "
                  f"{len(requests) - len(skipped)} of {len(requests)} recorded transitions")]
        return state, notes + [f"not replayed: {line}" for line in skipped[:3]]


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class StageCommand(NamedTuple):
    """`baton stage STATUS`: a workflow transition and the evidence for it."""

    status: str
    task_id: str | None = None
    result: str | None = None
    repair_scope: str | None = None
    evidence: str | None = None  # a path inside the worktree (a review, a retrospective's result)
    check: str | None = None  # a command Baton runs now (no shell)
    blocker: str | None = None
    resolved: str | None = None
    timeout: float | None = None


@dataclass
class StageDone:
    task: ActiveTask
    state: WorkflowState
    evidence: dict | None
    report: WriteReport
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"task_id": self.task.task_id, "state": self.state.as_dict(), "evidence": self.evidence,
                "notes": self.notes, "warnings": self.report.warnings}


def record_stage(stores: Stores, place: Place, command: StageCommand, at: datetime | None = None) -> StageDone:
    """Check the transition for the ticket named, else the worktree's, gather its evidence
    (running --check), then record it. BadInput for a transition the lifecycle refuses, or
    a proof that does not hold."""
    task = resolve_task(command.task_id, place, stores.settings.ambient)
    if command.evidence is not None and command.check is not None:
        raise BadInput("give either --evidence or --check, not both")
    lifecycle = lifecycle_of(stores.settings)
    looked = stores.registry.get(task.task_id).unwrap(Store.SESSION_REGISTRY)
    record = looked.workflow if looked is not None else None
    state, notes = current_state(lifecycle, record)
    redact = stores.redact
    transition = StageRequest(command.status, command.result, command.repair_scope,
                              redact(command.blocker) if command.blocker else command.blocker,
                              redact(command.resolved) if command.resolved else command.resolved)
    after = advance(lifecycle, state, transition)  # refused before anything runs
    at = at or clock.now()
    root = place.root
    authority = lifecycle.authority_of(command.status)
    report = WriteReport()
    events, evidence, ran = [], None, None
    if command.check is not None:
        from baton.skills.services.update import run_checks, snapshot_field

        ran = run_checks([command.check], root, command.timeout, stores.deadline)[0]
        events.append(wire_event("check_recorded", task.task_id, task.session_id, at, command=ran.command.strip(),
                                 exit_status=ran.exit_status, summary=ran.summary[:4000],
                                 provenance=str(ran.provenance), **snapshot_field(ran)))
        evidence = {"kind": "check", "command": redact(ran.command.strip()), "exit_status": ran.exit_status,
                    "recorded_at": at.isoformat(), "snapshot": ran.snapshot}
    elif command.evidence is not None:
        proof = artifact_proof(root, command.evidence, _WHAT.get(authority or "", "evidence"))
        if not proof.held:
            raise BadInput(f"{command.status} not recorded: {proof.reason}")
        evidence = {"kind": "artifact",
                    "path": os.path.relpath(os.path.realpath(root / command.evidence), os.path.realpath(root))}
    if authority == "check":
        if ran is None:
            raise BadInput(f"{command.status} needs a passing check Baton runs: --check CMD")
        if not ran.passed:
            commit(stores, events, report)  # the failing run belongs in the journal all the same
            outcome = "did not finish" if ran.exit_status is None else f"exited {ran.exit_status}"
            raise BadInput(f"{command.status} not recorded: the check {outcome}; record the failure "
                           f"(baton stage TEST_FAIL --repair-scope SCOPE) instead")
    elif authority in _WHAT and command.evidence is None:
        raise BadInput(f"{command.status} needs its {_WHAT[authority]}: --evidence PATH")
    elif authority == "commit":
        evidence = _commit_evidence(root, place, command.status, stores.deadline)
    previous_proofs = record.proofs if record is not None else {}
    proofs = {name: proof for name, proof in previous_proofs.items() if name in after.completed_stages}
    stage = lifecycle.stage_of(command.status)
    if stage is not None and command.status == stage.passed and evidence is not None:
        proofs[stage.name] = evidence
    asked = {k: v for k, v in asdict(transition).items() if v is not None}  # the fields, in order
    history = [*(record.history if record is not None else []), asked]
    evidence_field: dict[str, Any] = {"evidence": evidence} if evidence is not None else {}
    events.append(wire_event("stage_recorded", task.task_id, task.session_id, at, **asked, **evidence_field,
                             state=after.as_dict(), proofs=proofs, history=history))
    commit(stores, events, report)
    return StageDone(task, after, evidence, report, notes)


def _commit_evidence(root: Path, place: Place, status: str, deadline: Deadline) -> dict:
    branch = place.worktree.branch if place.worktree is not None else None
    head = head_commit(root, deadline)
    if not branch or head is None:
        raise BadInput(f"{status} needs a commit checked out on a branch: "
                       f"{'no commit yet' if head is None else 'a detached HEAD'}")
    proof = commit_proof(root, head, branch, deadline)
    if not proof.held:
        raise BadInput(f"{status} not recorded: {proof.reason}")
    return {"kind": "commit", "commit": head, "branch": branch}


class StageProof(NamedTuple):
    stage: str
    status: str
    authority: str | None
    held: bool
    reason: str


class WorkflowView(NamedTuple):
    """What resume shows: the recorded state, each completed stage's proof re-checked now,
    and where to go on (fallen back to the first stage whose proof does not hold)."""

    recorded: WorkflowState
    proofs: tuple[StageProof, ...]
    next_stage: str | None
    resume_from: str | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"state": self.recorded.as_dict(), "completed": [p._asdict() for p in self.proofs],
                "next_stage": self.next_stage, "resume_from": self.resume_from,
                "fell_back": self.next_stage != self.recorded.next_stage, "notes": list(self.notes)}


def workflow_view(settings: Settings, session: Session, fallback_root: Path,
                  deadline: Deadline | None = None) -> WorkflowView | None:
    """The ticket's workflow re-checked against the worktree (the session's, where it still
    exists), git within the command's deadline; None for a ticket that uses no stages.
    BadInput for a bad [workflow] table."""
    record = session.workflow
    if record is None:
        return None
    lifecycle = lifecycle_of(settings)
    state, notes = current_state(lifecycle, record)
    worktree = Path(session.worktree_path) if session.worktree_path else None
    root = worktree if worktree is not None and worktree.is_dir() else fallback_root
    proofs = []
    for name in state.completed_stages:
        stage = lifecycle.stage(name)
        proof = _prove(root, stage.authority, record.proofs.get(name), deadline)
        proofs.append(StageProof(name, stage.passed, stage.authority, proof.held,
                                 proof.reason if proof.held else stale_line(stage.passed, proof)))
    shown = fall_back(lifecycle, state, [p.stage for p in proofs if not p.held])
    return WorkflowView(state, tuple(proofs), shown.next_stage, shown.resume_from, tuple(notes))


def _prove(root: Path, authority: str | None, evidence: dict | None, deadline: Deadline | None) -> Proof:
    if authority is None:
        return Proof(True, "no authority: the agent's word")
    if not isinstance(evidence, dict):
        return Proof(False, "no evidence was recorded for it")
    try:
        if authority == "check" and evidence.get("kind") == "check":
            snap = evidence.get("snapshot")
            return check_proof(root, RecordedCheck(
                command=str(evidence["command"]), exit_status=evidence.get("exit_status"), observed=True,
                recorded_at=clock.parse(str(evidence["recorded_at"])),
                snapshot=WorktreeSnapshot(snap.get("head"), dict(snap.get("changed") or {}))
                if isinstance(snap, dict) else None), deadline=deadline)
        if authority in _WHAT and evidence.get("kind") == "artifact":
            return artifact_proof(root, str(evidence["path"]), _WHAT[authority])
        if authority == "commit" and evidence.get("kind") == "commit":
            return commit_proof(root, str(evidence["commit"]), str(evidence["branch"]), deadline)
    except (KeyError, TypeError, ValueError) as exc:
        return Proof(False, f"its recorded evidence is malformed ({exc})")
    return Proof(False, f"its recorded evidence is not a {authority} proof")
