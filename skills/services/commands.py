"""The commands the CLI and the MCP server both offer, as typed requests.

A front end parses its own syntax (argparse options, a tool's JSON arguments) into one of
these frozen requests (NamedTuples: a frozen dataclass costs a fresh process about 1 ms to
define, and every command defines these) and hands it here with the stores and the worktree; validation and
every side effect (checks run for `--check`, probes, the binding) happen here, so the two
front ends cannot drift apart. Each function returns what both front ends render.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from baton.errors import BadInput
from baton.ids import TicketId
from baton.skills.core.binding import ActiveTask, Place, resolve_task
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.skills.handoff.write import HandoffReport
    from baton.skills.services.handoff import CheckedHandoff
    from baton.skills.services.resume import ResumeResult
    from baton.skills.services.runs import Collected, Started
    from baton.skills.services.stage import StageCommand, StageDone

END_STATUSES = ("completed", "stalled")


class UpdateRequest(NamedTuple):
    task_id: str | None = None  # None: the worktree's binding, else BATON_TASK_ID
    phase: str | None = None
    next_action: str | None = None
    done: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    goal: str | None = None
    constraints: tuple[str, ...] = ()
    todo: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()  # commands run now (no shell), recorded as observed checks
    timeout: float | None = None  # seconds each check may run (default: CHECK_TIMEOUT)


@dataclass
class UpdateDone:
    task: ActiveTask
    report: WriteReport
    checks: list = field(default_factory=list)  # CheckResult, in the order asked

    def recorded(self, request: UpdateRequest, redact: Callable[[str], str]) -> dict:
        """The fields the update set, as both front ends answer them: as stored, redacted."""
        def texts(values: tuple[str, ...]) -> list[str]:
            return [redact(value) for value in values]

        return {"phase": request.phase, "next_action": request.next_action and redact(request.next_action),
                "done": texts(request.done), "failed": texts(request.failed), "depends_on": list(request.depends_on),
                "goal": request.goal and redact(request.goal), "constraints": texts(request.constraints),
                "todo": texts(request.todo), "evidence": texts(request.evidence),
                "checks": [{"command": c.command, "exit_status": c.exit_status, "summary": c.summary}
                           for c in self.checks]}


def update(stores: Stores, place: Place, request: UpdateRequest) -> UpdateDone:
    """Run the request's checks in the worktree root (all parsed first, so a bad one runs
    none), then record them with the rest of the update."""
    from baton.skills.services.update import update as record

    task = resolve_task(request.task_id, place, stores.settings.ambient)
    # What a check printed is shown and stored redacted alike.
    checks = [replace(c, command=stores.redact(c.command), summary=stores.redact(c.summary))
              for c in run_checks(request.checks, place.root, request.timeout)]
    report = record(stores, task, place, phase=request.phase, next_action=request.next_action,
                    done=list(request.done), failed=list(request.failed), depends_on=list(request.depends_on),
                    goal=request.goal, constraints=list(request.constraints), remaining=list(request.todo),
                    evidence=list(request.evidence), checks=checks)
    if checks:
        report.warnings += _checkpoint_here(stores, task, place, "check")
    return UpdateDone(task, report, checks)


def _checkpoint_here(stores: Stores, task: ActiveTask, place: Place, boundary: str, *, push: bool = False
                     ) -> list[str]:
    """A boundary's checkpoint, taken when this worktree works on the ticket (push: and
    pushed to the git remote, for other clones): its warnings."""
    from baton.skills.core.commit import read_binding_quietly
    from baton.skills.services.checkpoint import checkpoint_at_boundary

    binding = read_binding_quietly(place)
    if binding is None or binding.task_id != task.task_id:
        return []
    return checkpoint_at_boundary(stores, task, place, boundary, push=push)


def run_checks(commands: tuple[str, ...] | list[str], root: Path, timeout: float | None) -> list:
    if not commands:
        return []
    from baton.skills.handoff.checks import check_timeout, parse_check, run_check
    from baton.skills.handoff.write import CHECK_TIMEOUT

    check_timeout(timeout)
    for command in commands:
        parse_check(command)
    return [run_check(command, root, timeout=timeout or CHECK_TIMEOUT)[0] for command in commands]


def stage(stores: Stores, place: Place, request: StageCommand) -> StageDone:
    """Record request for the ticket it names, else the worktree's."""
    from baton.skills.services.stage import record_stage

    return record_stage(stores, resolve_task(request.task_id, place, stores.settings.ambient), place, request)


