"""The registry's boundary models: the events every write is made of, and the session projection.

Every model defers building its validator to its first use (defer_build): a fresh process
builds only those it validates with, not the thirty this module declares."""

# No `from __future__ import annotations`: pydantic would compile and evaluate each field's
# annotation from its string, about 10 ms of a fresh command's import of this module
# (47.5 against 37.2 ms, median of 20 in turns); evaluated here, they cost the class body.

from collections.abc import Collection, Iterable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, get_args
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from baton.files import FileRef
from baton.registry.base import handoff_held, outline_status, runs_started
from baton.types import TaskId


class Status(StrEnum):
    active = "active"
    completed = "completed"
    stalled = "stalled"


class Phase(StrEnum):
    planning = "planning"
    implementing = "implementing"
    reviewing = "reviewing"
    merging = "merging"
    deploying = "deploying"
    completed = "completed"
    stalled = "stalled"


# planning < implementing < ... < completed; stalled stands aside (rank 0). The rank only
# breaks ties between phase changes stamped with the same instant.
PHASE_RANK = {phase: rank for rank, phase in enumerate(
    [Phase.stalled, Phase.planning, Phase.implementing, Phase.reviewing, Phase.merging,
     Phase.deploying, Phase.completed])}

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]
SessionId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class _Record(BaseModel):
    """What every model here is: immutable, strict about its fields, and built on first use
    (defer_build keeps pydantic's schema work off the commands that never touch a model)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _Event(_Record):
    event_id: UUID
    task_id: TaskId
    session_id: SessionId
    at: AwareDatetime


class Bound(_Event):
    """A session bound a worktree to the ticket; reopens is set when the ticket was completed."""

    type: Literal["bound"] = "bound"
    agent: str | None = None
    repo: str
    worktree_path: str
    branch: str | None = None
    reopens: bool = False


class FilesTouched(_Event):
    type: Literal["files_touched"] = "files_touched"
    files: Annotated[list[FileRef], Field(min_length=1)]


class DecisionRecorded(_Event):
    type: Literal["decision_recorded"] = "decision_recorded"
    text: Text
    context: str = ""
    repo: str = ""
    inherited_from: str | None = None  # the ticket a fork or fresh start took it from
    # "TICKET EVENT_ID" of each decision of another ticket this one replaces (decide --supersedes):
    # the replacement's own record of the link, so a hit on it finds what it replaced.
    replaces: list[str] = []


class DecisionSuperseded(_Event):
    """A decision of another ticket replaces one of this ticket's (`baton decide --supersedes`).

    It is this ticket's event, so this ticket's projection knows its decision is superseded
    (what recall's ranking reads), and it names both decisions by event id, copying no text a
    later redaction would have to find. It carries the latest time and a session of the ticket
    it marks, as SecretsRedacted does, so it moves no time of that ticket and wakes no stalled
    one."""

    type: Literal["decision_superseded"] = "decision_superseded"
    decision_event_id: UUID  # the decision replaced, one of this ticket's
    by_task_id: TaskId
    by_event_id: UUID  # the decision that replaces it


def supersede_link(decision_event_id: str, by_task_id: str, by_event_id: str) -> str:
    """One member of Session.superseded_by: a set of strings, so every backend merges it as a union."""
    return f"{decision_event_id} {by_task_id} {by_event_id}"


class PhaseChanged(_Event):
    type: Literal["phase_changed"] = "phase_changed"
    phase: Phase


class _TextEvent(_Event):
    text: Text


class StepCompleted(_TextEvent):
    type: Literal["step_completed"] = "step_completed"


class FailureRecorded(_TextEvent):
    type: Literal["failure_recorded"] = "failure_recorded"


class NextActionSet(_TextEvent):
    type: Literal["next_action_set"] = "next_action_set"


class DependencyAdded(_Event):
    type: Literal["dependency_added"] = "dependency_added"
    depends_on: Annotated[list[TaskId], Field(min_length=1)]


class Ended(_Event):
    type: Literal["ended"] = "ended"
    status: Literal[Status.completed, Status.stalled]


class Provenance(StrEnum):
    """Where a journal item comes from: Baton saw it (ran a command, read git), or the agent said so."""

    observed = "observed"
    reported = "reported"


class GoalSet(_TextEvent):
    type: Literal["goal_set"] = "goal_set"
    inherited_from: str | None = None


class ConstraintAdded(_TextEvent):
    type: Literal["constraint_added"] = "constraint_added"
    inherited_from: str | None = None


class WorkRemaining(_TextEvent):
    """An item of remaining work; it stays remaining until a completed step has its text."""

    type: Literal["work_remaining"] = "work_remaining"


class EvidenceRecorded(_TextEvent):
    type: Literal["evidence_recorded"] = "evidence_recorded"
    provenance: Provenance = Provenance.reported


class CheckRecorded(_Event):
    """A check run: its command, exit status (None: it timed out or could not start) and a summary."""

    type: Literal["check_recorded"] = "check_recorded"
    command: Text
    exit_status: int | None
    summary: Annotated[str, StringConstraints(max_length=4000)] = ""
    provenance: Provenance
    # What the check ran on (baton.skills.core.stage_authority.WorktreeSnapshot.as_dict), so
    # a TEST_PASS can be re-proven later: the commit checked out and the changed files' digests.
    snapshot: dict | None = None


StatusName = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,39}$")]


class StageRecorded(_Event):
    """A workflow transition (baton stage): what was asked, the evidence Baton checked for
    it, and the resulting state (baton.skills.core.stages.WorkflowState.as_dict), with the
    evidence of every completed stage and the transitions so far, so a state the lifecycle
    no longer accepts can be replayed to its latest safe predecessor."""

    type: Literal["stage_recorded"] = "stage_recorded"
    status: StatusName
    result: StatusName | None = None
    repair_scope: Annotated[str, StringConstraints(max_length=40)] | None = None
    blocker: Text | None = None
    resolution: Text | None = None
    evidence: dict | None = None
    state: dict
    proofs: dict[str, dict] = {}
    history: list[dict] = []


class HandoffWritten(_Event):
    type: Literal["handoff_written"] = "handoff_written"
    path: Text
    claims: int = Field(ge=0)


class HandoffVerified(_Event):
    """A handoff's live-state claims were re-run; the counts say how many held."""

    type: Literal["handoff_verified"] = "handoff_verified"
    path: Text
    written_at: AwareDatetime | None = None
    verified: int = Field(default=0, ge=0)
    changed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    not_run: int = Field(default=0, ge=0)
    stale: int = Field(default=0, ge=0)


class ActivityRecorded(_Event):
    """The agent worked on the ticket (an end of turn) without changing a file: it only moves
    last_activity, so a session that reads and answers is not taken for a stale one."""

    type: Literal["activity_recorded"] = "activity_recorded"


Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]


