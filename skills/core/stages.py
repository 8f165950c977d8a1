"""The workflow lifecycle as data, and the pure function that moves a ticket's workflow state.

A lifecycle is an ordered list of stages. Each stage names the status it records when it
succeeds (`pass`), and may name a gate recorded before that (`gate`: COMMIT_PENDING is not
COMMITTED), a status asking for repair (`repair`), a status saying it cannot run
(`blocked`), the authority that proves its success (`authority`, checked by
stage_authority) and the local results that stand for its success (`results`). A repair
goes back to the lifecycle's `repair_stage` and runs forward again through every stage
except those its repair scope skips (never the stage that asked for the repair); a scope
nobody declared, or none at all, never routes into speculative edits: the workflow becomes
WORKFLOW_BLOCKED, as a blocked stage does, and is resumed only with the blocker's
resolution. After `max_repair_rounds` repairs, the next one blocks.

A team declares its own lifecycle as the `[workflow]` table of baton.toml, in the shape of
DEFAULT_WORKFLOW below (the default, parsed by the same function): `stages` a list of inline
tables (`{ name = "test", pass = "TEST_PASS", repair = "TEST_FAIL", authority = "check" }`),
`repair_stage`, `max_repair_rounds`, and `[workflow.repair_scopes]` naming, for each scope,
the stages its repair skips (`test-infrastructure = ["code-review"]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace

from baton.errors import BadInput
from baton.shown_text import clipped, one_line
from baton.skills.core.write_report import MAX_TEXT  # a blocker or resolution is journal text

SCHEMA_VERSION = 1
WORKFLOW_BLOCKED = "WORKFLOW_BLOCKED"
UNKNOWN_SCOPE = "unknown"
AUTHORITIES = ("check", "review", "artifact", "commit")

_STAGE_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")
_STATUS_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,39}")
_TOP_KEYS = {"stages", "repair_stage", "repair_scopes", "max_repair_rounds"}
_STAGE_KEYS = {"name", "pass", "gate", "repair", "blocked", "authority", "results", "repair_scope", "resume_from"}

_PRODUCTION_LIKE = ("production", "runtime", "schema", "dependency", "public-interface")
DEFAULT_WORKFLOW: dict = {
    "repair_stage": "implement",
    "max_repair_rounds": 3,
    "stages": [
        {"name": "plan", "pass": "PLAN_READY"},
        {"name": "implement", "pass": "IMPLEMENTED"},
        {"name": "code-review", "pass": "REVIEW_PASS", "repair": "REVIEW_NEEDS_FIXES",
         "repair_scope": "production", "authority": "review"},
        {"name": "test", "pass": "TEST_PASS", "repair": "TEST_FAIL", "blocked": "TEST_BLOCKED", "authority": "check"},
        {"name": "retrospective", "pass": "RETRO_COMPLETE", "blocked": "RETRO_BLOCKED", "authority": "artifact",
         "results": ["DOCS_UPDATED", "NO_DOC_CHANGE"]},
        {"name": "commit", "gate": "COMMIT_PENDING", "pass": "COMMITTED", "authority": "commit"},
    ],
    "repair_scopes": {"test-infrastructure": ["code-review"], **{scope: [] for scope in _PRODUCTION_LIKE}},
}


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    passed: str
    gate: str | None = None
    repair: str | None = None
    blocked: str | None = None
    authority: str | None = None
    results: tuple[str, ...] = ()
    repair_scope: str | None = None  # the scope of this stage's repair when none is given
    resume_from: str = ""  # the skill or command that runs this stage

    @property
    def statuses(self) -> tuple[str, ...]:
        return tuple(s for s in (self.gate, self.passed, self.repair, self.blocked) if s)


@dataclass(frozen=True, slots=True)
class Lifecycle:
    stages: tuple[Stage, ...]
    repair_stage: str
    repair_scopes: Mapping[str, frozenset[str]]
    max_repair_rounds: int

    def stage(self, name: str) -> Stage:
        return self.stages[self.position(name)]

    def stage_of(self, status: str) -> Stage | None:
        return next((s for s in self.stages if status in s.statuses), None)

    def position(self, name: str) -> int:
        return [s.name for s in self.stages].index(name)

    @property
    def statuses(self) -> tuple[str, ...]:
        return (*(status for s in self.stages for status in s.statuses), WORKFLOW_BLOCKED)

    def authority_of(self, status: str) -> str | None:
        """The authority a status claims (None: the agent's word is all there is)."""
        stage = self.stage_of(status)
        return stage.authority if stage is not None and status == stage.passed else None

    def start(self) -> WorkflowState:
        first = self.stages[0]
        return WorkflowState(next_stage=first.name, resume_from=first.resume_from)


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """A ticket's workflow state. `status` is the workflow's (WORKFLOW_BLOCKED included),
    `stage_result` the last stage's own result; `completed_stages` are in lifecycle order;
    `repair_from` is the stage whose repair is under way (it clears when that stage passes)."""

    schema_version: int = SCHEMA_VERSION  # first: as_dict's first key
    stage: str | None = None
    status: str | None = None
    stage_result: str | None = None
    completed_stages: tuple[str, ...] = ()
    repair_scope: str | None = None
    repair_round: int = 0
    repair_from: str | None = None
    next_stage: str | None = None
    resume_from: str | None = None
    blocker: str | None = None

    def as_dict(self) -> dict:
        return {**asdict(self), "completed_stages": list(self.completed_stages)}


@dataclass(frozen=True, slots=True)
class StageRequest:
    """A requested transition: the status to record, a local result (DOCS_UPDATED), the
    repair scope of a repair status, the blocker of a blocked one, and, to leave
    WORKFLOW_BLOCKED, how the recorded blocker was resolved."""

    status: str
    result: str | None = None
    repair_scope: str | None = None
    blocker: str | None = None
    resolution: str | None = None


def allowed_next(lifecycle: Lifecycle, state: WorkflowState) -> tuple[str, ...]:
    """The statuses that may be recorded next, in lifecycle order."""
    if state.next_stage is None:
        return ()
    stage = lifecycle.stage(state.next_stage)
    gate_recorded = state.stage == stage.name and state.stage_result == stage.gate
    own = (stage.gate,) if stage.gate and not gate_recorded else tuple(
        s for s in (stage.passed, stage.repair, stage.blocked) if s)
    return own if state.status == WORKFLOW_BLOCKED else (*own, WORKFLOW_BLOCKED)


def advance(lifecycle: Lifecycle, state: WorkflowState, request: StageRequest) -> WorkflowState:
    """The state after recording request; BadInput (one line naming the allowed next
    statuses) when the lifecycle does not allow it now."""
    allowed = allowed_next(lifecycle, state)
    status = request.status
    if status not in allowed:
        known = "" if status in lifecycle.statuses else "unknown status; "
        raise BadInput(f"cannot record {_shown(status)} {_where(state)}: {known}allowed next: "
                       f"{', '.join(allowed) or 'nothing (the workflow is complete)'}")
    if state.status == WORKFLOW_BLOCKED and not _text(request.resolution):
        raise BadInput(f"the workflow is blocked ({one_line(state.blocker or 'no blocker recorded')}): "
                       f"record {status} with the blocker's resolution (--resolved TEXT)")
    for name, value in (("blocker", request.blocker), ("resolution", request.resolution)):
        if value is not None and len(value) > MAX_TEXT:
            raise BadInput(f"the {name} is longer than {MAX_TEXT} characters")
    if status == WORKFLOW_BLOCKED:
        return replace(state, status=WORKFLOW_BLOCKED, blocker=_required_blocker(request, status))
    stage = lifecycle.stage_of(status)
    assert stage is not None  # allowed_next only names the lifecycle's statuses
    result = _result(stage, request)
    if status == stage.passed:
        return _passed(lifecycle, state, stage, result)
    if status == stage.gate:
        return replace(state, stage=stage.name, status=status, stage_result=result, blocker=None)
    if status == stage.blocked:
        return _blocked(lifecycle, state, stage, status, _required_blocker(request, status), stage.name)
    return _repair(lifecycle, state, stage, request, result)


def _passed(lifecycle: Lifecycle, state: WorkflowState, stage: Stage, result: str) -> WorkflowState:
    scope, origin = state.repair_scope, state.repair_from
    if origin == stage.name:
        scope = origin = None
    skipped = lifecycle.repair_scopes.get(scope, frozenset()) - {origin} if origin and scope else frozenset()
    later = [s for s in lifecycle.stages[lifecycle.position(stage.name) + 1:] if s.name not in skipped]
    following = later[0] if later else None
    return replace(state, stage=stage.name, status=stage.passed, stage_result=result,
                   completed_stages=_ordered(lifecycle, {*state.completed_stages, stage.name}),
                   repair_scope=scope, repair_from=origin, blocker=None,
                   next_stage=following.name if following else None,
                   resume_from=following.resume_from if following else None)


def _repair(lifecycle: Lifecycle, state: WorkflowState, stage: Stage, request: StageRequest,
            result: str) -> WorkflowState:
    scope = request.repair_scope or stage.repair_scope or UNKNOWN_SCOPE
    if scope != UNKNOWN_SCOPE and scope not in lifecycle.repair_scopes:
        raise BadInput(f"unknown repair scope {_shown(scope)}: use one of "
                       f"{', '.join([*lifecycle.repair_scopes, UNKNOWN_SCOPE])}")
    at_stage = replace(state, stage=stage.name, stage_result=result)
    if scope == UNKNOWN_SCOPE:
        blocker = _text(request.blocker) or (f"{stage.repair} of unknown repair scope: classify it "
                                             f"({', '.join(lifecycle.repair_scopes)}) before any edit")
        return _blocked(lifecycle, at_stage, stage, stage.repair, blocker, stage.name)
    if state.repair_round >= lifecycle.max_repair_rounds:
        limit = f"repair round limit ({lifecycle.max_repair_rounds}) reached: {stage.repair}"
        reason = _text(request.blocker)
        return _blocked(lifecycle, replace(at_stage, repair_scope=scope, repair_from=stage.name), stage,
                        stage.repair, f"{limit}: {reason}" if reason else limit, lifecycle.repair_stage)
    redone = {s.name for s in lifecycle.stages[lifecycle.position(lifecycle.repair_stage):]
              if s.name not in lifecycle.repair_scopes[scope] or s.name == stage.name}
    repair_stage = lifecycle.stage(lifecycle.repair_stage)
    return replace(at_stage, status=stage.repair, repair_scope=scope, repair_from=stage.name,
                   repair_round=state.repair_round + 1, blocker=None,
                   completed_stages=tuple(s for s in state.completed_stages if s not in redone),
                   next_stage=repair_stage.name, resume_from=repair_stage.resume_from)


def _blocked(lifecycle: Lifecycle, state: WorkflowState, stage: Stage, result: str | None, blocker: str,
             resume_stage: str) -> WorkflowState:
    return replace(state, stage=stage.name, status=WORKFLOW_BLOCKED, stage_result=result, blocker=blocker,
                   next_stage=resume_stage, resume_from=lifecycle.stage(resume_stage).resume_from)


def _result(stage: Stage, request: StageRequest) -> str:
    if request.result is None:
        return request.status
    if request.status == stage.passed and request.result in stage.results:
        return request.result
    if request.status == stage.passed and stage.results:
        raise BadInput(f"{request.status} takes a result of {', '.join(stage.results)}, not {_shown(request.result)}")
    raise BadInput(f"{request.status} takes no result")


def _required_blocker(request: StageRequest, status: str) -> str:
    blocker = _text(request.blocker)
    if not blocker:
        raise BadInput(f"{status} needs the blocker that stops the work (--blocker TEXT)")
    return blocker


def _text(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def _shown(value: str) -> str:
    return clipped(one_line(value), 60)


def _where(state: WorkflowState) -> str:
    if state.status is None:
        return "at the start"
    if state.status == WORKFLOW_BLOCKED:
        return f"while WORKFLOW_BLOCKED after {state.stage_result or 'the start'}"
    return f"after {state.status}"


def _ordered(lifecycle: Lifecycle, names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=lifecycle.position))


def fall_back(lifecycle: Lifecycle, state: WorkflowState, unproven: Iterable[str]) -> WorkflowState:
    """state with next_stage back at the first completed stage whose proof does not hold
    (unproven names those stages), and the completed stages before it only; state itself
    when every proof holds."""
    unproven = set(unproven)
    failing = [name for name in state.completed_stages if name in unproven]
    if not failing:
        return state
    first = lifecycle.stage(failing[0])
    kept = tuple(name for name in state.completed_stages if lifecycle.position(name) < lifecycle.position(first.name))
    return replace(state, completed_stages=kept, next_stage=first.name, resume_from=first.resume_from)


def replay(lifecycle: Lifecycle, requests: Iterable[StageRequest]) -> tuple[WorkflowState, list[str]]:
    """The state the recorded transitions lead to, in order, from the start, and what was not
    applied: the first transition the lifecycle refuses and every one after it, so the
    state is the latest safe predecessor."""
    state, skipped = lifecycle.start(), list[str]()
    for request in requests:
        if skipped:
            skipped.append(f"{_shown(request.status)}: after a refused transition")
            continue
        try:
            state = advance(lifecycle, state, request)
        except BadInput as exc:
            skipped.append(f"{_shown(request.status)}: {exc}")
    return state, skipped


def state_from_dict(lifecycle: Lifecycle, data: object) -> WorkflowState:
    """A stored state, checked against the lifecycle; BadInput naming what is wrong."""
    data = _table(data, "workflow state", {f.name for f in fields(WorkflowState)}, kind="an object")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise BadInput(f"workflow state: schema_version must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}")
    names = {s.name for s in lifecycle.stages}
    results = {r for s in lifecycle.stages for r in s.results}

    def member(key: str, allowed: set[str]) -> str | None:
        value = data.get(key)
        if value is not None and value not in allowed:
            raise BadInput(f"workflow state: {key} {_shown(str(value))} is not in the lifecycle")
        return value

    completed = data.get("completed_stages", [])
    if not isinstance(completed, list) or not all(isinstance(c, str) and c in names for c in completed):
        raise BadInput("workflow state: completed_stages must list stages of the lifecycle")
    round_ = data.get("repair_round", 0)
    if isinstance(round_, bool) or not isinstance(round_, int) or not 0 <= round_ <= lifecycle.max_repair_rounds:
        raise BadInput(f"workflow state: repair_round must be 0 to {lifecycle.max_repair_rounds}, got {round_!r}")
    for key in ("resume_from", "blocker"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise BadInput(f"workflow state: {key} must be text")
    return WorkflowState(
        stage=member("stage", names), status=member("status", set(lifecycle.statuses)),
        stage_result=member("stage_result", {*lifecycle.statuses, *results}),
        completed_stages=_ordered(lifecycle, completed),
        repair_scope=member("repair_scope", {*lifecycle.repair_scopes, UNKNOWN_SCOPE}),
        repair_round=round_, repair_from=member("repair_from", names), next_stage=member("next_stage", names),
        resume_from=data.get("resume_from"), blocker=data.get("blocker"))


def parse_lifecycle(table: object, source: str = "baton.toml") -> Lifecycle:
    """The lifecycle a `[workflow]` table declares, validated whole; BadInput in one line."""
    where = f"{source}: [workflow]"
    table = _table(table, where, _TOP_KEYS)
    raw_stages = table.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise BadInput(f"{where} stages must be a non-empty list of tables")
    stages = [_parse_stage(raw, f"{where} stages[{index}]") for index, raw in enumerate(raw_stages)]
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise BadInput(f"{where}: stage {_first_duplicate(names)!r} is declared twice")
    statuses = [status for s in stages for status in (*s.statuses, *s.results)]
    if len(set(statuses)) != len(statuses) or WORKFLOW_BLOCKED in statuses:
        twice = WORKFLOW_BLOCKED if WORKFLOW_BLOCKED in statuses else _first_duplicate(statuses)
        raise BadInput(f"{where}: status {twice} is used twice (WORKFLOW_BLOCKED is the workflow's own)")
    scopes = _parse_scopes(table.get("repair_scopes", {}), names, where)
    repair_stage = table.get("repair_stage")
    repairing = [s.name for s in stages if s.repair]
    if repairing and repair_stage is None:
        raise BadInput(f"{where}: repair_stage is required when a stage has a repair status ({repairing[0]})")
    if repair_stage is not None:
        if repair_stage not in names:
            raise BadInput(f"{where} repair_stage {repair_stage!r} is not a declared stage")
        late = [name for name in repairing if names.index(name) <= names.index(repair_stage)]
        if late:
            raise BadInput(f"{where}: stage {late[0]!r} has a repair status but does not come after "
                           f"repair_stage {repair_stage!r}")
        skipping = [scope for scope, skipped in scopes.items() if repair_stage in skipped]
        if skipping:
            raise BadInput(f"{where} repair_scopes.{skipping[0]} cannot skip the repair_stage {repair_stage!r}")
    for stage in stages:
        if stage.repair_scope is not None and stage.repair_scope not in scopes:
            raise BadInput(f"{where}: stage {stage.name!r} repair_scope {stage.repair_scope!r} is not in repair_scopes")
    rounds = table.get("max_repair_rounds", 3)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= 100:
        raise BadInput(f"{where} max_repair_rounds must be a whole number from 0 to 100, got {rounds!r}")
    return Lifecycle(stages=tuple(stages), repair_stage=repair_stage or names[0], repair_scopes=scopes,
                     max_repair_rounds=rounds)


def _table(raw: object, where: str, keys: frozenset[str] | set[str], kind: str = "a table") -> dict:
    """raw as a table (kind) of only the known keys; BadInput naming where, otherwise."""
    if not isinstance(raw, dict):
        raise BadInput(f"{where} must be {kind}")
    unknown = set(raw) - keys
    if unknown:
        raise BadInput(f"{where}: unknown key {', '.join(sorted(map(str, unknown)))}")
    return raw


def _parse_stage(raw: object, where: str) -> Stage:
    raw = _table(raw, where, _STAGE_KEYS)
    name = raw.get("name")
    if not isinstance(name, str) or not _STAGE_NAME.fullmatch(name):
        raise BadInput(f"{where} name must be 1 to 40 of a-z, 0-9 and -, starting with a letter, got {name!r}")
    where = f"{where} ({name})"
    if "pass" not in raw:
        raise BadInput(f"{where} needs pass, the status it records when it succeeds")
    values = {key: None if raw.get(key) is None else _named_status(raw[key], key, where)
              for key in ("gate", "repair", "blocked")}
    results = raw.get("results", [])
    if not isinstance(results, list):
        raise BadInput(f"{where} results must be a list of statuses")
    authority = raw.get("authority")
    if authority is not None and authority not in AUTHORITIES:
        raise BadInput(f"{where} authority must be one of {', '.join(AUTHORITIES)}, got {authority!r}")
    scope = raw.get("repair_scope")
    if scope is not None and (not isinstance(scope, str) or values["repair"] is None):
        raise BadInput(f"{where} repair_scope needs a repair status and must name a scope")
    resume_from = raw.get("resume_from", name)
    if not isinstance(resume_from, str) or not resume_from.strip() or one_line(resume_from) != resume_from \
            or len(resume_from) > 200:
        raise BadInput(f"{where} resume_from must be one line of text (a skill or command), at most 200 characters")
    return Stage(name=name, passed=_named_status(raw["pass"], "pass", where), gate=values["gate"],
                 repair=values["repair"], blocked=values["blocked"], authority=authority,
                 results=tuple(_named_status(r, "results", where) for r in results), repair_scope=scope,
                 resume_from=resume_from)


def _named_status(value: object, key: str, where: str) -> str:
    if not isinstance(value, str) or not _STATUS_NAME.fullmatch(value):
        raise BadInput(f"{where} {key} must be a status of 1 to 40 of A-Z, 0-9 and _, got {value!r}")
    return value


def _parse_scopes(raw: object, names: list[str], where: str) -> dict[str, frozenset[str]]:
    if not isinstance(raw, dict):
        raise BadInput(f"{where} repair_scopes must be a table of scope = [stages it skips]")
    scopes = {}
    for scope, skipped in raw.items():
        if not isinstance(scope, str) or not _STAGE_NAME.fullmatch(scope) or scope == UNKNOWN_SCOPE:
            raise BadInput(f"{where} repair_scopes: {scope!r} is not a scope name (a-z, 0-9, -; not {UNKNOWN_SCOPE!r})")
        if not isinstance(skipped, list) or not all(isinstance(s, str) and s in names for s in skipped):
            raise BadInput(f"{where} repair_scopes.{scope} must list declared stages")
        scopes[scope] = frozenset(skipped)
    return scopes


def _first_duplicate(values: list[str]) -> str:
    return next((value for i, value in enumerate(values) if value in values[:i]), "")


DEFAULT_LIFECYCLE = parse_lifecycle(DEFAULT_WORKFLOW, "the default lifecycle")