class EndRequest(NamedTuple):
    task_id: str | None = None
    status: str = "completed"


def end(stores: Stores, place: Place, request: EndRequest) -> tuple[ActiveTask, WriteReport]:
    from baton.skills.services.end import end as record

    if request.status not in END_STATUSES:
        raise BadInput(f"unknown status {request.status!r}: use completed or stalled")
    task = resolve_task(request.task_id, place, stores.settings.ambient)
    # Whoever picks the ticket up next, on this machine or another, starts from here. Taken
    # before the end is recorded: an event after a stall would make the ticket active again.
    warnings = _checkpoint_here(stores, task, place, request.status, push=True)
    report = record(stores, task, request.status, place)
    report.warnings[:0] = warnings
    return task, report


class ResumeRequest(NamedTuple):
    task_id: TicketId  # parsed by the front end
    limit: int = 5
    agent: str | None = None
    allow_unsigned_probes: bool = False
    all_decisions: bool = False  # related decisions superseded, abandoned or old too, marked
    take_over: bool = False  # move the ticket here from a run that holds it elsewhere


def resume(stores: Stores, place: Place, request: ResumeRequest) -> ResumeResult:
    from baton.skills.services.resume import resume_session

    if request.limit < 0:
        raise BadInput("limit must not be negative")
    return resume_session(stores, request.task_id, place, limit=request.limit, agent=request.agent,
                          allow_unsigned_probes=request.allow_unsigned_probes, all_decisions=request.all_decisions,
                          take_over=request.take_over)


class HandoffRequest(NamedTuple):
    task_id: str | None = None
    checks: tuple[str, ...] = ()
    probes: tuple[tuple[str, str], ...] = ()  # (section name, command)
    timeout: float | None = None


def probes_from_options(given: list[str]) -> tuple[tuple[str, str], ...]:
    """`--probe NAME=CMD` options as (name, command) pairs."""
    probes = []
    for option in given:
        name, sep, command = option.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise BadInput(f"--probe wants NAME=CMD, got {option!r}")
        probes.append((name.strip(), command))
    return tuple(probes)


def write_handoff(stores: Stores, place: Place, request: HandoffRequest) -> HandoffReport:
    from baton.skills.handoff.write import write_handoff as write

    task = resolve_task(request.task_id, place, stores.settings.ambient)
    report = write(stores, task, place, checks=list(request.checks), probes=list(request.probes),
                   timeout=request.timeout)
    report.warnings += _checkpoint_here(stores, task, place, "handoff", push=True)
    return report


class VerifyRequest(NamedTuple):
    path: Path | None = None  # a handoff or a worktree; None: this worktree's current handoff
    task_id: str | None = None  # only a handoff of this ticket
    allow_unsigned_probes: bool = False


def verify_handoff(stores: Stores, cwd: Path, request: VerifyRequest) -> CheckedHandoff:
    from baton.skills.services.handoff import place_for, task_or_none, verify_and_record

    place, path = place_for(request.path, cwd)
    return verify_and_record(stores, place, task=task_or_none(request.task_id, place, stores.settings.ambient),
                             path=path, only_for=request.task_id, allow_unsigned=request.allow_unsigned_probes)


class CheckpointRequest(NamedTuple):
    task_id: str | None = None
    label: str | None = None
    push: bool = False  # to the repository's git remote, whatever [checkpoints] push says