class _CheckpointTerms(_Record):
    """What a checkpoint is, as its event states it and the projection's record keeps it."""

    boundary: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    label: str | None = None
    base: Hex | None = None
    staged_tree: Hex
    worktree_tree: Hex
    artifacts_tree: Hex | None = None
    environment: Hex | None = None
    run_id: str | None = None
    repo: str
    worktree_path: str
    # Where it can be fetched from: the identity of the git remote it was pushed to
    # (baton.files.normalise_remote, no credentials); None: held only where it was taken.
    remote: str | None = None


class CheckpointTaken(_CheckpointTerms, _Event):
    """A checkpoint of the worktree was taken (baton.skills.core.checkpoints holds its
    content under refs/baton/checkpoints/<id>); this is its record in the registry."""

    type: Literal["checkpoint_taken"] = "checkpoint_taken"
    checkpoint_id: Hex


RunKind = Literal["bind", "reopen", "restore", "fork", "fresh", "takeover"]


class RunStarted(_Event):
    """A run of the ticket started: its first bind, a reopening bind, a restore, a fork
    (the new ticket's first run, whose parent is a run of the ticket forked) or a fresh
    start. The event's id is the run's id."""

    type: Literal["run_started"] = "run_started"
    run_kind: RunKind
    parent_run_id: str | None = None
    parent_task_id: str | None = None  # set by a fork: the ticket its parent run belongs to
    diverged_at: Hex | None = None  # the checkpoint the run started from
    base: str | None = None  # the commit the run started on (fresh: the new base)
    environment: Hex | None = None


class _TakeoverTerms(_Record):
    """What a take-over grants, as its event states it and the projection's entry keeps it."""

    token: int = Field(ge=2)
    superseded: Annotated[list[SessionId], Field(min_length=1)]
    superseded_run: str | None = None  # the run current before, whose late writes are its own
    run_id: str  # the run the take-over starts
    repo: str
    worktree_path: str
    from_worktree_path: str | None = None


