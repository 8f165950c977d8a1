"""The update skill: record phase, next action, steps, failures, dependencies and the
journal (baton.skills.core.commit commits its events)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from baton import clock
from baton.errors import BadInput
from baton.ids import parse_ticket_id
from baton.outcome import Found
from baton.phases import PHASES
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Place, resolve_task
from baton.skills.core.commit import commit, publish, wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import MAX_TEXT, WriteReport
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.skills.handoff.checks import CheckResult


class UpdateRequest(NamedTuple):
    """`baton update` and the update_session tool, as both front ends parse them."""

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


def update_asked(stores: Stores, place: Place, request: UpdateRequest) -> UpdateDone:
    """Run the request's checks in the worktree root (run_checks), then record them with the rest
    of the update."""
    from baton.skills.services.checkpoint import checkpoint_here

    task = resolve_task(request.task_id, place, stores.settings.ambient)
    # What a check printed is shown and stored redacted alike.
    checks = [replace(c, command=stores.redact(c.command), summary=stores.redact(c.summary))
              for c in run_checks(request.checks, place.root, request.timeout)]
    report = update(stores, task, place, request, checks)
    if checks:
        report.warnings += checkpoint_here(stores, task, place, "check")
    return UpdateDone(task, report, checks)


def run_checks(commands: Sequence[str], root: Path, timeout: float | None, deadline: Deadline | None = None) -> list:
    """Run each check in the worktree root (all parsed first, so a bad one runs none); their
    CheckResults."""
    if not commands:
        return []
    from baton.skills.handoff.checks import check_timeout, parse_check, run_check
    from baton.skills.handoff.write import CHECK_TIMEOUT

    check_timeout(timeout)
    for command in commands:
        parse_check(command)
    return [run_check(command, root, timeout=timeout or CHECK_TIMEOUT, deadline=deadline)[0] for command in commands]


def _text(label: str, value: str) -> str:
    """value as baton.registry.model.Text stores it (stripped), or BadInput."""
    stripped = value.strip()
    if not stripped:
        raise BadInput(f"{label} is empty")
    if len(stripped) > MAX_TEXT:
        raise BadInput(f"{label} is longer than {MAX_TEXT} characters")
    return stripped


def update(stores: Stores, task: ActiveTask, place: Place, request: UpdateRequest, checks: Sequence[CheckResult] = (),
           at: datetime | None = None) -> WriteReport:
    """Record the request's phase, next action, steps, failures, dependencies and the journal's
    goal, constraints, remaining work, evidence (reported by the agent) and checks (run
    already, each with its own provenance); its task_id and its checks' commands are not read."""
    at = at or clock.now()
    phase = request.phase
    texts = {label: [_text(f"{label} text", value) for value in values] for label, values in (
        ("--done", request.done), ("--failed", request.failed), ("--constraint", request.constraints),
        ("--todo", request.todo), ("--evidence", request.evidence),
        ("--next", [request.next_action] if request.next_action is not None else []),
        ("--goal", [request.goal] if request.goal is not None else []))}
    dependencies = [parse_ticket_id(d) for d in request.depends_on]
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
        events.append(wire_event("phase_changed", *common, phase=str(phase)))
    events += [wire_event("next_action_set", *common, text=t) for t in texts["--next"]]
    events += [wire_event("step_completed", *common, text=t) for t in texts["--done"]]
    events += [wire_event("failure_recorded", *common, text=t) for t in texts["--failed"]]
    if dependencies:
        events.append(wire_event("dependency_added", *common, depends_on=dependencies))
    events += [wire_event("goal_set", *common, text=t, inherited_from=None) for t in texts["--goal"]]
    events += [wire_event("constraint_added", *common, text=t, inherited_from=None) for t in texts["--constraint"]]
    events += [wire_event("work_remaining", *common, text=t) for t in texts["--todo"]]
    events += [wire_event("evidence_recorded", *common, text=t, provenance="reported") for t in texts["--evidence"]]
    events += [wire_event("check_recorded", *common, command=_text("--check command", c.command),
                      exit_status=c.exit_status, summary=c.summary[:MAX_TEXT], provenance=str(c.provenance),
                      **snapshot_field(c))
               for c in checks]
    if not events:
        raise BadInput("nothing to update: give --phase, --next, --done, --failed, --depends-on, --goal, "
                       "--constraint, --todo, --evidence or --check")
    report = WriteReport()
    commit(stores, events, report)
    if phase is not None:
        publish(stores, [wire_signal(SignalType.phase_changed, events[0].event_id, task, place.repo, at,
                                      phase=str(phase), reason=f"phase {phase}")], report)
    return report


def snapshot_field(check: CheckResult) -> dict[str, Any]:
    return {"snapshot": check.snapshot} if check.snapshot is not None else {}
