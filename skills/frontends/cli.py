"""`baton`: a thin command line over the skills.

Imports stay lazy: `baton touch` runs inside an agent's PostToolUse hook (100 ms budget),
so each command imports only what it uses. Exit status: 0 done, 2 bad input, 3 a store
needed for the answer is unavailable or a file could not be written (a full disk);
`baton guard --strict` exits 1 to block a commit, and `baton hook` always exits 0. A
store's failure is told once per command, on one line.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from baton.errors import BadInput, BatonError, StoreUnavailable, Untrusted
from baton.files import WorktreeLocator
from baton.ids import parse_ticket_id
from baton.masking import mask_all
from baton.phases import UPDATE_PHASES
from baton.shown_text import check_text, clipped, json_for_terminal, one_line
from baton.skills.core.binding import ActiveTask, Place, place_of, read_binding, resolve_task
from baton.skills.frontends.invocation import say, warn

LIST_PAGE = 1000  # baton.skills.services.listing.PAGE, which the parser of every command may not import

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

    from baton.skills.frontends import answers, render
    from baton.skills.frontends.invocation import Invocation
    from baton.skills.runtime.stores import Stores
    from baton.skills.services import handoff, leases, queries, runs

    Arguments = argparse.Namespace | SimpleNamespace  # parsed, or built by main() for a touch of paths only
    Argument = tuple[tuple[str, ...], dict[str, Any]]  # argparse's flags and keywords
else:
    class _Lazy:
        """A module imported when a command first uses it: render's imports (the handoff's) and
        the services' would cost every command's start, the hook's touch included."""

        def __init__(self, name: str) -> None:
            self.name = name

        def __getattr__(self, name: str) -> Any:
            import importlib

            return getattr(importlib.import_module(self.name), name)

    answers, render = _Lazy("baton.skills.frontends.answers"), _Lazy("baton.skills.frontends.render")
    handoff, leases = _Lazy("baton.skills.services.handoff"), _Lazy("baton.skills.services.leases")
    queries, runs = _Lazy("baton.skills.services.queries"), _Lazy("baton.skills.services.runs")


class OneOf(tuple["Argument", ...]):
    """Arguments of which a command takes at most one."""

    __slots__ = ()


class Tool:
    """The MCP tool a command is served as; baton.skills.frontends.mcp_server builds its schema
    from the command's arguments, each option under its own name unless renamed, `--task` as
    task_id, with `worktree` (the directory it acts in) unless worktree is False. Its title and
    description are written for tool search (Claude Code loads a deferred tool by a keyword query
    over names and descriptions); the annotations are what clients decide approval by (Codex runs a
    read-only or non-destructive tool without asking). Destructive: it replaces what the user has (a
    worktree's files, a ticket's current run); Baton's records are only added to."""

    __slots__ = ("description", "destructive", "idempotent", "name", "read_only", "renamed", "title", "without",
                 "worktree")

    def __init__(self, name: str, title: str, *, description: str, read_only: bool = False,
                 destructive: bool = False, idempotent: bool = False, renamed: tuple[tuple[str, str], ...] = (),
                 without: tuple[str, ...] = (), worktree: bool = True) -> None:
        self.name, self.title, self.description = name, title, description
        self.read_only, self.destructive, self.idempotent = read_only, destructive, idempotent or read_only
        self.renamed = renamed  # (option, the tool's argument) where the names differ
        self.without = without  # options the tool does not take (tests/test_parity.py says why)
        self.worktree = worktree


class Command:
    """One row of the table a command's parser, its read/write class and its MCP tool come
    from. A plain class: a NamedTuple's or a dataclass's creation would cost every command's
    start (the touch in an agent's hook included) a quarter of a millisecond or more."""

    __slots__ = ("arguments", "description", "handler", "help", "name", "reads", "stores", "subcommand", "task",
                 "tool")

    def __init__(self, name: str, help: str, arguments: tuple[Argument | OneOf, ...], handler: Callable[..., int],
                 *, reads: bool = False, tool: Tool | None = None, task: bool = True, stores: bool = True,
                 description: str | None = None, subcommand: Command | None = None) -> None:
        self.name, self.help, self.arguments = name, help, arguments
        self.handler = handler  # (args, stores); (args) for a command that opens no stores
        # Reads the stores: the writes kept on this machine are delivered first, so that it sees
        # the writes made before it; writes (and the hook's touch) never wait for a server.
        self.reads = reads
        self.tool = tool
        self.task = task  # takes --task
        # False: opens what it needs itself (a hook and the guard report Baton's own failures
        # and exit 0; the MCP server and the dashboard open stores per call).
        self.stores = stores
        self.description = description or help
        self.subcommand = subcommand


def _arg(*flags: str, **spec: Any) -> Argument:
    return flags, spec


_JSON = _arg("--json", action="store_true")
_INTO = _arg("--into", type=Path, metavar="PATH", help="an empty or new directory (default: beside this one)")
_TASK = _arg("task_id", metavar="TASK")
_BOUND_TASK = _arg("task_id", nargs="?", metavar="TASK", help="default: this worktree's ticket")
_PATHS = _arg("paths", nargs="+", metavar="PATH")
_TAKE_OVER = _arg("--take-over", action="store_true",
                  help="move the ticket here from a run that holds it in another worktree, superseding that run")
_HIDDEN = "==SUPPRESS=="  # argparse.SUPPRESS: argparse is not imported on the touch's path


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser, from COMMANDS; only: build that command's arguments alone.
    Building every command's costs a fresh process more than the rest of argparse (each
    argument's help asks gettext for a translation), and `baton touch` runs in an agent's hook."""
    import argparse

    class _PrintVersion(argparse.Action):
        """The installed distribution's version, looked up only when asked."""

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                     values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
            from baton.skills.runtime.distribution import version

            print(f"baton {version()}")
            parser.exit()

    parser = argparse.ArgumentParser(prog="baton",
                                     description="Hand a ticket's working state from one agent session to the next.")
    parser.add_argument("--project", metavar="NAME", default=argparse.SUPPRESS,  # taken before parsing
                        help="the project to read and write (default: BATON_PROJECT, baton.toml's project, "
                             "else this worktree's repository)")
    parser.add_argument("--version", action=_PrintVersion, nargs=0, default=argparse.SUPPRESS,
                        help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if only is None or command.name == only:
            _add_command(commands, command)
    return parser


def _add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: Command) -> None:
    sub = commands.add_parser(command.name, help=command.help, description=command.description)
    if command.task:
        sub.add_argument("--task", help="ticket id (default: this worktree's binding, else BATON_TASK_ID)")
    for argument in command.arguments:
        if isinstance(argument, OneOf):
            group = sub.add_mutually_exclusive_group()
            for one in argument:
                _add_argument(group, one)
        else:
            _add_argument(sub, argument)
    if command.subcommand is not None:
        _add_command(sub.add_subparsers(dest=f"{command.name}_action", metavar=command.subcommand.name),
                     command.subcommand)