class TakenOver(_TakeoverTerms, _Event):
    """A bind with --take-over moved the ticket from the runs of the superseded sessions, which
    another worktree (or machine) held, to this event's session and run: the ticket's fencing
    token is now `token` (its first holder's is 1, each take-over adds one). Every write
    carries its session, so the projection knows each write's token: a superseded session's
    write stamped at or after the take-over is kept as that run's late write and moves none of
    the ticket's state (baton.registry.apply). Its id derives from the ticket and the token,
    so a token is granted once: of two take-overs racing for it, the first stored wins."""

    type: Literal["taken_over"] = "taken_over"


class _LeaseTerms(_Record):
    """What a lease grants, as its event states it and the projection's entry keeps it."""

    repo: str
    pattern: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    exclusive: bool = False
    ttl_seconds: int = Field(gt=0)
    reason: str | None = None
    agent: str | None = None


class LeaseGranted(_LeaseTerms, _Event):
    """The ticket holds PATTERN (a gitignore pattern, relative to the repository's root) in
    repo: exclusive, or shared. The event's id is the lease's. It lasts while the ticket is
    active: until ttl_seconds plus the grace after the ticket's last activity (so every
    event of the ticket, a hook's touch or end of turn, renews it), or its release."""

    type: Literal["lease_granted"] = "lease_granted"


class _ReleaseTerms(_Record):
    """How a lease ended, as its event states it and the projection's entry keeps it."""

    released_at: AwareDatetime
    forced: bool = False
    by: str
    reason: str | None = None


class LeaseReleased(_ReleaseTerms, _Event):
    """A lease of this ticket ends: released by its holder, or forced by a lead (`baton
    release --force`), who and why recorded. Like DecisionSuperseded it carries the latest
    time of the ticket it ends (released_at is when), so a lead's release renews none of the
    holder's other leases and wakes no stalled ticket. Its id derives from the lease's, so a
    lease is released once: the first release recorded is final."""

    type: Literal["lease_released"] = "lease_released"
    lease_id: UUID


class Rewrite(_Record):
    """One field of an earlier event of the ticket, as it reads once redacted."""

    event_id: UUID
    event_type: str
    field: Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")]
    text: str
    kinds: list[str] = []


class SecretsRedacted(_Event):
    """`baton redact --scan` found secrets in earlier events of the ticket: each rewrite is a
    field as it reads redacted. The registry stores it and rewrites the fields it names in
    the stored events and the projection (SessionStore.append); the derived stores follow
    (baton.skills.core.projection). It carries the latest time and session of the events it
    rewrites, so it moves no time of the session and a pruned ticket's tombstone drops it too;
    its id derives from its content, so a second scan or a replay stores nothing new."""

    type: Literal["secrets_redacted"] = "secrets_redacted"
    rewrites: Annotated[list[Rewrite], Field(min_length=1)]


Event = Annotated[
    Bound | FilesTouched | DecisionRecorded | PhaseChanged | StepCompleted | FailureRecorded | NextActionSet
    | DependencyAdded | Ended | GoalSet | ConstraintAdded | WorkRemaining | EvidenceRecorded | CheckRecorded
    | HandoffWritten | HandoffVerified | ActivityRecorded | StageRecorded | CheckpointTaken | RunStarted
    | SecretsRedacted | DecisionSuperseded | LeaseGranted | LeaseReleased | TakenOver,
    Field(discriminator="type"),
]

# Each event type's own model, whose validator pydantic builds with the class: an event whose
# type is known is read without the union's validator (event_adapter), which costs a new data
# home's first command 12 to 27 ms to build.
EVENT_MODELS: dict[str, type[_Event]] = {m.model_fields["type"].default: m for m in get_args(get_args(Event)[0])}


class Stamp(_Record):
    """When a last-writer-wins value was written; later stamps win, replays tie and change nothing."""

    at: datetime
    rank: int = 0
    event_id: str

    def order(self) -> tuple[datetime, int, str]:
        return (self.at, self.rank, self.event_id)


class Entry(_Record):
    """A decision, step, failure, constraint, remaining item or evidence: a set member keyed
    by its text, first recording kept."""

    text: str
    context: str = ""
    at: datetime
    session_id: str
    event_id: str
    provenance: Provenance = Provenance.reported
    inherited_from: str | None = None  # the ticket a fork or fresh start took it from


class CheckEntry(Entry):
    """One check run. Its text (the key) names the command, result and time, so every run is kept."""

    command: str
    exit_status: int | None
    summary: str = ""
    snapshot: dict | None = None


