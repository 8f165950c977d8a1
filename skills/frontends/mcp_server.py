"""`baton mcp`: Baton's tools for any MCP client, served over stdio.

Served by the JSON-RPC loop below, not the `mcp` SDK 2.3.0, whose import took 538 of the
659 ms a new server needed to answer `initialize` (quiet machine; tests/test_mcp_wire.py
keeps the SDK's answers, which this loop gives too; docs/performance.md has the figures).

Each tool is a row of the command line's table (baton.skills.frontends.cli.COMMANDS) and
returns, as JSON text, what its command prints with `--json`. The server serves the one
worktree it was started in, and runs a command a client asks for (a check, a probe) only
when the allowlist admits it: docs/agents.md (MCP) says what each refusal and tool error
is. Descriptions stay short: without tool search every schema goes to the model on every
turn (bench/hooks.py prints their total size).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

from baton.errors import BadInput
from baton.files import WorktreeLocator
from baton.masking import mask, mask_all
from baton.shown_text import check_text, one_line
from baton.skills.core.binding import place_of, resolve_task
from baton.skills.frontends.answer_budget import SECTION_NAMES
from baton.skills.frontends.invocation import warn

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
    commands: tuple[Any, ...] = ()  # the command line's table (cli.COMMANDS), whose rows name the tools


_scope: Scope | None = None  # set by serve(); unset, the process's directory with the defaults

# The tools, in the order tools/list shows them.
ORDER = ("resume_session", "list_sessions", "bind_task", "record_touch", "check_paths", "record_decision",
         "update_session", "record_stage", "recover_work", "claim_paths", "release_leases", "list_leases",
         "end_session", "write_handoff", "verify_handoff", "recall_decisions", "signals_since", "take_checkpoint",
         "restore_checkpoint", "fork_task", "start_fresh")


def _command(row: Any, parent: Any, a: Any) -> str:
    """A tool call as its command with `--json` (the command's handler, in the directory the
    call names), answering the JSON the command prints; the rules only a client's call has
    (the allowlist, unsigned probes, the answer budget) apply first."""
    directory, answers = _directory(getattr(a, "worktree", None)), list[object]()
    args = SimpleNamespace(**{**_options(row, a), "command": (parent or row).name, "json": True, "verify_json": True,
                              "task": getattr(a, "task_id", None), "directory": directory, "answer": answers.append})
    if parent is not None:
        setattr(args, f"{parent.name}_action", row.name)

    def run(stores: Stores) -> object:
        if getattr(a, "allow_unsigned_probes", False):
            if not _current_scope().allow_unsigned:  # unsigned probes run code from the branch
                raise BadInput("allow_unsigned_probes needs the server started with "
                               "`baton mcp --allow-unsigned-probes`")
            if getattr(a, "path", None) is not None:
                raise BadInput("allow_unsigned_probes runs only this worktree's current handoff, not a path")
        if row.tool.name == "resume_session":
            args.budget = stores.settings.mcp_answer_budget
        if row.tool.name == "verify_handoff":
            args.path = _handoff_path(a.path, directory)
        checks = getattr(args, "check", None) or []
        _admit(stores, "check", [checks] if isinstance(checks, str) else checks)
        row.handler(args, stores)
        return answers[-1]

    return _call(run, deliver=row.tool.name != "record_touch", told=True)


def _options(row: Any, a: Any) -> dict[str, Any]:
    """The command's options (argparse's destinations) from the tool's arguments, the default
    for one the tool does not take."""
    options = {}
    for option, name, _, spec in _arguments(row):
        value = getattr(a, name, None)
        if value is None:
            value = False if spec.get("action") == "store_true" else [] if spec.get("action") == "append" \
                or spec.get("nargs") in ("*", "+") else spec.get("default")
        elif spec.get("type") is Path:
            value = Path(value) if value else None
        options[option] = value
    return options


def release_leases(a: Any) -> str:
    from baton.skills.services.leases import release_asked

    def run(stores: Stores) -> dict:
        place = _place(a.worktree)
        report = release_asked(stores, place, lambda: resolve_task(a.task_id, place, stores.settings.ambient),
                               ticket=a.ticket, paths=a.paths or [], force=a.force, reason=a.reason)
        return {"task_id": report.holder, "released": [lease.public() for lease in report.released],
                "warnings": report.warnings}

    return _call(run)


def write_handoff(a: Any) -> str:
    from baton.skills.services.handoff import handoff_asked

    checks, probes = a.checks or (), a.probes or {}

    def run(stores: Stores) -> dict:
        place = _place(a.worktree)
        _admit(stores, "check", checks)
        _admit(stores, "probe", probes.values())
        return handoff_asked(stores, place, a.task_id, checks, tuple(probes.items()), a.timeout).to_json()

    return _call(run)


# The tools whose answer is not their command's --json: release_leases adds its warnings,
# and write_handoff takes its probes as an object, not as NAME=CMD words.
RUNS: dict[str, Callable[[Any], str]] = {"release_leases": release_leases, "write_handoff": write_handoff}


@cache  # built once in the resident, which forks each `baton mcp` it serves
def catalogue(commands: tuple[Any, ...]) -> tuple[list[dict], dict[str, type[BaseModel]], dict[str, str],
                                                   dict[str, tuple[Any, Any]]]:
    """Each tool as tools/list shows it, its argument model (which validates a call and wrote
    the schema, trimmed by _lean), the serverInfo, and each tool's (command, the command it is
    a subcommand of), from the command line's table (given: the command line imports this module)."""
    from pydantic import create_model

    from baton.skills.runtime.distribution import version

    rows = {row.tool.name: (row, None if row is command else command)
            for command in commands for row in (command, command.subcommand) if row is not None and row.tool}
    listed, models = [], {}
    for name in ORDER:
        tool = rows[name][0].tool
        models[name] = create_model(f"{name}Arguments", **_fields(rows[name][0]))
        annotations = {"title": tool.title, "readOnlyHint": tool.read_only, "destructiveHint": tool.destructive,
                       "idempotentHint": tool.idempotent, "openWorldHint": False}
        listed.append({"name": name, "title": tool.title, "description": tool.description,
                       "annotations": annotations, "inputSchema": _lean(models[name].model_json_schema())})
    return listed, models, {"name": "baton", "version": version()}, rows