def _add_argument(to: argparse._ActionsContainer, argument: Argument) -> None:
    import argparse

    flags, spec = argument
    hidden = spec.get("help") == _HIDDEN  # argparse knows its own SUPPRESS object only
    to.add_argument(*flags, **(spec | {"help": argparse.SUPPRESS} if hidden else spec))


def main(argv: list[str] | None = None, invocation: Invocation | None = None) -> int:
    """Run one command: the invocation's (the resident's child passes its client's), else
    this process's with argv, else its own command line."""
    from baton.pydantic_plugins import switch_off
    from baton.skills.frontends.invocation import of_process

    switch_off()  # before any model builds its validator (the resident's child has its client's environment)
    warnings.showwarning = _library_warning
    invocation = invocation or of_process(argv)
    given = list(invocation.argv)
    try:
        for word in given:  # before any word reaches a store, a path or a message
            check_text(f"argument {clipped(word, 40)!r}", word)
        project, given = _take_project(given)
    except BatonError as exc:
        say(f"error: {exc}")
        return exc.exit_code
    if project is not None:
        # For every command and whatever it spawns (the hooks, the guard, the MCP server
        # and the dashboard read their settings themselves).
        from baton.skills.runtime.settings import use_project

        use_project(project)
    if len(given) == 2 and given[0] == "hook" and not given[1].startswith("-"):
        # Inside the agent, on its 100 ms path: no parser to build; reports its own errors
        # on stderr and exits 0 (an unknown event name included).
        from baton.skills.frontends.hooks import run_hook

        return run_hook(given[1], invocation=invocation)
    if len(given) > 1 and given[0] == "touch" and not any(arg.startswith("-") for arg in given[1:]):
        # What a hook runs, paths only: what the parser would answer, without importing argparse.
        args: argparse.Namespace | SimpleNamespace = SimpleNamespace(command="touch", paths=given[1:], task=None,
                                                                     json=False)
    else:
        args = _parser(given[0] if given and given[0] in _BY_NAME else None).parse_args(given)
    args.invocation = invocation  # for the handlers that need more than the words (the hook's agent)
    _told.clear()
    command = _BY_NAME[args.command]
    try:
        if not command.stores:
            return command.handler(args)
        from baton.skills.services.unit import unit_of_work

        # What runs in the background asks every server, whatever the health record says.
        with unit_of_work(deliver=command.reads, warn=_warn,
                          skip_known_down=command.name not in ("deliver", "doctor", "projector", "index")) as stores:
            return command.handler(args, stores)
    except BatonError as exc:
        if isinstance(exc, Untrusted):
            say(str(exc))  # "refusing PATH: why; the fix"
        elif not isinstance(exc, StoreUnavailable):
            say(f"error: {exc}")
        elif exc.store not in _told:  # already told once in this command
            say(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`baton list | head`): stop quietly, as other tools do, and
        # keep the interpreter's final flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        # The last resort for the machine failing under Baton (a full disk, a quota, a
        # read-only or vanished directory) where no store wrapped it: one line, exit 3.
        import sqlite3

        if not isinstance(exc, (OSError, sqlite3.Error)):
            raise
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
        say(f"{where}{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
        return 3


def _take_project(given: list[str]) -> tuple[str | None, list[str]]:
    """(the project of a leading `--project NAME` or `--project=NAME`, the other arguments);
    it wins over BATON_PROJECT and baton.toml, as the command line does."""
    if not given or not given[0].startswith("--project"):
        return None, given
    if given[0] == "--project" and len(given) > 1:
        name, rest = given[1], given[2:]
    elif given[0].startswith("--project="):
        name, rest = given[0].removeprefix("--project="), given[1:]
    else:
        return None, given  # the parser says what is wrong
    from baton.projects import check_project

    return check_project(name), rest


def run() -> None:
    """The console script: main(), then an exit that never waits for an abandoned read."""
    from baton.budget import leave

    leave(main())


def _library_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     file: object = None, line: str | None = None) -> None:
    """A library's warning as one line of Baton's (Python's own names the library's source
    file, on two lines)."""
    say(f"warning: {category.__name__}: {message}")


def _place(args: Arguments | None = None) -> Place:
    return _located(args)[0]


def _located(args: Arguments | None) -> tuple[Place, WorktreeLocator]:
    locator = WorktreeLocator()
    return place_of(_here(args), locator), locator


def _here(args: Arguments | None) -> Path:
    """The directory a command acts in: its process's, or the one an MCP tool call names."""
    return getattr(args, "directory", None) or Path.cwd()


def _active(args: Arguments, place: Place, stores: Stores) -> ActiveTask:
    return resolve_task(getattr(args, "task", None), place, stores.settings.ambient)


_told: set[str] = set()  # stores whose failure this command already told
_warn = partial(warn, told=_told)  # a store's failure told once per command


def _dump(args: Arguments, data: Any, layout: str = "indented") -> None:
    """A command's JSON answer: handed to the MCP tool that runs the command (args.answer), else
    printed, never a server's credentials: indented; "line": on one line (an answer fitted to a
    budget, which counts the characters printed); "rows": a list, one row to a line (the C
    encoder writes each; json.dumps with an indent runs in Python, seconds for a hundred
    thousand sessions)."""
    if (answer := getattr(args, "answer", None)) is not None:
        return answer(data)
    if layout == "rows":
        lines = ",\n".join(f"  {json.dumps(mask_all(row), ensure_ascii=False)}" for row in data)
        print(json_for_terminal(f"[\n{lines}\n]" if data else "[]"))
    else:
        print(json_for_terminal(json.dumps(mask_all(data), indent=2 if layout == "indented" else None,
                                           ensure_ascii=False)))
    return None


def _shown(args: Arguments, answer: object, text: str, code: int = 0) -> int:
    """A command's answer: as JSON with --json, else as text; its exit status."""
    if args.json:
        _dump(args, answer)
    else:
        print(text)
    return code


def _answered(args: Arguments, report: Any, text: str, code: int = 0) -> int:
    """_shown for a service's report: its warnings told first, its to_json() the JSON answer."""
    _warn(report.warnings)
    return _shown(args, report.to_json(), text, code)