class RunEntry(Entry):
    """A run of the ticket; its text (the key) is the run id."""

    kind: str
    parent_run_id: str | None = None
    parent_task_id: str | None = None
    diverged_at: str | None = None
    base: str | None = None
    environment: str | None = None


# Each entry below keeps its event's terms; the terms' base comes first so that Entry's
# fields come first in the entry.
class LeaseEntry(_LeaseTerms, Entry):
    """A lease the ticket was granted; its text (the key) is the lease's id."""


class ReleaseEntry(_ReleaseTerms, Entry):
    """A lease's release; its text (the key) is the released lease's id, so the first is kept."""


class TakeoverEntry(_TakeoverTerms, Entry):
    """A take-over of the ticket; its text (the key) is its token, so a token is granted once."""

    holder: str  # the session that holds the ticket from then on


class LateWrite(Entry):
    """A write of a superseded session made at or after the take-over that superseded it:
    stored in the log, attributed to the run it superseded, and no move of the ticket's
    state. Its text (the key) is the event's id; it copies none of the write's text."""

    kind: str  # the event's type
    run_id: str | None = None  # the superseded run the write belongs to
    token: int  # the take-over that fenced it


class CheckpointRecord(_CheckpointTerms):
    """The latest checkpoint taken for the ticket."""

    id: str
    taken_at: datetime

    def public(self) -> dict:
        return {"id": self.id, "boundary": self.boundary, "label": self.label, "base": self.base,
                "environment": self.environment, "run_id": self.run_id, "worktree_path": self.worktree_path,
                "taken_at": self.taken_at.isoformat()}


class HandoffRecord(_Record):
    """The latest handoff written for the ticket."""

    path: str
    written_at: datetime
    claims: int


class VerificationRecord(_Record):
    """The latest re-verification of a handoff: how many of its claims held."""

    path: str
    written_at: datetime | None
    verified_at: datetime
    verified: int
    changed: int
    failed: int
    not_run: int
    stale: int

    @property
    def held(self) -> bool:
        return handoff_held(changed=self.changed, failed=self.failed, not_run=self.not_run)

    def public(self) -> dict:
        return {"path": self.path, "written_at": self.written_at.isoformat() if self.written_at else None,
                "verified_at": self.verified_at.isoformat(), "held": self.held, "verified": self.verified,
                "changed": self.changed, "failed": self.failed, "not_run": self.not_run, "stale": self.stale}


class WorkflowRecord(_Record):
    """The ticket's workflow as its latest transition left it: the state, the evidence of
    each completed stage (by stage name) and the transitions recorded so far."""

    state: dict
    proofs: dict[str, dict] = {}
    history: list[dict] = []
    recorded_at: datetime


class Touch(_Record):
    repo: str
    path: str
    last_at: datetime


# The lists a ticket's history grows and a batch's projection never reads: a projector that
# read them whole for every ticket of every batch held and parsed all of its tickets' history
# (Session.batch_view). The decisions grow too; the view keeps the batch's own.
HISTORY_LISTS = ("files", "completed_steps", "failures", "constraints", "remaining_work", "evidence", "checks",
                 "late_writes")


def batch_terms(events: Iterable[Event]) -> tuple[set[str], set[str]]:
    """What append(whole=False) keeps of a batch's tickets: the texts of its decisions, and
    the tickets it redacts (those are answered whole: their projection queues every decision)."""
    recorded, redacted = set(), set()
    for event in events:
        if isinstance(event, DecisionRecorded):
            recorded.add(event.text)
        elif isinstance(event, SecretsRedacted):
            redacted.add(event.task_id)
    return recorded, redacted


