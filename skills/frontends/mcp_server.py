"""`baton mcp`: Baton's tools for any MCP client, served over stdio.

Served by the JSON-RPC loop below, not the `mcp` SDK 2.3.0, whose import took 538 of the
659 ms a new server needed to answer `initialize` (quiet machine; tests/test_mcp_wire.py
keeps the SDK's answers, which this loop gives too; docs/performance.md has the figures).

Each tool returns, as JSON text, what the matching CLI command prints with `--json`; both
build it with baton.skills.frontends.answers. A tool call opens the stores, delivers writes kept locally
(as every CLI command but `touch` does), does its work and closes them. A failure comes
back as a tool error (`isError`) whose text, and structured content, is
`{"error": {"type", "store", "message", "recoverable"}}` (tool_error): bad input, a missing
or invalid argument included, is one line, as on the command line.

The server serves one worktree, the one it was started in (CLAUDE_PROJECT_DIR, else its
directory): a `worktree` argument must lie in it, and a handoff `path` must resolve inside
it. A command a client asks Baton to run (a check, a probe) is not the user's own: it runs
only when the allowlist admits it (`[handoff] allow`, Baton's read-only git probes), and
`allow_unsigned_probes` is refused, unless the user started the server with
`baton mcp --allow-unsigned-probes`.

Descriptions are written for tool search (Claude Code defers MCP tools and loads one by a
keyword query over names and descriptions): what the tool does and when to call it, in the
words an agent searches with. They stay short: without tool search every schema goes to the
model on every turn (bench/hooks.py prints their total size).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from baton.errors import BadInput
from baton.ids import parse_ticket_id
from baton.phases import UPDATE_PHASES
from baton.skills.frontends.answer_budget import SECTION_NAMES

if TYPE_CHECKING:
    from pydantic import BaseModel

    from baton.skills.core.binding import Place
    from baton.skills.runtime.stores import Stores

INSTRUCTIONS = ("Baton keeps each ticket's working state across agent sessions. task_id defaults to the worktree's "
                "binding; worktree defaults to this server's directory, the only worktree it serves.")


@dataclass(frozen=True, slots=True)
class Scope:
    """What this server may act on: the directory it serves, and whether its user lets the
    client run commands outside the allowlist (`--allow-unsigned-probes`)."""

    directory: Path
    allow_unsigned: bool = False


_scope: Scope | None = None  # set by serve(); unset, the process's directory with the defaults

if TYPE_CHECKING:
    Phase = str  # a Literal of a tuple's values is built at run time, which mypy cannot follow
    SectionName = str
else:
    Phase = Literal[UPDATE_PHASES]  # the tool's schema lists the phases
    SectionName = Literal[SECTION_NAMES]


@dataclass(frozen=True, slots=True)
class Served:
    """One tool: its function, and how tools/list shows it but its schema: a title, its
    description and the MCP annotations clients decide approval by (Codex runs a read-only or
    non-destructive tool without asking, and treats one without annotations as destructive).
    None is open-world (Baton's stores and this worktree only); destructive: it replaces what
    the user has (a worktree's files, a ticket's current run); Baton's records are only added to."""

    function: Callable[..., str]
    shown: dict[str, Any]


# Every tool, in the order list_tools shows them: each function below declares itself with
# _served, its docstring the description.
TOOLS: dict[str, Served] = {}


def _served(title: str, *, read_only: bool = False, destructive: bool = False,
            idempotent: bool = False) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def declare(function: Callable[..., str]) -> Callable[..., str]:
        TOOLS[function.__name__] = Served(function, {
            "name": function.__name__, "title": title, "description": " ".join((function.__doc__ or "").split()),
            "annotations": {"title": title, "readOnlyHint": read_only, "destructiveHint": destructive,
                            "idempotentHint": idempotent or read_only, "openWorldHint": False}})
        return function

    return declare


@_served("Resume a ticket", idempotent=True)  # a second resume in the same session claims nothing new
def resume_session(task_id: str, limit: int = 5, agent: str | None = None, all_decisions: bool = False,
                   allow_unsigned_probes: bool = False, section: SectionName | None = None, offset: int = 0,
                   worktree: str | None = None, take_over: bool = False) -> str:
    """Resume a ticket's session: its state, next action, conflicts with other tickets, decisions, files and missed
    signals; binds this worktree. Call first when picking up a ticket or handoff."""
    from baton.skills.frontends.answer_budget import resume_answer
    from baton.skills.services.resume import resume_session as resume

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        if allow_unsigned_probes:
            _unsigned_allowed()
        answer = resume(stores, parse_ticket_id(task_id), place, limit=limit, agent=agent,
                        all_decisions=all_decisions, allow_unsigned_probes=allow_unsigned_probes,
                        take_over=take_over).to_json()
        return resume_answer(answer, stores.settings.mcp_answer_budget, section, offset)

    return _call(run)


@_served("List active sessions", read_only=True)
def list_sessions(include_ended: bool = False, limit: int = 1000) -> str:
    """List the active sessions (tickets, agents, worktrees) and the conflicts between them."""
    from baton import clock
    from baton.skills.frontends.answers import listing_answer
    from baton.skills.runtime.agent_sessions import local_heartbeats
    from baton.skills.services.listing import list_sessions as listing

    return _call(lambda stores: listing_answer(listing(stores, include_inactive=include_ended, at=clock.now(),
                                                       heartbeats=local_heartbeats(stores.settings), limit=limit)))


@_served("Bind the worktree to a ticket", idempotent=True)
def bind_task(task_id: str, agent: str | None = None, worktree: str | None = None, take_over: bool = False) -> str:
    """Bind this worktree to a ticket and start its session, without the resume context."""
    from baton.skills.frontends.answers import bind_answer
    from baton.skills.services.bind import bind

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        return bind_answer(task_id, place, bind(stores, parse_ticket_id(task_id), place, agent=agent,
                                                take_over=take_over))

    return _call(run)


@_served("Record files touched", idempotent=True)
def record_touch(paths: list[str], task_id: str | None = None, worktree: str | None = None) -> str:
    """Record files the ticket changed; returns conflicts with other active tickets. Call after
    editing files outside Edit/Write."""
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of, resolve_task
    from baton.skills.frontends.answers import touch_answer
    from baton.skills.services.touch import touch

    def run(stores: Stores) -> dict:
        locator = WorktreeLocator()
        directory = _directory(worktree)
        task = resolve_task(task_id, place_of(directory, locator), stores.settings.ambient)
        return touch_answer(task, touch(stores, task, paths, directory, locator))

    return _call(run, deliver=False)


@_served("Check files before editing", read_only=True, idempotent=True)
def check_paths(paths: list[str], task_id: str | None = None, worktree: str | None = None) -> str:
    """Before editing files: conflicts with other active tickets' touches and leases; allow, ask or deny, with each
    holder and their next action."""
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of
    from baton.skills.services import pre_edit

    def run(stores: Stores) -> dict:
        locator = WorktreeLocator()
        directory = _directory(worktree)
        checked = pre_edit.checking_task(task_id, place_of(directory, locator), stores.settings.ambient)
        return {"task_id": checked, **pre_edit.check_paths(stores, checked, paths, directory, locator).public()}

    return _call(run)


@_served("Record a decision")
def record_decision(text: str, context: str = "", supersedes: list[str] | None = None, task_id: str | None = None,
                    worktree: str | None = None) -> str:
    """Record a decision and why, so that later sessions and other tickets recall it."""
    from baton.skills.core.binding import resolve_task
    from baton.skills.frontends.answers import decide_answer
    from baton.skills.services.decide import decide

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        task = resolve_task(task_id, place, stores.settings.ambient)
        report = decide(stores, task, text, context, place, supersedes=supersedes or ())
        return decide_answer(task, stores.redact(text), stores.redact(context), report)

    return _call(run)


@_served("Update the session")
def update_session(phase: Phase | None = None, next_action: str | None = None, done: list[str] | None = None,
                   failed: list[str] | None = None, depends_on: list[str] | None = None, goal: str | None = None,
                   constraints: list[str] | None = None, todo: list[str] | None = None,
                   evidence: list[str] | None = None, checks: list[str] | None = None, timeout: float | None = None,
                   task_id: str | None = None, worktree: str | None = None) -> str:
    """Record the session's phase, next action, done steps, failures, dependencies, journal (goal, todo, constraints,
    evidence) and checks."""
    from baton.skills.frontends.answers import update_answer
    from baton.skills.services.update import UpdateRequest, update_asked

    request = UpdateRequest(task_id=task_id, phase=phase, next_action=next_action, done=tuple(done or ()),
                            failed=tuple(failed or ()), depends_on=tuple(depends_on or ()), goal=goal,
                            constraints=tuple(constraints or ()), todo=tuple(todo or ()),
                            evidence=tuple(evidence or ()), checks=tuple(checks or ()), timeout=timeout)

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        _admit(stores, "check", request.checks)
        done = update_asked(stores, place, request)
        return update_answer(done.task, done.report, **done.recorded(request, stores.redact))

    return _call(run)


@_served("Record a workflow stage")
def record_stage(status: str, result: str | None = None, repair_scope: str | None = None,
                 evidence: str | None = None, check: str | None = None, blocker: str | None = None,
                 resolved: str | None = None, timeout: float | None = None, task_id: str | None = None,
                 worktree: str | None = None) -> str:
    """Record a workflow stage's status (PLAN_READY, IMPLEMENTED, REVIEW_PASS, TEST_PASS...); TEST_PASS runs check, a
    review or retro needs evidence (a file)."""
    from baton.skills.services.stage import StageCommand, record_stage as stage

    request = StageCommand(status, task_id=task_id, result=result, repair_scope=repair_scope, evidence=evidence,
                           check=check, blocker=blocker, resolved=resolved, timeout=timeout)
    def run(stores: Stores) -> dict:
        place = _place(worktree)
        _admit(stores, "check", [check] if check is not None else [])
        return stage(stores, place, request).to_json()

    return _call(run)


@_served("Find interrupted work", read_only=True)
def recover_work(verbose: bool = False, all_repos: bool = False, worktree: str | None = None) -> str:
    """Find interrupted work (an agent gone, a session not ended) and the command that resumes each; runs nothing."""
    from baton.skills.services.recover import recover

    def run(stores: Stores) -> dict:
        return recover(stores, _place(worktree), all_repos=all_repos, verbose=verbose).as_json()

    return _call(run)


@_served("Lease paths")
def claim_paths(paths: list[str], exclusive: bool = False, ttl: str | None = None, reason: str | None = None,
                task_id: str | None = None, worktree: str | None = None) -> str:
    """Lease paths or gitignore globs for the ticket, exclusive or shared, so other agents keep off them; refused naming
    the holder."""
    from baton.skills.core.binding import read_binding, resolve_task
    from baton.skills.services.leases import claim, claim_answer

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        task = resolve_task(task_id, place, stores.settings.ambient)
        binding = read_binding(place)
        return claim_answer(task.task_id, claim(stores, task, place, paths, exclusive=exclusive, ttl=ttl,
                                                reason=reason, agent=binding.agent if binding else None))

    return _call(run)


@_served("Release leases", idempotent=True)
def release_leases(paths: list[str] | None = None, ticket: str | None = None, force: bool = False,
                   reason: str | None = None, task_id: str | None = None, worktree: str | None = None) -> str:
    """Release the ticket's leases (the patterns given, else all); a lead forces another ticket's, with a reason."""
    from baton.skills.core.binding import resolve_task
    from baton.skills.services.leases import release_asked

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        report = release_asked(stores, place, lambda: resolve_task(task_id, place, stores.settings.ambient),
                               ticket=ticket, paths=paths or [], force=force, reason=reason)
        return {"task_id": report.holder, "released": [lease.public() for lease in report.released],
                "warnings": report.warnings}

    return _call(run)


@_served("List leases", read_only=True)
def list_leases(all: bool = False) -> str:
    """List the project's active leases (all: lapsed and released too): who holds which paths."""
    from baton.skills.services.leases import project_leases

    return _call(lambda stores: {"leases": [lease.public() for lease in project_leases(stores, include_ended=all)]})


@_served("End the session", idempotent=True)
def end_session(status: Literal["completed", "stalled"] = "completed", task_id: str | None = None,
                worktree: str | None = None) -> str:
    """End the ticket's session as completed (default) or stalled, when the work stops."""
    from baton.skills.frontends.answers import end_answer
    from baton.skills.services.end import end

    def run(stores: Stores) -> dict:
        task, report = end(stores, _place(worktree), task_id, status)
        return end_answer(task, status, report)

    return _call(run)


@_served("Write a handoff")
def write_handoff(checks: list[str] | None = None, probes: dict[str, str] | None = None, timeout: float | None = None,
                  task_id: str | None = None, worktree: str | None = None) -> str:
    """Write the ticket's handoff document for the next session: journal, git state, checks and live-state probes (NAME:
    CMD), signed."""
    from baton.skills.services.handoff import handoff_asked

    def run(stores: Stores) -> dict:
        place = _place(worktree)
        _admit(stores, "check", checks or ())
        _admit(stores, "probe", (probes or {}).values())
        return handoff_asked(stores, place, task_id, checks or (), tuple((probes or {}).items()), timeout).to_json()

    return _call(run)


@_served("Verify the handoff")
def verify_handoff(path: str | None = None, task_id: str | None = None, allow_unsigned_probes: bool = False,
                   worktree: str | None = None) -> str:
    """Verify a handoff: re-run its signed live-state probes; fresh results win over what it claims."""
    from baton.skills.services.handoff import verify_asked

    def run(stores: Stores) -> dict:
        directory = _directory(worktree)
        if allow_unsigned_probes:
            _unsigned_allowed()
            if path is not None:
                raise BadInput("allow_unsigned_probes runs only this worktree's current handoff, not a path")
        checked = verify_asked(stores, directory, _handoff_path(path, directory), task_id, allow_unsigned_probes)
        _log(checked.warnings)
        return checked.verification.to_json()

    return _call(run)


@_served("Recall decisions", read_only=True)
def recall_decisions(query: str, limit: int = 5) -> str:
    """Search every ticket's recorded decisions by meaning and by their words (what was decided before, and why)."""
    from baton.skills.frontends.answers import recall_answer
    from baton.skills.services.queries import recall_decisions as search

    return _call(lambda stores: recall_answer(search(stores, query, limit)))


@_served("Read coordination signals", read_only=True)
def signals_since(since: str | None = None, task_id: str | None = None, limit: int = 100) -> str:
    """Coordination signals (conflicts, dependencies done, decisions, merges) after an ISO 8601 time, oldest first."""
    from baton.skills.frontends.answers import signals_answer
    from baton.skills.services.queries import signals_since as read

    return _call(lambda stores: signals_answer(read(stores, task_id=task_id, since=since, limit=limit)))


@_served("Take a checkpoint")
def take_checkpoint(label: str | None = None, task_id: str | None = None, push: bool = False,
                    worktree: str | None = None) -> str:
    """Checkpoint the worktree (files, index, base commit) for the ticket, to restore or fork later; push: to the
    git remote too, for other clones."""
    from baton.skills.services.checkpoint import checkpoint_by_hand

    return _call(lambda stores: checkpoint_by_hand(stores, _place(worktree), task_id, label, push).to_json())


@_served("Restore a checkpoint", destructive=True)  # in_place: this worktree's files
def restore_checkpoint(target: str, into: str | None = None, in_place: bool = False, at: str | None = None,
                       worktree: str | None = None) -> str:
    """Restore a ticket's checkpoint (TASK[@CHECKPOINT], default its newest, fetched from the git remote when missing
    here) into a new worktree as a new run."""
    from baton.skills.services.runs import restore

    return _call(lambda stores: restore(stores, _place(worktree), target, at=at, into=Path(into) if into else None,
                                        in_place=in_place).to_json())


@_served("Fork a ticket")
def fork_task(task_id: str, new_task_id: str, at: str | None = None, into: str | None = None,
              worktree: str | None = None) -> str:
    """Fork a ticket's checkpoint into a new ticket with its own worktree and branch."""
    from baton.skills.services.runs import fork

    return _call(lambda stores: fork(stores, _place(worktree), task_id, new_task_id, at=at,
                                     into=Path(into) if into else None).to_json())


@_served("Start a ticket afresh", destructive=True)  # supersedes the current run
def start_fresh(task_id: str, base: str | None = None, into: str | None = None, worktree: str | None = None) -> str:
    """Start a ticket again on a new base in a new worktree; the journal is kept, the old run superseded."""
    from baton.skills.services.runs import fresh

    return _call(lambda stores: fresh(stores, _place(worktree), task_id, base=base,
                                      into=Path(into) if into else None).to_json())


@cache  # built once in the resident, which forks each `baton mcp` it serves
def catalogue() -> tuple[list[dict], dict[str, type[BaseModel]], dict[str, str]]:
    """Each tool as tools/list shows it, its argument model (which validates a call and wrote
    the schema, trimmed by _lean), and the serverInfo."""
    from pydantic import create_model

    from baton.skills.runtime.distribution import version

    listed, models = [], {}
    for name, served in TOOLS.items():
        fields: dict[str, Any] = {p.name: (p.annotation, ... if p.default is p.empty else p.default)
                                  for p in inspect.signature(served.function, eval_str=True).parameters.values()}
        models[name] = create_model(f"{name}Arguments", **fields)
        listed.append({**served.shown, "inputSchema": _lean(models[name].model_json_schema())})
    return listed, models, {"name": "baton", "version": version()}


# The initialize handshake's protocol versions, oldest first, and the per-request envelope's
# (`server/discover`, the version in each request's _meta), which Claude Code, Codex and Copilot try first.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ENVELOPE_VERSION, META = "2026-07-28", "io.modelcontextprotocol/"
# Only tools are declared: a client shows the model a capability's tools on every turn (Claude
# Code adds three resource tools for an empty `resources`).
SERVED = {"capabilities": {"tools": {"listChanged": False}}, "instructions": INSTRUCTIONS}
CACHED = {"cacheScope": "private", "ttlMs": 0}


def _answer(line: bytes) -> dict | None:
    """The JSON-RPC 2.0 answer to one line; None for a notification."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        return _error(None, -32700, "Parse error")
    number = message.get("id") if isinstance(message, dict) and type(message.get("id")) in (str, int) else None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str) \
            or ("id" in message and number is None):
        return _error(number, -32600, "Invalid Request")
    if "id" not in message:
        return None  # initialized, cancelled (the call runs to its end) or another: none needs an answer
    params = message.get("params") or {}
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(f"{META}protocolVersion") if isinstance(meta, dict) else None
    if version is not None and version != ENVELOPE_VERSION:
        return _error(number, -32022, "Unsupported protocol version",
                      {"supported": [ENVELOPE_VERSION], "requested": version})
    try:
        result = _result(message["method"], params, version is not None) if isinstance(params, dict) else None
    except LookupError:
        return _error(number, -32601, "Method not found", message["method"])
    if result is None:
        return _error(number, -32602, "Invalid request parameters", "")
    if version is not None:
        result |= {"resultType": "complete", "_meta": {f"{META}serverInfo": catalogue()[2]}}
    return {"jsonrpc": "2.0", "id": number, "result": result}


def _result(method: str, params: dict, enveloped: bool) -> dict | None:
    """A method's result in its era (enveloped: 2026-07-28's); None for params it cannot take."""
    listed, _, info = catalogue()
    if method == "tools/list":
        return {"tools": listed, **(CACHED if enveloped else {})}
    if method == "tools/call":
        return _call_tool(params)
    if method == "server/discover" and enveloped:
        return {**SERVED, "supportedVersions": [ENVELOPE_VERSION], **CACHED}
    if method == "ping" and not enveloped:
        return {}
    if method == "initialize" and not enveloped:
        asked = params.get("protocolVersion")
        return {**SERVED, "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
                "serverInfo": info}
    raise LookupError(method)


def _call_tool(params: dict) -> dict | None:
    """One tool call's result: whatever fails is a tool error (tool_error), for the model to read."""
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    try:
        model = catalogue()[1].get(name)
        if model is None:
            raise BadInput(f"Unknown tool: {name}")
        for argument, value in arguments.items():
            _check_texts(argument, value)
        given = model.model_validate(_from_json_text(model, arguments))
        text = TOOLS[name].function(**{field: getattr(given, field) for field in model.model_fields})
    except Exception as exc:  # noqa: BLE001 -- answered to the model (a bug: its trace to stderr)
        error = tool_error(exc)
        return {"content": [{"type": "text", "text": json.dumps(error, ensure_ascii=False)}],
                "structuredContent": error, "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _from_json_text(model: type[BaseModel], arguments: dict) -> dict:
    """The arguments, a list or an object sent as JSON text parsed (as the SDK did: clients do)."""
    parsed = dict(arguments)
    for name, value in arguments.items():
        if (field := model.model_fields.get(name)) and field.annotation is not str and isinstance(value, str):
            with suppress(ValueError, RecursionError):
                if not isinstance(loaded := json.loads(value), str | int | float):
                    parsed[name] = loaded
    return parsed


def _error(number: str | int | None, code: int, message: str, data: object = None) -> dict:
    return {"jsonrpc": "2.0", "id": number,
            "error": {"code": code, "message": message, **({} if data is None else {"data": data})}}


def tool_error(cause: BaseException) -> dict:
    """The structured error of a failed tool call, from what it raised."""
    import sqlite3

    from pydantic import ValidationError

    from baton.errors import BatonError
    from baton.shown_text import one_line

    if isinstance(cause, BatonError):
        kind, store, message, recoverable = cause.kind, cause.store, str(cause), cause.recoverable
    elif isinstance(cause, ValidationError):
        kind, store, recoverable = "bad_input", None, False
        message = "; ".join(_argument_problem(problem) for problem in cause.errors())
    elif isinstance(cause, (OSError, sqlite3.Error)):
        # The machine failing under Baton (a full disk, a vanished directory), as the CLI's exit 3.
        where = f"{cause.filename}: " if isinstance(cause, OSError) and cause.filename else ""
        kind, store, recoverable = "store_unavailable", None, True
        message = f"{where}{cause.strerror if isinstance(cause, OSError) and cause.strerror else cause}"
    else:  # a bug: its trace goes to the server's stderr, not to the model
        import traceback

        traceback.print_exception(cause)
        kind, store, message, recoverable = "internal", None, f"internal error ({type(cause).__name__})", False
    from baton.masking import mask

    return {"error": {"type": kind, "store": None if store is None else str(store),
                      "message": one_line(mask(message)), "recoverable": recoverable}}


def _check_texts(name: str, value: object) -> None:
    """BadInput naming the argument (not its value: the caller's data) whose text, at any
    depth, holds a control character other than a tab or a line break."""
    from baton.shown_text import check_text

    if isinstance(value, str):
        check_text(name, value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_texts(f"{name}.{key}", key)
            _check_texts(f"{name}.{key}", item)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _check_texts(f"{name}[{position}]", item)


def _argument_problem(problem: Mapping[str, Any]) -> str:
    """One argument's problem in pydantic's report, without the value given (the caller's data)."""
    name = ".".join(str(part) for part in problem.get("loc", ())) or "arguments"
    return f"{name}: {problem.get('msg', 'invalid').lower()}"


def serve(*, allow_unsigned_probes: bool = False) -> None:
    """Serve this directory's worktree over stdio until the client closes standard input or
    sends SIGINT or SIGTERM. allow_unsigned_probes: the client may run unsigned probes and
    commands outside the allowlist. One message a line, answered in turn: the only lines on
    standard output; whatever else writes there (a library, a command run) goes to stderr."""
    global _scope
    _scope = Scope(_served_directory(), allow_unsigned_probes)
    # Claude Code sends SIGINT at exit, and SIGTERM 100 ms later, with stdin still open: stop
    # at once, whatever runs (every write is atomic in its store; each answer is flushed).
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda number, frame: os._exit(128 + number))
    sys.stdout.flush()
    with open(os.dup(sys.stdout.fileno()), "wb") as protocol:
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        for line in sys.stdin.buffer:
            if line.strip() and (answer := _answer(line)) is not None:
                protocol.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
                protocol.flush()


def _call(run: Callable[[Stores], object], *, deliver: bool = True) -> str:
    """Run one tool in a unit of work, its answer within the answer budget (a client cuts a
    longer one in the middle); what it raises becomes a tool error (_call_tool)."""
    from baton.masking import mask_all
    from baton.skills.frontends.answer_budget import WHOLE_FETCH, fit_answer
    from baton.skills.services.unit import unit_of_work

    with unit_of_work(deliver=deliver, warn=_log, project=_place(None).repo) as stores:
        answer = mask_all(run(stores))  # as the CLI prints it: never a server's credentials
        budget = stores.settings.mcp_answer_budget
    _log(answer.get("warnings", []) if isinstance(answer, dict) else [])
    # A resume is already filled in its own order; any other answer over the budget too.
    return json.dumps(fit_answer(answer, budget, fetch=WHOLE_FETCH), ensure_ascii=False)


def _served_directory() -> Path:
    directory = Path(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    if not directory.is_dir():
        raise BadInput(f"worktree is not a directory: {directory}")
    return directory


def _current_scope() -> Scope:
    return _scope or Scope(_served_directory())


def _root_of(directory: Path) -> Path:
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of

    return place_of(directory, WorktreeLocator()).root


def _directory(worktree: str | None) -> Path:
    """The directory a tool acts in: the served one, or a directory of the served worktree
    that the call names (relative to the served one); BadInput for any other."""
    served = _current_scope().directory
    if not worktree:
        return served
    directory = served / Path(worktree).expanduser()  # an absolute path stays as given
    if not directory.is_dir():
        raise BadInput(f"worktree is not a directory: {directory}")
    root = _root_of(served)
    if _root_of(directory) != root:
        raise BadInput(f"worktree {directory} is not this server's worktree: `baton mcp` serves only {root}")
    return directory


def _place(worktree: str | None) -> Place:
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of

    return place_of(_directory(worktree), WorktreeLocator())


def _handoff_path(path: str | None, directory: Path) -> Path | None:
    """A handoff (or a directory) the call names, once it resolves inside the served
    worktree, links followed; BadInput otherwise."""
    if path is None:
        return None
    given = directory / Path(path).expanduser()
    root = _root_of(_current_scope().directory)
    real = Path(os.path.realpath(given))
    holder = real if real.is_dir() else real.parent
    if not real.is_relative_to(root) or (holder.is_dir() and _root_of(holder) != root):
        raise BadInput(f"path {given} is not in this server's worktree: `baton mcp` serves only {root}")
    return given


def _unsigned_allowed() -> None:
    """Unsigned probes run code from the branch: only when the server's user said so."""
    if not _current_scope().allow_unsigned:
        raise BadInput("allow_unsigned_probes needs the server started with `baton mcp --allow-unsigned-probes`")


def _admit(stores: Stores, what: str, commands: Iterable[str]) -> None:
    """BadInput, before anything runs, for a command the client asks Baton to run that the
    allowlist does not admit (unless the server's user allowed unsigned commands)."""
    from baton.skills.handoff.probe_policy import allowlisted
    from baton.skills.runtime.command_words import parse_command

    for command in commands:
        argv = tuple(parse_command(command))
        if not _current_scope().allow_unsigned and not allowlisted(argv, stores.settings.handoff.allow):
            raise BadInput(f"{what} {command!r} is not allowlisted for MCP clients ([handoff] allow in baton.toml); "
                           "`baton mcp --allow-unsigned-probes` would run it")


def _lean(schema: Any) -> Any:
    """The JSON schema without what the model does not need: pydantic's generated titles,
    and `anyOf [T, null]` with a null default for an optional argument (omitting it is how
    a client leaves it unset)."""
    if isinstance(schema, list):
        return [_lean(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    lean = {k: _lean(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    options = lean.get("anyOf")
    if "default" in lean and lean["default"] is None and isinstance(options, list) and len(options) == 2 \
            and {"type": "null"} in options:
        rest = {k: v for k, v in lean.items() if k not in ("anyOf", "default")}
        return {**next(o for o in options if o != {"type": "null"}), **rest}
    return lean


def _log(warnings: list[str]) -> None:
    from baton.masking import mask

    for warning in warnings:
        print(f"baton: warning: {mask(warning)}", file=sys.stderr)