def _fields(command: Any) -> dict[str, Any]:
    """A tool's arguments, as pydantic's (type, default), from its command's options: each
    under its own name unless the row renames it, `--task` as task_id, then `worktree`."""
    tool = command.tool
    fields: dict[str, Any] = {}
    for option, name, flags, spec in _arguments(command):
        if option not in tool.without and option not in ("json", "verify_json"):
            fields[name] = _field(flags, spec)
    if command.task:
        fields["task_id"] = (str | None, None)
    fields |= TYPED.get(tool.name, {})
    if tool.worktree:
        fields["worktree"] = (str | None, None)
    return fields


def _arguments(command: Any) -> Iterator[tuple[str, str, tuple[str, ...], dict[str, Any]]]:
    """The command's arguments, a group's (cli.OneOf) one by one: (the option's name in
    argparse's namespace, the tool's name for it, flags, keywords)."""
    renamed = {"task": "task_id", **dict(command.tool.renamed)}
    for given in command.arguments:
        for flags, spec in (given,) if isinstance(given[1], dict) else given:
            option = spec.get("dest") or flags[0].lstrip("-").replace("-", "_")
            yield option, renamed.get(option, option), flags, spec


def _field(flags: tuple[str, ...], spec: dict[str, Any]) -> tuple[Any, Any]:
    """One option's (type, default) in a tool: a flag is a boolean, a repeated option or
    several words a list, choices a Literal; a positional or required option is required."""
    action, nargs, default = spec.get("action"), spec.get("nargs"), spec.get("default")
    if action == "store_true":
        return bool, False
    if nargs == "+":
        return list[str], ...
    if action == "append" or nargs == "*":
        return list[str] | None, None
    kind: Any = spec.get("type") if spec.get("type") in (int, float) else str
    if "choices" in spec:
        kind = Literal[tuple(spec["choices"])]
    if spec.get("required") or (not flags[0].startswith("-") and nargs is None):
        return kind, ...
    return (kind if default is not None else kind | None), default


# Where a tool's argument is typed more closely than its option (the schema lists the values).
TYPED: dict[str, dict[str, Any]] = {
    "resume_session": {"task_id": (str, ...),  # the command's alternative, --list, is list_sessions
                       "section": (Literal[SECTION_NAMES] | None, None)},  # the command checks it itself
    "write_handoff": {"probes": (dict[str, str] | None, None)}}  # {NAME: CMD} for repeated NAME=CMD


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
        result |= {"resultType": "complete", "_meta": {f"{META}serverInfo": catalogue(_current_scope().commands)[2]}}
    return {"jsonrpc": "2.0", "id": number, "result": result}


def _result(method: str, params: dict, enveloped: bool) -> dict | None:
    """A method's result in its era (enveloped: 2026-07-28's); None for params it cannot take."""
    listed, _, info, _ = catalogue(_current_scope().commands)
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
        _, models, _, rows = catalogue(_current_scope().commands)
        if name not in models:
            raise BadInput(f"Unknown tool: {name}")
        for argument, value in arguments.items():
            _check_texts(argument, value)
        given = models[name].model_validate(_from_json_text(models[name], arguments))
        text = RUNS[name](given) if name in RUNS else _command(*rows[name], given)
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
    return {"error": {"type": kind, "store": None if store is None else str(store),
                      "message": one_line(mask(message)), "recoverable": recoverable}}


def _check_texts(name: str, value: object) -> None:
    """BadInput naming the argument (not its value: the caller's data) whose text, at any
    depth, holds a control character other than a tab or a line break."""
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


def serve(commands: tuple[Any, ...], *, allow_unsigned_probes: bool = False) -> None:
    """Serve this directory's worktree over stdio until the client closes standard input or
    sends SIGINT or SIGTERM. allow_unsigned_probes: the client may run unsigned probes and
    commands outside the allowlist. One message a line, answered in turn: the only lines on
    standard output; whatever else writes there (a library, a command run) goes to stderr.
    commands: the command line's table, whose rows name the tools."""
    global _scope
    _scope = Scope(_served_directory(), allow_unsigned_probes, commands)
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


def _call(run: Callable[[Stores], object], *, deliver: bool = True, told: bool = False) -> str:
    """Run one tool in a unit of work, its answer within the answer budget (a client cuts a
    longer one in the middle); what it raises becomes a tool error (_call_tool). told: the
    command has logged the answer's warnings itself."""
    from baton.skills.frontends.answer_budget import WHOLE_FETCH, fit_answer
    from baton.skills.services.unit import unit_of_work

    with unit_of_work(deliver=deliver, warn=partial(warn, flat=False), project=_place(None).repo) as stores:
        answer = mask_all(run(stores))  # as the CLI prints it: never a server's credentials
        budget = stores.settings.mcp_answer_budget
    warn(answer.get("warnings", []) if isinstance(answer, dict) and not told else [], flat=False)
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