class Session(_Record):
    """The projection of one ticket's events. Every field is a replay-safe merge of them."""

    task_id: str
    lifecycle: Status = Status.active
    lifecycle_stamp: Stamp | None = None
    phase: Phase = Phase.planning
    phase_stamp: Stamp | None = None
    repo: str | None = None
    worktree_path: str | None = None
    branch: str | None = None
    agent: str | None = None
    bound_session: str | None = None  # the session whose bind set the location: the ticket's holder
    location_stamp: Stamp | None = None
    agent_stamp: Stamp | None = None  # only a bind that names its agent sets it
    files: dict[str, Touch] = {}
    depends_on: list[str] = []
    session_ids: list[str] = []
    reopened_by: list[str] = []
    superseded_by: list[str] = []  # supersede_link strings: which decisions of other tickets replace this one's
    replaces: list[str] = []  # supersede_link strings turned round: which decisions this ticket's replace
    goal: str | None = None
    goal_inherited_from: str | None = None
    goal_stamp: Stamp | None = None
    next_action: str | None = None
    next_action_stamp: Stamp | None = None
    decisions: list[Entry] = []
    completed_steps: list[Entry] = []
    failures: list[Entry] = []
    constraints: list[Entry] = []
    remaining_work: list[Entry] = []
    evidence: list[Entry] = []
    checks: list[CheckEntry] = []
    handoff: HandoffRecord | None = None
    handoff_stamp: Stamp | None = None
    handoff_verification: VerificationRecord | None = None
    handoff_verification_stamp: Stamp | None = None
    workflow: WorkflowRecord | None = None  # None: the ticket uses no stages (its phase says where it is)
    workflow_stamp: Stamp | None = None
    checkpoint: CheckpointRecord | None = None
    checkpoint_stamp: Stamp | None = None
    run_log: list[RunEntry] = []  # every run started, oldest first
    leases: list[LeaseEntry] = []  # every lease granted, released or not (baton.skills.services.leases)
    lease_releases: list[ReleaseEntry] = []
    takeovers: list[TakeoverEntry] = []  # every take-over, by token (baton.skills.services.takeover)
    late_writes: list[LateWrite] = []  # the writes of superseded runs, kept as theirs
    created_at: datetime
    last_activity: datetime

    @property
    def status(self) -> Status:
        stamp = self.lifecycle_stamp
        return Status(outline_status(self.lifecycle.value, stamp.at if stamp else None, self.last_activity))

    @property
    def runs(self) -> int:
        return runs_started(self.run_log, self.reopened_by)

    @property
    def current_run(self) -> RunEntry | None:
        """The run started last (None: a ticket bound before runs were recorded)."""
        return self.run_log[-1] if self.run_log else None

    @property
    def fork_of(self) -> str | None:
        """The ticket this one was forked from, if it was."""
        return next((r.parent_task_id for r in self.run_log if r.kind == "fork"), None)

    def superseded_runs(self) -> set[str]:
        """The runs a fresh start or a take-over replaced."""
        return {r.parent_run_id for r in self.run_log if r.kind in ("fresh", "takeover") and r.parent_run_id}

    @property
    def token(self) -> int:
        """The ticket's fencing token: 1 until a take-over, then the latest take-over's."""
        return max((t.token for t in self.takeovers), default=1)

    def fenced_by(self, session_id: str, at: datetime | None = None) -> TakeoverEntry | None:
        """The take-over that superseded session_id as of the instant at (default: every one
        recorded), None while it is not superseded: of the take-overs stamped by then that
        name it, the one with the highest token, when that one names it superseded (a
        session that took the ticket back holds it again)."""
        named = [t for t in self.takeovers
                 if (at is None or t.at <= at) and (session_id == t.holder or session_id in t.superseded)]
        latest = max(named, key=lambda t: t.token, default=None)
        return latest if latest is not None and session_id in latest.superseded else None

    def run_at(self, at: datetime) -> RunEntry | None:
        """The run that was current at the instant `at` (evidence belongs to it)."""
        found = None
        for run in self.run_log:
            if run.at <= at:
                found = run
        return found or (self.run_log[0] if self.run_log else None)

    def superseders(self, decision_text: str) -> list[tuple[str, str]]:
        """(ticket, decision event id) of each decision recorded as replacing this ticket's
        decision_text, in link order."""
        return self._linked(self.superseded_by, decision_text)

    def replaced(self, decision_text: str) -> list[tuple[str, str]]:
        """(ticket, decision event id) of each decision of another ticket that this ticket's
        decision_text was recorded as replacing, in link order."""
        return self._linked(self.replaces, decision_text)

    def _linked(self, links: list[str], decision_text: str) -> list[tuple[str, str]]:
        """The other ends of links ("EVENT TICKET EVENT", this ticket's decision first) that start
        at decision_text's decision."""
        entry = next((d for d in self.decisions if d.text == decision_text), None)
        if entry is None:
            return []
        split = (link.split(" ") for link in links)
        return [(task, event) for own, task, event in split if own == entry.event_id]

    def history_size(self) -> int:
        """How many entries its history's lists and its decisions hold: what reading it costs."""
        return sum(len(getattr(self, name)) for name in HISTORY_LISTS) + len(self.decisions)

    def batch_view(self, recorded: Collection[str]) -> "Session":
        """The session as a batch's projection reads it (append with whole=False): without the
        lists its history grows (HISTORY_LISTS), and of its decisions only those whose text is
        among recorded (the batch's own), so what it holds follows the batch, not the history."""
        return self.model_copy(update={**{name: type(getattr(self, name))() for name in HISTORY_LISTS},
                                       "decisions": [d for d in self.decisions if d.text in recorded]})

    def files_by_recency(self) -> list[Touch]:
        return sorted(self.files.values(), key=lambda t: (-t.last_at.timestamp(), t.path))

    def _run_of(self, entry: Entry) -> dict:
        """Which run produced evidence or a check, and whether that is an earlier one."""
        run, current = self.run_at(entry.at), self.current_run
        if run is None or current is None:
            return {}
        return {"run_id": run.text, "inherited": run.text != current.text}

    def _decision_json(self, entry: Entry) -> dict:
        """A decision, with the tickets whose decisions replaced it, if any."""
        by = sorted({task for task, _ in self.superseders(entry.text)})
        return {**_entry_json(entry), **({"superseded_by": by} if by else {})}

    def public(self) -> dict:
        """The session as documented in the CLI's --json output."""
        return {
            "task_id": self.task_id,
            "status": self.status.value,
            "phase": self.phase.value,
            "repo": self.repo,
            "worktree_path": self.worktree_path,
            "branch": self.branch,
            "agent": self.agent,
            "files_touched": [t.path for t in self.files_by_recency()],
            "depends_on": self.depends_on,
            "session_ids": self.session_ids,
            "decisions": [self._decision_json(e) for e in self.decisions],
            "completed_steps": [_entry_json(e) for e in self.completed_steps],
            "failures": [_entry_json(e) for e in self.failures],
            "next_action": self.next_action,
            "goal": self.goal,
            "goal_inherited_from": self.goal_inherited_from,
            "constraints": [_entry_json(e) for e in self.constraints],
            "remaining_work": [_entry_json(e) for e in self.remaining_work],
            "evidence": [{**_entry_json(e), **self._run_of(e)} for e in self.evidence],
            "checks": [{"command": c.command, "exit_status": c.exit_status, "summary": c.summary,
                        "provenance": c.provenance.value, "recorded_at": c.at.isoformat(), "session_id": c.session_id,
                        **self._run_of(c)}
                       for c in self.checks],
            "handoff": None if self.handoff is None else {
                "path": self.handoff.path, "written_at": self.handoff.written_at.isoformat(),
                "claims": self.handoff.claims},
            "handoff_verification": self.handoff_verification.public() if self.handoff_verification else None,
            "runs": self.runs,
            "checkpoint": self.checkpoint.public() if self.checkpoint else None,
            "created_at": self.created_at.isoformat(),
            "last_activity": self.last_activity.isoformat(),
        }