def _bind(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.bind import bind

    place = _place(args)
    report = bind(stores, parse_ticket_id(args.task_id), place, agent=args.agent, take_over=args.take_over)
    _warn(report.warnings)
    # Said here, not in render: that module's imports (the handoff's) would cost a first bind.
    moved = f" (was {report.previous_task})" if report.previous_task else ""
    return _shown(args, answers.bind_answer(args.task_id, place, report),
                  f"Bound {place.root} to {args.task_id}{moved} (session {report.session_id})")


def _touch(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.touch import touch

    place, locator = _located(args)
    task = _active(args, place, stores)
    report = touch(stores, task, args.paths, _here(args), locator)
    _warn(report.warnings)
    if args.json:
        _dump(args, answers.touch_answer(task, report))
        return 0
    # Said here, not in render: that module's imports (the handoff's) would cost the hook's touch.
    for conflict in report.new_conflicts:
        shared = one_line(", ".join(report.conflict_paths[conflict.other_task_id]))
        if conflict.other_task_id in report.forks:
            print(f"Note: {conflict.other_task_id} also touching {shared} (fork of: "
                  f"{one_line(report.forks[conflict.other_task_id])}; expected, not a conflict)")
        else:
            print(f"Warning: {conflict.other_task_id} also touching {shared} (advisory)")
    return 0


def _check(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.pre_edit import ALLOW, check_paths, checking_task

    place, locator = _located(args)
    task_id = checking_task(getattr(args, "task", None), place, stores.settings.ambient)
    verdict = check_paths(stores, task_id, args.paths, _here(args), locator)
    _warn(verdict.warnings)
    last = ("No other active ticket holds these files." if verdict.decision == ALLOW and not verdict.context
            else f"Decision: {verdict.decision}")
    return _shown(args, {"task_id": task_id, **verdict.public()},
                  "\n".join([*filter(None, (verdict.reason, verdict.context)), last]))


def _decide(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.decide import decide

    place = _place(args)
    task = _active(args, place, stores)
    report = decide(stores, task, args.text, args.context, place, supersedes=args.supersedes)
    _warn(report.warnings)
    if args.json:
        _dump(args, answers.decide_answer(task, stores.redact(args.text), stores.redact(args.context), report))
    return 0


def _update(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.update import UpdateRequest, update_asked

    place = _place(args)
    request = UpdateRequest(task_id=args.task, phase=args.phase, next_action=args.next_action, done=tuple(args.done),
                            failed=tuple(args.failed), depends_on=tuple(args.depends_on), goal=args.goal,
                            constraints=tuple(args.constraint), todo=tuple(args.todo), evidence=tuple(args.evidence),
                            checks=tuple(args.check), timeout=args.timeout)
    done = update_asked(stores, place, request)
    _warn(done.report.warnings)
    if args.json:
        _dump(args, answers.update_answer(done.task, done.report, **done.recorded(request, stores.redact)))
        return 0
    sys.stdout.write(render.check_lines(done.checks))
    return 0


def _stage(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.stage import StageCommand, record_stage

    done = record_stage(stores, _place(args), StageCommand(args.status, task_id=args.task, result=args.result,
                                                           repair_scope=args.repair_scope, evidence=args.evidence,
                                                           check=args.check, blocker=args.blocker,
                                                           resolved=args.resolved, timeout=args.timeout))
    _warn(done.report.warnings)
    return _shown(args, done.to_json(), render.stage_lines(done))


def _recover(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.recover import recover

    found = recover(stores, _place(args), all_repos=args.all_repos, verbose=args.verbose)
    return _shown(args, found.as_json(), found.text(verbose=args.verbose).removesuffix("\n"))


def _end(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.end import end

    task, report = end(stores, _place(args), args.task_id or args.task_option, args.status)
    _warn(report.warnings)
    if getattr(args, "json", False):  # the MCP tool's: the command has no --json
        _dump(args, answers.end_answer(task, args.status, report))
    else:
        print(f"{task.task_id} {args.status}")
    return 0


def _resume(args: Arguments, stores: Stores) -> int:
    if args.list:
        if args.task_id:
            raise BadInput("give either TASK or --list, not both")
        args.all = False
        return _list(args, stores)
    if not args.task_id:
        raise BadInput("resume needs a TASK (or --list)")
    from baton.skills.runtime.settings import MIN_ANSWER_BUDGET
    from baton.skills.services.resume import resume_session

    if (args.budget is not None or args.section is not None) and not args.json:
        raise BadInput("--budget and --section go with --json")
    if args.budget is not None and args.budget < MIN_ANSWER_BUDGET:
        raise BadInput(f"--budget must be at least {MIN_ANSWER_BUDGET} characters")
    if args.section is not None:
        from baton.skills.frontends.answer_budget import SECTION_NAMES

        if args.section not in SECTION_NAMES:  # before the resume binds anything
            raise BadInput(f"unknown section {args.section!r}: one of {', '.join(SECTION_NAMES)}")
    result = resume_session(stores, parse_ticket_id(args.task_id), _place(args), limit=args.limit, agent=args.agent,
                            allow_unsigned_probes=args.allow_unsigned_probes, all_decisions=args.all_decisions,
                            take_over=args.take_over)
    _warn(result.warnings)
    if args.json and (args.budget is not None or args.section is not None):
        from baton.skills.frontends.answer_budget import resume_answer

        budget = args.budget if args.budget is not None else stores.settings.mcp_answer_budget
        _dump(args, resume_answer(result.to_json(), budget, args.section, args.offset), "line")
    elif args.json:
        _dump(args, result.to_json())
    else:
        print(render.resume_markdown(result))
    return 3 if result.status == "unavailable" else 0


def _list(args: Arguments, stores: Stores) -> int:
    from baton import clock
    from baton.skills.runtime.agent_sessions import local_heartbeats
    from baton.skills.services.listing import list_every_project, list_sessions

    now = clock.now()
    lister = list_every_project if getattr(args, "all_projects", False) else list_sessions
    listing = lister(stores, include_inactive=args.all, at=now, heartbeats=local_heartbeats(stores.settings),
                     limit=args.limit)
    _warn(listing.warnings)
    if args.json:
        _dump(args, answers.listing_answer(listing), "rows")
        if listing.more():
            _warn([f"{listing.more()}"])  # the rows stay a list: what a page leaves out goes to stderr
    else:
        print(render.listing_text(listing, now, colour=sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
    return 0


def _signals(args: Arguments, stores: Stores) -> int:
    signals = queries.signals_since(stores, task_id=args.task, since=args.since, limit=args.limit)
    return _shown(args, answers.signals_answer(signals),
                  "\n".join(render.signal_line(s) for s in signals) or "No signals.")


def _recall(args: Arguments, stores: Stores) -> int:
    hits = queries.recall_decisions(stores, args.text, args.limit)
    return _shown(args, answers.recall_answer(hits), render.recall_lines(hits))


def _env(args: Arguments, stores: Stores) -> int:
    place = _place(args)
    if args.action == "record":
        return _env_record(args, stores, place)
    if args.setup:
        raise BadInput("--setup goes with `baton env record`")
    binding = read_binding(place)
    if binding is None:
        raise BadInput(f"{place.root} is not bound: run `baton bind TASK`")
    print(render.binding_exports(binding))
    return 0


def _env_record(args: Arguments, stores: Stores, place: Place) -> int:
    """Exit 1 when a setup command failed (the manifest records it all the same)."""
    from baton.skills.services.environment import record_environment

    task = resolve_task(None, place, stores.settings.ambient)
    recorded = record_environment(stores, task, place, args.setup)
    return _answered(args, recorded, render.environment_lines(recorded, task.task_id),
                     1 if recorded.setup_failed else 0)


def _gc(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.gc import collect_garbage

    if args.checkpoints:
        return _gc_checkpoints(args, stores)
    report = collect_garbage(stores, dry_run=args.dry_run)
    return _answered(args, report, render.gc_lines(report))


def _doctor(args: Arguments, stores: Stores) -> int:
    from baton.clock import parse_duration
    from baton.skills.services.doctor import doctor, resident_state

    if args.window and not args.repair:
        raise BadInput("--window applies to --repair")
    try:
        window = parse_duration(args.window) if args.window else None
    except ValueError as exc:
        raise BadInput(f"--window: {exc}") from None
    reports = doctor(stores)
    repaired = None
    if args.repair:
        from baton.skills.services.repair import repair

        repaired = repair(stores, window=window)
    if args.json:
        shown = [report.to_json() for report in reports]
        _dump(args, shown if repaired is None else {"stores": shown, "repair": repaired.to_json()})
    else:
        for report in reports:
            print(render.store_line(report))
        if repaired is not None:
            _warn(repaired.warnings)
            print(repaired.summary())
        print(f"{'resident':16} {resident_state(stores.settings)}")
        _agents_installed()
    healthy = all(report.state == "ok" for report in reports) and not (repaired and repaired.warnings)
    return 0 if healthy else 3


def _agents_installed() -> None:
    """The install state of each agent Baton knows, per scope (what `baton install` wrote)."""
    place = _place()
    for agent, installer in _installers().items():
        for scope in ("project", "user"):
            try:
                line = getattr(installer, f"{agent}_state")(scope, place)
            except BatonError as exc:  # a settings file that cannot be read
                line = str(exc)
            print(render.agent_line(agent, scope, line))


def _installers() -> dict[str, Any]:
    """Each agent's installer module, which names its functions after the agent (install_codex, codex_state)."""
    from baton.skills.installers import claude_code, codex, copilot

    return {"claude": claude_code, "codex": codex, "copilot": copilot}


def _projector(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.projector import run_projector

    print(render.projected_line(run_projector(stores, group=args.group, once=args.once, idle=args.idle)))
    return 0


def _deliver(args: Arguments, stores: Stores) -> int:
    if args.background:
        from baton.skills.runtime.delivery import deliver_in_background

        stores.deliver_on_close = False  # this is the delivery
        deliver_in_background(stores)
        return 0
    _warn(stores.sink.deliver())
    left = stores.sink.waiting()
    print(render.waiting_line(left))
    return 3 if left else 0


def _index(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.index import index_waiting

    indexed = index_waiting(stores, everything=args.all, background=args.background, after=args.after)
    if indexed is None:
        return 0
    _warn(indexed.warnings)
    if indexed.queued is not None:
        print(render.queued_line(indexed.queued))
    print(render.indexed_line(indexed.report, indexed.waiting))
    return 0


def _install(args: Arguments, stores: Stores) -> int:
    """`baton install` and `baton uninstall` (args.command): Claude Code, the Codex CLI, Copilot CLI or the git
    hook."""
    installed = args.command == "install"
    strict = getattr(args, "strict", False)  # install's only
    place = _place(args)
    if args.target == "git-hook":
        if args.scope:
            raise BadInput("--scope applies to claude, codex and copilot, not git-hook")
        from baton.skills.installers.git_hook import install_git_hook, uninstall_git_hook

        if installed:
            from baton.skills.installers.claude_code import baton_executable

            hooked = install_git_hook(place.root, baton_executable("user"), strict=strict)
        else:
            hooked = uninstall_git_hook(place.root)
        print(render.git_hook_line(hooked, installed=installed, strict=strict))
        return 0
    if strict:
        raise BadInput(f"--strict applies to git-hook, not {args.target}")
    scope = args.scope or ("user" if args.target == "copilot" else "project")
    report = getattr(_installers()[args.target], f"{args.command}_{args.target}")(scope, place, stores.settings.home)
    _warn(report.warnings)
    print(getattr(render, f"{args.target}_lines")(report, installed=installed))
    _warn([report.untrusted] if getattr(report, "untrusted", None) else [])  # Codex's hooks not trusted yet
    return 0


def _guard(args: Arguments) -> int:
    """The pre-commit guard: a staged path under another ticket's exclusive lease (unless
    BATON_GUARD=warn) and overlaps found under --strict block the commit; whatever goes wrong
    in Baton itself (settings, data home, a store) lets it through with one line."""
    try:
        from baton.skills.services.guard import guard
        from baton.skills.services.unit import unit_of_work

        place, locator = _located(args)
        with unit_of_work(deliver=True, warn=_warn) as stores:
            report = guard(stores, place, locator)
            warn_only = stores.settings.guard == "warn"
    except Exception as exc:  # noqa: BLE001 -- reported, not raised: git would abort the commit
        detail = exc if isinstance(exc, BatonError) else f"{type(exc).__name__}: {exc}"
        say(f"pre-commit guard skipped: {detail}")
        return 0
    _warn(report.warnings)
    if report.task_id is None:
        print(f"baton: pre-commit guard: {place.root} is not bound to a ticket (`baton bind TASK`); nothing checked",
              file=sys.stderr)
        return 0
    for other, paths in report.overlaps.items():
        say(f"warning: {', '.join(paths)} also touched by {other}, another active ticket")
    from baton.skills.services.guard import blocking_leases

    blocked = blocking_leases(report)
    for path, hits in report.leased.items():
        for hit in hits:
            if path not in blocked or hit is blocked[path]:
                kind = "exclusive" if hit.exclusive else "shared"
                say(f"{'' if hit.exclusive else 'warning: '}{path} is under {hit.task_id}'s {kind} lease "
                     f"{hit.pattern}" + (f" ({hit.agent})" if hit.agent else "")
                     + (f": {hit.reason}" if hit.reason else ""))
    if blocked and not warn_only:
        holders = sorted({hit.task_id for hit in blocked.values()})
        print(f"baton: commit blocked: staged paths are under another ticket's exclusive lease; ask "
              f"{', '.join(holders)} to `baton release` it (a lead: `baton release --force --ticket "
              f"{holders[0]} --reason TEXT`), or commit with BATON_GUARD=warn", file=sys.stderr)
        return 1
    if report.overlaps and args.strict:
        print("baton: commit blocked (--strict): coordinate first, or commit with --no-verify", file=sys.stderr)
        return 1
    return 0


def _hook(args: Arguments) -> int:
    from baton.skills.frontends.hooks import run_hook

    return run_hook(args.event, invocation=args.invocation)


def _mcp(args: Arguments) -> int:
    from baton.skills.frontends.mcp_server import serve

    serve(COMMANDS, allow_unsigned_probes=args.allow_unsigned_probes)
    return 0


def _serve(args: Arguments) -> int:
    from baton.skills.frontends.web.server import serve
    from baton.skills.runtime.settings import load_settings

    serve(load_settings(), host=args.host, port=args.port, token=args.token, open_browser=args.open)
    return 0


def _handoff(args: Arguments, stores: Stores) -> int:
    if args.handoff_action == "verify":
        return _handoff_verify(args, stores)
    report = handoff.handoff_asked(stores, _place(args), args.task, args.check,
                                   handoff.probes_from_options(args.probe), args.timeout)
    return _answered(args, report, render.handoff_lines(report))


def _handoff_verify(args: Arguments, stores: Stores) -> int:
    checked = handoff.verify_asked(stores, _here(args), args.path, args.verify_task or args.task,
                                   args.allow_unsigned_probes)
    _warn(checked.warnings)
    verification = checked.verification
    args.json = args.verify_json
    return _shown(args, verification.to_json(), render.verification_markdown(verification),
                  1 if args.strict and not verification.held else 0)


def _checkpoint(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.checkpoint import checkpoint_by_hand

    place = _place(args)
    done = checkpoint_by_hand(stores, place, args.task, args.label, args.push)
    _warn(done.warnings)
    answer = done.to_json()
    return _shown(args, answer, render.checkpoint_taken(answer, done.task.task_id, place.root))


def _checkpoints(args: Arguments, stores: Stores) -> int:
    place = _place(args)
    task_id = runs.named_or_bound(stores, place, args.task_id)
    lines = runs.checkpoints_of(stores, place, task_id)
    return _shown(args, {"task_id": task_id, "checkpoints": [line.to_json() for line in lines]},
                  render.checkpoint_lines(task_id, lines))


def _restore(args: Arguments, stores: Stores) -> int:
    started = runs.restore(stores, _place(args), args.target, at=args.at, into=args.into, in_place=args.in_place)
    return _answered(args, started, render.started_lines(started, "Restored"))


def _fork(args: Arguments, stores: Stores) -> int:
    started = runs.fork(stores, _place(args), args.task_id, args.new_task_id, at=args.at, into=args.into)
    return _answered(args, started, render.started_lines(started, f"Forked {args.task_id} as"))


def _fresh(args: Arguments, stores: Stores) -> int:
    started = runs.fresh(stores, _place(args), args.task_id, base=args.base, into=args.into)
    return _answered(args, started, render.started_lines(started, "Started afresh:"))


def _runs(args: Arguments, stores: Stores) -> int:
    task_id = runs.named_or_bound(stores, _place(args), args.task_id)
    lines = runs.lineage(stores, task_id)
    return _shown(args, {"task_id": task_id, "runs": [line.to_json() for line in lines]},
                  render.run_tree(task_id, lines))


def _gc_checkpoints(args: Arguments, stores: Stores) -> int:
    collected = runs.collect(stores, _place(args), keep=args.keep, dry_run=args.dry_run)
    return _answered(args, collected, render.collected_lines(collected, dry_run=args.dry_run))


def _redact(args: Arguments, stores: Stores) -> int:
    """Exit 0: nothing found, or everything found rewritten; 1: a secret is left as it was
    (--dry-run, a handoff document, a store that could not take the rewrite); 3: the
    registry could not take the rewrite."""
    from baton.skills.services.secret_scan import redact_stored, scan_stored

    place = _place(args)
    scan = scan_stored(stores, place) if args.dry_run else redact_stored(stores, place)
    _warn(scan.warnings)
    if not args.json:
        _warn([f"{store} not scanned or rewritten: {reason}" for store, reason in scan.unavailable.items()])
    return _shown(args, scan.to_json(), render.scan_lines(scan), 1 if scan.left else 0)


def _migrate(args: Arguments, stores: Stores) -> int:
    from baton.skills.services.migrate import migrate

    sys.stdout.write(render.copied_lines(migrate(stores).copied))
    return 0


def _claim(args: Arguments, stores: Stores) -> int:
    place = _place(args)
    task = _active(args, place, stores)
    binding = read_binding(place)
    report = leases.claim(stores, task, place, args.paths, exclusive=args.exclusive, ttl=args.ttl, reason=args.reason,
                   agent=binding.agent if binding else None)
    _warn(report.warnings)
    lines = [f"claimed {lease.line()}" for lease in report.granted]
    lines += [f"held already {lease.line()}" for lease in report.already]
    lines += [f"Note: shared with {lease.line()}" for lease in report.shared_with]
    return _shown(args, leases.claim_answer(task.task_id, report), "\n".join(lines))


def _release(args: Arguments, stores: Stores) -> int:
    place = _place(args)
    report = leases.release_asked(stores, place, lambda: _active(args, place, stores), ticket=args.ticket,
                                  paths=args.paths, force=args.force, reason=args.reason)
    _warn(report.warnings)
    answer = {"task_id": report.holder, "released": [lease.public() for lease in report.released]}
    return _shown(args, answer, leases.release_line(report.holder, report.released))


def _leases(args: Arguments, stores: Stores) -> int:
    held = leases.project_leases(stores, include_ended=args.all)
    text = "\n".join(lease.line() for lease in held) or ("no leases" if args.all else "no active leases")
    return _shown(args, {"leases": [lease.public() for lease in held]}, text)


def _installer(name: str, verb: str, *extra: Argument) -> Command:
    """`baton install` or `baton uninstall`: the same targets and scopes."""
    return Command(name, f"{verb} Claude Code (hooks, skills, permission rules), the Codex CLI (MCP server, "
                         "hooks and their trust), Copilot CLI (MCP server, hooks, skills) or git (the pre-commit "
                         "guard).", (
        _arg("target", choices=["claude", "codex", "copilot", "git-hook"]),
        _arg("--scope", choices=["project", "user"],
             help="claude: this worktree's .claude/ (default) or ~/.claude/; codex: this worktree's "
                  ".codex/ (default) or $CODEX_HOME (~/.codex/); copilot: $COPILOT_HOME (~/.copilot/, default) "
                  "or this worktree's .github/"),
        *extra), _install, task=False)


COMMANDS: tuple[Command, ...] = (
    Command("bind", "Bind this worktree to a ticket and record the session.", (
        _TASK,
        _arg("--agent", help="name of the agent working on it"),
        _TAKE_OVER,
        _JSON), _bind, tool=Tool("bind_task", "Bind the worktree to a ticket", idempotent=True, description=(
            "Bind this worktree to a ticket and start its session, without the resume context.")), task=False),
    Command("touch", "Record files the ticket touched; warn about overlaps with other active tickets.", (
        _PATHS,
        _JSON), _touch, tool=Tool("record_touch", "Record files touched", idempotent=True, description=(
            "Record files the ticket changed; returns conflicts with other active tickets. Call after editing files "
            "outside Edit/Write."))),
    Command("check", "Check files before editing them against other active tickets' touches and leases.", (
        _PATHS,
        _JSON), _check, reads=True, tool=Tool("check_paths", "Check files before editing", read_only=True, description=(
            "Before editing files: conflicts with other active tickets' touches and leases; allow, ask or deny, with "
            "each holder and their next action."))),
    Command("decide", "Record a decision (indexed for recall by other tickets).", (
        _arg("text", metavar="TEXT"),
        _arg("--context", default="", help="why, or what it applies to"),
        _arg("--supersedes", action="append", default=[], metavar="TICKET[#N]",
             help="an earlier decision this one replaces: TICKET's Nth (1-based), or its latest (repeatable)"),
        _JSON), _decide, tool=Tool("record_decision", "Record a decision", description=(
            "Record a decision and why, so that later sessions and other tickets recall it."))),
    Command("claim", "Lease paths or gitignore patterns (relative to the repository's root) for the ticket: "
                     "advisory, exclusive or shared; refused (exit 1) when another ticket holds them exclusive.", (
        _arg("paths", nargs="+", metavar="PATH|GLOB"),
        _arg("--exclusive", action="store_true", help="no other ticket may hold an overlapping lease"),
        _arg("--ttl", metavar="DURATION",
             help="how long it lasts after the ticket's last activity (default BATON_LEASE_TTL, 30m)"),
        _arg("--reason", metavar="TEXT", help="why, shown to whoever it stops"),
        _JSON), _claim, tool=Tool("claim_paths", "Lease paths", description=(
            "Lease paths or gitignore globs for the ticket, exclusive or shared, so other agents keep off them; "
            "refused naming the holder."))),
    Command("release", "End the ticket's leases (on the patterns given, else all); a lead ends another "
                       "ticket's with --force --ticket T --reason TEXT.", (
        _arg("paths", nargs="*", metavar="PATTERN"),
        _arg("--ticket", metavar="TASK", help="the ticket whose leases to release (another's needs --force)"),
        _arg("--force", action="store_true", help="release another ticket's leases (recorded with who and why)"),
        _arg("--reason", metavar="TEXT", help="why (required with --force)"),
        _JSON), _release, tool=Tool("release_leases", "Release leases", idempotent=True, description=(
            "Release the ticket's leases (the patterns given, else all); a lead forces another ticket's, with a "
            "reason."))),
    Command("leases", "List the project's active leases (--all: lapsed, released and ended ones too).", (
        _arg("--all", action="store_true", help="every lease, not only active ones"),
        _JSON), _leases, reads=True,
        tool=Tool("list_leases", "List leases", read_only=True, worktree=False, description=(
            "List the project's active leases (all: lapsed and released too): who holds which paths.")), task=False),
    Command("update", "Record phase, next action, completed steps, failures or dependencies.", (
        _arg("--phase", choices=UPDATE_PHASES),
        _arg("--next", dest="next_action", metavar="TEXT"),
        _arg("--done", action="append", default=[], metavar="TEXT"),
        _arg("--failed", action="append", default=[], metavar="TEXT"),
        _arg("--depends-on", action="append", default=[], metavar="TASK"),
        _arg("--goal", metavar="TEXT", help="the ticket's goal (journal)"),
        _arg("--constraint", action="append", default=[], metavar="TEXT", help="a constraint to respect (journal)"),
        _arg("--todo", action="append", default=[], metavar="TEXT",
             help="remaining work (journal); done once a --done has the same text"),
        _arg("--evidence", action="append", default=[], metavar="TEXT", help="evidence you report (journal)"),
        _arg("--check", action="append", default=[], metavar="CMD",
             help="run CMD now (no shell) and record its exit status and summary as an observed check"),
        _arg("--timeout", type=float, metavar="SECONDS", help="seconds each --check may run (default 300)"),
        _JSON), _update,
        tool=Tool("update_session", "Update the session", renamed=(("constraint", "constraints"), ("check", "checks")),
                  description="Record the session's phase, next action, done steps, failures, dependencies, "
                              "journal (goal, todo, constraints, evidence) and checks.")),
    # A stage reads the state it moves on: the earlier transitions kept here are delivered first.
    Command("stage", "Record a workflow stage's status; a pass is recorded once its proof holds.", (
        _arg("status", metavar="STATUS", help="e.g. PLAN_READY, IMPLEMENTED, REVIEW_PASS, TEST_PASS, TEST_FAIL"),
        _arg("--result", metavar="R", help="the stage's own result (RETRO_COMPLETE: DOCS_UPDATED or NO_DOC_CHANGE)"),
        _arg("--repair-scope", metavar="S", help="what a repair touches: test-infrastructure, production, ..."),
        OneOf((_arg("--evidence", metavar="PATH", help="the artifact that proves the stage (a review, a result)"),
               _arg("--check", metavar="CMD", help="run CMD now (no shell): TEST_PASS needs it to pass"))),
        _arg("--blocker", metavar="TEXT", help="what stops the work (a blocked status)"),
        _arg("--resolved", metavar="TEXT", help="how the recorded blocker was resolved (leaving WORKFLOW_BLOCKED)"),
        _arg("--timeout", type=float, metavar="SECONDS", help="seconds the --check may run (default 300)"),
        _JSON), _stage, reads=True, tool=Tool("record_stage", "Record a workflow stage", description=(
            "Record a workflow stage's status (PLAN_READY, IMPLEMENTED, REVIEW_PASS, TEST_PASS...); TEST_PASS runs "
            "check, a review or retro needs evidence (a file)."))),
    Command("recover", "Find interrupted work (an agent gone, its session not ended) and the command that "
                       "continues each; runs nothing.", (
        _JSON,
        _arg("--verbose", action="store_true", help="say why each other session was excluded"),
        _arg("--all-repos", action="store_true",
             help="every repository of the project on this machine, not only this one")),
        _recover, reads=True, tool=Tool("recover_work", "Find interrupted work", read_only=True, description=(
            "Find interrupted work (an agent gone, a session not ended) and the command that resumes each; runs "
            "nothing.")), task=False),
    Command("end", "End the ticket's session as completed (default) or stalled.", (
        _arg("task_id", nargs="?", metavar="TASK"),
        _arg("--task", dest="task_option", help=_HIDDEN),
        _arg("--status", choices=["completed", "stalled"], default="completed")),
        _end, tool=Tool("end_session", "End the session", idempotent=True, renamed=(("task_option", "task_id"),),
                  description="End the ticket's session as completed (default) or stalled, when the work "
                              "stops."), task=False),
    Command("checkpoint", "Checkpoint this worktree (base, staged and worktree state) for its ticket.", (
        _arg("--label", metavar="TEXT", help="a label to find it by"),
        _arg("--push", action="store_true", help="push it to the repository's git remote too, so another clone's "
             "restore fetches it (whatever [checkpoints] push says)"),
        _JSON), _checkpoint, tool=Tool("take_checkpoint", "Take a checkpoint", description=(
            "Checkpoint the worktree (files, index, base commit) for the ticket, to restore or fork later; push: to "
            "the git remote too, for other clones."))),
    Command("checkpoints", "List a ticket's checkpoints, newest first.", (
        _BOUND_TASK,
        _JSON), _checkpoints, reads=True, task=False),
    Command("restore", "Restore a ticket's checkpoint into a new worktree, bound to the ticket in a new run.", (
        _arg("target", metavar="TASK[@CHECKPOINT]", help="default checkpoint: the ticket's newest, wherever it was "
             "taken (fetched from the git remote when this clone lacks it)"),
        _arg("--at", metavar="CHECKPOINT", help="this checkpoint instead of the newest (as TASK@CHECKPOINT)"),
        _INTO,
        _arg("--in-place", action="store_true", help="into this worktree, which must be clean"),
        _JSON), _restore, reads=True,
        tool=Tool("restore_checkpoint", "Restore a checkpoint", destructive=True, description=(
            "Restore a ticket's checkpoint (TASK[@CHECKPOINT], default its newest, fetched from the git remote when "
            "missing here) into a new worktree as a new run.")), task=False),
    Command("fork", "Start a new ticket from a checkpoint of TASK, in its own worktree and branch.", (
        _TASK,
        _arg("--as", dest="new_task_id", required=True, metavar="NEW", help="the new ticket's id"),
        _arg("--at", metavar="CHECKPOINT", help="default: the ticket's latest checkpoint"),
        _INTO,
        _JSON), _fork, reads=True, tool=Tool("fork_task", "Fork a ticket", description=(
            "Fork a ticket's checkpoint into a new ticket with its own worktree and branch.")), task=False),
    Command("fresh", "Start TASK again on a new base, in a new worktree: journal kept, previous run superseded.", (
        _TASK,
        _arg("--base", metavar="REF", help="default: the repository's default branch"),
        _INTO,
        _JSON), _fresh, reads=True, tool=Tool("start_fresh", "Start a ticket afresh", destructive=True,
                  description="Start a ticket again on a new base in a new worktree; the journal is kept, the "
                              "old run superseded."), task=False),
    Command("runs", "Print a ticket's runs and forks as a tree.", (
        _BOUND_TASK,
        _JSON), _runs, reads=True, task=False),
    Command("resume", "Print everything known about a ticket and bind this worktree to it.", (
        _arg("task_id", nargs="?", metavar="TASK"),
        _arg("--list", action="store_true", help="list active sessions instead"),
        _arg("--json", action="store_true", help="print the documented JSON schema"),
        _arg("--limit", type=int, default=5, help="related decisions to show (default 5)"),
        _arg("--agent", help="name of the agent resuming"),
        _arg("--all-decisions", action="store_true",
             help="related decisions superseded, of abandoned tickets or past the horizon too, marked"),
        _arg("--allow-unsigned-probes", action="store_true",
             help="re-run the handoff's unsigned or edited probes too (they run code from the branch)"),
        _TAKE_OVER,
        _arg("--budget", type=int, metavar="CHARS",
             help="with --json: fit the answer in CHARS characters, filled in priority order, saying what "
                  "it left out (as MCP answers are)"),
        _arg("--section", metavar="NAME", help="with --json: only this section's items (files, decisions, "
             "signals, ...), from --offset on, a page within the budget"),
        _arg("--offset", type=int, default=0, metavar="N", help="with --section: the first item (default 0)")),
        _resume, reads=True,
        tool=Tool("resume_session", "Resume a ticket", idempotent=True, without=("list", "budget"), description=(
            "Resume a ticket's session: its state, next action, conflicts with other tickets, decisions, files and "
            "missed signals; binds this worktree. Call first when picking up a ticket or handoff.")), task=False),
    Command("list", "List active sessions, conflicts highlighted.", (
        _JSON,
        _arg("--all", action="store_true", help="include completed and stalled sessions"),
        _arg("--all-projects", action="store_true", help="every project's sessions, each with its project"),
        _arg("--limit", type=int, default=LIST_PAGE, metavar="N",
             help=f"past N sessions (default {LIST_PAGE:,}), show N: those in conflict first, then the newest; "
                  "0 shows every one")),
        _list, reads=True,
        tool=Tool("list_sessions", "List active sessions", read_only=True, renamed=(("all", "include_ended"),),
                  without=("all_projects",), worktree=False,
                  description="List the active sessions (tickets, agents, worktrees) and the conflicts between "
                              "them."), task=False),
    Command("signals", "Show coordination signals.", (
        _arg("--task", help="only signals about this ticket"),
        _arg("--since", help="ISO 8601 time; only signals after it"),
        _arg("--limit", type=int, default=100),
        _JSON), _signals, reads=True,
        tool=Tool("signals_since", "Read coordination signals", read_only=True, worktree=False, description=(
            "Coordination signals (conflicts, dependencies done, decisions, merges) after an ISO 8601 time, oldest "
            "first.")), task=False),
    Command("recall", "Search recorded decisions by meaning and by their words.", (
        _arg("text", metavar="TEXT"),
        _arg("--limit", type=int, default=5),
        _JSON), _recall, reads=True,
        tool=Tool("recall_decisions", "Recall decisions", read_only=True, renamed=(("text", "query"),), worktree=False,
                  description="Search every ticket's recorded decisions by meaning and by their words (what was"
                              " decided before, and why)."), task=False),
    Command("env", "Print the environment derived from this worktree's binding; `env record` records the "
                   "environment manifest the work runs on.", (
        _arg("action", nargs="?", choices=["record"], help="record: run the setup commands, then record "
             "OS, toolchains, lockfile hashes, services and setup statuses, and take a checkpoint"),
        _arg("--setup", action="append", default=[], metavar="CMD",
             help="with record: a setup command to run first (no shell; repeatable, run in order)"),
        _JSON), _env, task=False),
    Command("projector", "Apply the event log on Kafka to the registry, graph and recall index.", (
        _arg("--once", action="store_true", help="stop when caught up (and fail if a store is down)"),
        _arg("--group", help="Kafka consumer group (default: from the topic prefix, baton-projector "
                             "for the default prefix baton.)"),
        _arg("--idle", type=float, default=1.0, help="with --once: seconds without events that mean caught up")),
        _projector, reads=True, task=False),
    Command("migrate", "Copy the embedded data set into the configured servers (idempotent).", (),
            _migrate, reads=True, task=False),
    Command("deliver", "Deliver writes kept on this machine (hook touches, writes made while a server was down).", (
        _arg("--background", action="store_true",
             help="linger for more writes and retry while a server is down (what a touch starts)"),),
        _deliver, task=False),
    Command("index", "Embed the decisions waiting for recall (writes queue them; a background indexer "
                     "usually has done this already).", (
        _arg("--all", action="store_true",
             help="first queue every decision the registry holds that the index lacks (heals a lost index), "
                  "then embed again those embedded by an older recipe"),
        _arg("--background", action="store_true",
             help="linger for more decisions, at low priority (what a write starts)"),
        _arg("--after", type=int, help=_HIDDEN)), _index, task=False),  # the pid of the command that started it
    Command("doctor", "Show each store's backend, server and version, and whether it answers.", (
        _arg("--repair", action="store_true",
             help="then compare the graph, recall and conflict signals with the registry over the repair "
                  "window and apply again what each lacks"),
        _arg("--window", metavar="DURATION",
             help="with --repair: how far back (e.g. 6h, 2d; default [doctor] repair_window, 24h)"),
        _JSON), _doctor, reads=True, task=False),
    Command("redact", "Find and rewrite secrets already stored (registry events, signals, recall; this "
                      "worktree's handoffs are reported only).", (
        _arg("--scan", action="store_true", required=True,
             help="report where each secret is and its kind (never the secret), then rewrite it in a new "
                  "event; exit 1 when one is left as it was"),
        _arg("--dry-run", action="store_true", help="report only; rewrite nothing"),
        _JSON), _redact, reads=True, task=False),
    Command("gc", "Remove what retention no longer keeps: old ended sessions with their events, "
                  "their graph and recall entries, old signals ([retention] in baton.toml).", (
        _arg("--dry-run", action="store_true", help="say which sessions would go; remove nothing"),
        _arg("--checkpoints", action="store_true", help="instead, remove this repository's checkpoints that nothing "
             "needs"),
        _arg("--keep", type=int, metavar="N", help="with --checkpoints: the newest kept per run besides those still "
             "needed (default [checkpoints] keep_per_run, 5)"),
        _JSON), _gc, reads=True, task=False),
    _installer("install", "Wire Baton into",
               _arg("--strict", action="store_true", help="git-hook: block the commit instead of warning")),
    _installer("uninstall", "Remove what `baton install` added to"),
    Command("hook", "Run an agent's hook: the event's JSON payload comes on stdin; always exits 0.", (
        _arg("event", choices=["session-start", "pre-tool-use", "post-tool-use", "user-prompt-submit", "stop",
                               "session-end"]),),
        _hook, task=False, stores=False),
    Command("guard", "Check staged files against other active tickets (the pre-commit guard).", (
        _arg("--strict", action="store_true", help="exit 1 (blocking the commit) when one overlaps"),),
        _guard, task=False, stores=False),
    Command("mcp", "Serve Baton's tools for this worktree to MCP clients over stdio.", (
        _arg("--allow-unsigned-probes", action="store_true",
             help="let the client run unsigned probes, and checks or probes outside [handoff] allow"),),
        _mcp, task=False, stores=False),
    Command("serve", "Serve the read-only web dashboard for leads (needs the dashboard extra).", (
        _arg("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs a token)"),
        _arg("--port", type=int, default=8737),
        _arg("--token", help="token every request must show (default BATON_DASHBOARD_TOKEN)"),
        _arg("--open", action="store_true", help="open the dashboard in a browser")), _serve, task=False, stores=False),
    Command("handoff", "Write a handoff with signed live-state probes (docs/handoffs/<date>-<ticket>.md and "
                       "LATEST.md); `baton handoff verify [PATH]` re-runs them.", (
        _arg("--check", action="append", default=[], metavar="CMD", help="run CMD now and record its result"),
        _arg("--probe", action="append", default=[], metavar="NAME=CMD",
             help="a live-state section NAME probed by CMD"),
        _arg("--timeout", type=float, metavar="SECONDS",
             help="seconds each check or probe may run now (default: checks 300, probes BATON_PROBE_TIMEOUT)"),
        _JSON), _handoff, reads=True,
        tool=Tool("write_handoff", "Write a handoff", renamed=(("check", "checks"), ("probe", "probes")), description=(
            "Write the ticket's handoff document for the next session: journal, git state, checks and live-state "
            "probes (NAME: CMD), signed.")),
        subcommand=Command("verify", "re-run a handoff's live-state probes", (
            _arg("path", nargs="?", type=Path, metavar="PATH"),
            _arg("--task", dest="verify_task", help="only a handoff of this ticket"),
            _arg("--allow-unsigned-probes", action="store_true",
                 help="run unsigned or edited probes too (they run code from the branch)"),
            _arg("--strict", action="store_true", help="exit 1 unless every claim held (stale alarms aside)"),
            _arg("--json", dest="verify_json", action="store_true")), _handoff,
            tool=Tool("verify_handoff", "Verify the handoff", renamed=(("verify_task", "task_id"),),
                      without=("strict",), description="Verify a handoff: re-run its signed live-state probes; "
                                                       "fresh results win over what it claims."), task=False,
            description="Re-run the live-state probes of PATH (a handoff or a worktree; default: this worktree's "
                        "current handoff) and record the verification.")),
)
_BY_NAME = {command.name: command for command in COMMANDS}


if __name__ == "__main__":
    run()