@dataclass
class CheckpointDone:
    task: ActiveTask
    result: object  # checkpoints.Taken | Unchanged
    warnings: list = field(default_factory=list)  # as every answer has; a checkpoint's record is kept, never lost
    remote: str | None = None  # --push: the git remote it is on now

    def to_json(self) -> dict:
        from baton.skills.core.checkpoints import Taken, Unchanged

        if isinstance(self.result, Taken):
            c = self.result.checkpoint
            return {"task_id": self.task.task_id, "status": "taken" if self.result.created else "existing",
                    "checkpoint": {"id": c.id, "boundary": c.boundary, "label": c.label, "base": c.base,
                                   "run_id": c.run_id, "environment": c.environment,
                                   "taken_at": c.taken_at.isoformat(),
                                   "skipped": [{"path": s.path, "reason": s.reason} for s in c.skipped]},
                    "remote": self.remote, "warnings": self.warnings}
        assert isinstance(self.result, Unchanged)
        return {"task_id": self.task.task_id, "status": "unchanged",
                "checkpoint": {"id": self.result.checkpoint_id}, "remote": self.remote, "warnings": self.warnings}


def checkpoint(stores: Stores, place: Place, request: CheckpointRequest) -> CheckpointDone:
    """A checkpoint taken by hand (push: and pushed to the git remote); a refusal (an
    operation in progress) is BadInput, a push that fails a warning."""
    from baton.skills.core.checkpoints import Refused
    from baton.skills.services.checkpoint import shared_checkpoint, take_checkpoint

    task = resolve_task(request.task_id, place, stores.settings.ambient)
    warnings: list[str] = []
    remote: str | None = None
    if request.push:
        result, remote, warnings = shared_checkpoint(stores, task, place, boundary="manual", label=request.label,
                                             by_hand=True)
    else:
        result = take_checkpoint(stores, task, place, boundary="manual", label=request.label)
    if isinstance(result, Refused):
        raise BadInput(f"no checkpoint taken: {result.reason}")
    return CheckpointDone(task, result, warnings, remote)


def _ticket(task_id: str | None, place: Place, stores: Stores) -> str:
    return task_id or resolve_task(None, place, stores.settings.ambient).task_id


class CheckpointsRequest(NamedTuple):
    task_id: str | None = None  # None: the worktree's binding


def list_checkpoints(stores: Stores, place: Place, request: CheckpointsRequest) -> tuple[str, list]:
    from baton.skills.services.runs import checkpoints_of

    task_id = _ticket(request.task_id, place, stores)
    return task_id, checkpoints_of(stores, place, task_id)


class RestoreRequest(NamedTuple):
    target: str  # TASK[@CHECKPOINT]
    into: Path | None = None
    in_place: bool = False
    at: str | None = None  # a checkpoint id, as TASK@CHECKPOINT gives it


def restore(stores: Stores, place: Place, request: RestoreRequest) -> Started:
    from baton.skills.services.runs import parse_task_at, restore as start

    task_id, checkpoint_id = parse_task_at(request.target)
    if request.at is not None and checkpoint_id is not None and request.at != checkpoint_id:
        raise BadInput(f"two checkpoints asked for: {checkpoint_id} and --at {request.at}")
    return start(stores, place, task_id, checkpoint_id or request.at, into=request.into, in_place=request.in_place)


class ForkRequest(NamedTuple):
    task_id: str
    new_task_id: str
    at: str | None = None  # a checkpoint id; None: the ticket's latest
    into: Path | None = None


def fork(stores: Stores, place: Place, request: ForkRequest) -> Started:
    from baton.skills.services.runs import fork as start

    return start(stores, place, request.task_id, request.new_task_id, at=request.at, into=request.into)


class FreshRequest(NamedTuple):
    task_id: str
    base: str | None = None  # None: the repository's default branch
    into: Path | None = None


def fresh(stores: Stores, place: Place, request: FreshRequest) -> Started:
    from baton.skills.services.runs import fresh as start

    return start(stores, place, request.task_id, base=request.base, into=request.into)


class RunsRequest(NamedTuple):
    task_id: str | None = None


def runs(stores: Stores, place: Place, request: RunsRequest) -> tuple[str, list]:
    from baton.skills.services.runs import lineage

    task_id = _ticket(request.task_id, place, stores)
    return task_id, lineage(stores, task_id)


class GcRequest(NamedTuple):
    keep: int | None = None  # None: [checkpoints] keep_per_run
    dry_run: bool = False


def collect_checkpoints(stores: Stores, place: Place, request: GcRequest) -> Collected:
    from baton.skills.services.runs import collect

    return collect(stores, place, keep=request.keep, dry_run=request.dry_run)