# How each Session field merges, so a backend can merge a projection without Python (the
# PostgreSQL store does it in SQL). apply_event(None, event) is the event's own projection,
# and merging it into a session equals applying the event, because every field is one of:
# earliest / latest times; sorted unions of strings; entries keyed by text (earliest
# (at, event_id) kept); touches keyed by file (latest last_at kept); and registers, whose
# value fields are taken together from the side with the later stamp (at, rank, event_id).
# A new Session field must be declared here; tests/test_apply.py checks every field is.
SESSION_MERGE: dict = {
    "same": ["task_id"],
    "earliest": ["created_at"],
    "latest": ["last_activity"],
    "union": ["session_ids", "depends_on", "reopened_by", "superseded_by", "replaces"],
    "entries": ["decisions", "completed_steps", "failures", "constraints", "remaining_work", "evidence", "checks",
                "run_log", "leases", "lease_releases", "takeovers", "late_writes"],
    "touches": ["files"],
    "registers": {
        "lifecycle_stamp": ["lifecycle"],
        "phase_stamp": ["phase"],
        "location_stamp": ["repo", "worktree_path", "branch", "bound_session"],
        "agent_stamp": ["agent"],
        "next_action_stamp": ["next_action"],
        "goal_stamp": ["goal", "goal_inherited_from"],
        "handoff_stamp": ["handoff"],
        "handoff_verification_stamp": ["handoff_verification"],
        "workflow_stamp": ["workflow"],
        "checkpoint_stamp": ["checkpoint"],
    },
}


def _entry_json(entry: Entry) -> dict:
    item = {"text": entry.text, "recorded_at": entry.at.isoformat(), "session_id": entry.session_id,
            "provenance": entry.provenance.value}
    if entry.context:
        item["context"] = entry.context
    if entry.inherited_from:
        item["inherited_from"] = entry.inherited_from
    return item

