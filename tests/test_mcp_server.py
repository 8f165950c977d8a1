"""`baton mcp`, driven end to end through the official SDK's own stdio client."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.claude_code import MCP_TOOLS_BYTES, size
from tests.test_touched_paths import REFUSED, spelled
from tests.workspace import run_process, two_agents

pytestmark = pytest.mark.slow  # each test starts `baton mcp` in a fresh process, about 2 s

TOOLS = {"resume_session", "list_sessions", "bind_task", "check_paths", "record_touch", "record_decision",
         "update_session", "end_session", "recall_decisions", "signals_since", "write_handoff", "verify_handoff",
         "record_stage", "recover_work", "take_checkpoint", "restore_checkpoint", "fork_task", "start_fresh",
         "claim_paths", "release_leases", "list_leases"}
# tool -> (readOnlyHint, destructiveHint, idempotentHint): what each tool does. Nothing is
# open-world (Baton's stores and this worktree only); destructive: replaces what the user
# has (a worktree's files with in_place, the ticket's current run); idempotent: the same
# call again adds nothing (a second resume or bind in a session claims nothing new).
ANNOTATIONS = {
    "resume_session": (False, False, True), "list_sessions": (True, False, True), "bind_task": (False, False, True),
    "check_paths": (True, False, True), "record_touch": (False, False, True), "record_decision": (False, False, False),
    "update_session": (False, False, False), "record_stage": (False, False, False),
    "recover_work": (True, False, True), "end_session": (False, False, True), "write_handoff": (False, False, False),
    "verify_handoff": (False, False, False), "recall_decisions": (True, False, True),
    "signals_since": (True, False, True), "take_checkpoint": (False, False, False),
    "restore_checkpoint": (False, True, False), "fork_task": (False, False, False),
    "start_fresh": (False, True, False), "claim_paths": (False, False, False),
    "release_leases": (False, False, True), "list_leases": (True, False, True),
}
WAIT = 120  # seconds: the server is a fresh process that may load the embedding model


def with_server(cwd: Path, script, *options: str):
    """Start `baton mcp OPTIONS` in cwd, open a session, run `await script(session)`, return its result."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton.skills.frontends.cli", "mcp", *options],
                                   cwd=str(cwd), env=dict(os.environ))

    async def main():
        with anyio.fail_after(WAIT):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return anyio.run(main)


def call(name: str, **arguments):
    async def script(session):
        result = await session.call_tool(name, arguments)
        return result.is_error, result.content[0].text

    return script


def allow_commands(home: Path, *commands: str) -> None:
    """Admit these commands for MCP clients: `[handoff] allow` in the data home's baton.toml."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "baton.toml").write_text("[handoff]\nallow = [" + ", ".join(json.dumps(c) for c in commands) + "]\n")


def cli_json(cwd: Path, *args: str):
    result = run_process(cwd, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_only_the_tools_capability_is_declared(home, tmp_path):
    """Claude Code adds three resource tools to every request for a server that declares
    resources, even with none to list."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton.skills.frontends.cli", "mcp"],
                                   cwd=str(tmp_path), env=dict(os.environ))

    async def declared(era):
        with anyio.fail_after(WAIT):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                return (await (session.initialize() if era == "handshake" else session.discover())).capabilities

    for era in ("handshake", "2026-07-28"):  # Claude Code 2.1 speaks the newer one
        capabilities = anyio.run(declared, era)
        assert capabilities.tools is not None, era
        assert (capabilities.resources, capabilities.prompts, capabilities.logging, capabilities.completions) == \
            (None, None, None, None)


def test_the_server_and_the_cli_report_the_installed_distributions_version(home, tmp_path):
    from importlib.metadata import version

    installed = version("baton-sessions")
    assert installed != "0"

    async def script(session):
        return (await session.initialize()).server_info

    info = with_server(tmp_path, script)
    assert (info.name, info.version) == ("baton", installed)
    printed = run_process(tmp_path, "--version")
    assert (printed.returncode, printed.stdout) == (0, f"baton {installed}\n")


# A word an agent searches with -> the tools whose name or description must hold it.
SEARCH_WORDS = {
    "resume": {"resume_session", "recover_work"}, "ticket": {"resume_session", "bind_task", "fork_task"},
    "session": {"resume_session", "list_sessions", "end_session", "update_session"},
    "handoff": {"write_handoff", "verify_handoff", "resume_session"},
    "conflict": {"resume_session", "list_sessions", "record_touch", "check_paths"},
    "decision": {"record_decision", "recall_decisions", "resume_session"},
    "checkpoint": {"take_checkpoint", "restore_checkpoint", "fork_task"},
    "lease": {"claim_paths", "release_leases", "list_leases"},
}


def test_the_tools_are_found_by_the_words_an_agent_searches_with_and_stay_short(home, tmp_path):
    async def script(session):
        return (await session.list_tools()).tools

    tools = with_server(tmp_path, script)
    assert {t.name for t in tools} == TOOLS
    for word, expected in SEARCH_WORDS.items():
        found = {t.name for t in tools if word in f"{t.name} {t.description}".lower()}
        assert expected <= found, (word, expected - found)
    for tool in tools:
        assert 60 <= len(tool.description) <= 200, tool.name
        assert "title" not in json.dumps(tool.input_schema), "titles only repeat the names"
    # What a client sends the model per request without tool search (as Claude Code's
    # tools array): 8,551 bytes for the 21 tools when measured, after list_sessions took a
    # limit and four descriptions lost a clause (6,470 for 17 before the pre-edit check and
    # the lease tools). tests/test_real_agent.py holds Claude Code's request to the same bound.
    shown = [{"name": f"mcp__baton__{t.name}", "description": t.description, "input_schema": t.input_schema}
             for t in tools]
    assert size(shown) < MCP_TOOLS_BYTES


def test_every_tool_is_annotated_as_what_it_does(home, tmp_path):
    """Codex runs a read-only or non-destructive tool without asking and counts a tool
    without annotations as destructive and open-world."""
    async def script(session):
        return (await session.list_tools()).tools

    tools = with_server(tmp_path, script)
    assert set(ANNOTATIONS) == {t.name for t in tools}
    for tool in tools:
        hints = tool.annotations
        assert hints is not None and hints.title and tool.title == hints.title, tool.name
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == ANNOTATIONS[tool.name], \
            tool.name
        assert hints.open_world_hint is False, tool.name


def test_a_ticket_worked_through_the_tools_reads_back_as_the_cli_prints_it(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")

    async def script(session):
        answers = {}
        for name, arguments in [
            ("bind_task", {"task_id": "OMN-1", "agent": "mcp-client"}),
            ("record_touch", {"paths": ["src/db.py", "src/cart.py"]}),
            ("record_decision", {"text": "Keep carts in PostgreSQL", "context": "they must survive restarts"}),
            ("update_session", {"phase": "implementing", "next_action": "write the migration",
                                "done": ["cart schema"], "depends_on": ["OMN-3"]}),
        ]:
            result = await session.call_tool(name, arguments)
            assert not result.is_error, result.content[0].text
            answers[name] = json.loads(result.content[0].text)
        for name, arguments in [("list_sessions", {}), ("signals_since", {"task_id": "OMN-1"}),
                                ("recall_decisions", {"query": "where are carts stored", "limit": 3})]:
            answers[name] = json.loads((await session.call_tool(name, arguments)).content[0].text)
        return answers

    answers = with_server(main, script)
    assert answers["bind_task"]["task_id"] == "OMN-1" and answers["bind_task"]["worktree"] == str(main)
    touched = answers["record_touch"]
    assert touched["files"] == ["src/db.py", "src/cart.py"]
    assert [(c["other_task_id"], c["shared_files"], c["new"]) for c in touched["conflicts"]] == [("OMN-2",
                                                                                                  ["src/db.py"], True)]
    assert answers["update_session"]["recorded"] == {"phase": "implementing", "next_action": "write the migration",
                                                     "done": ["cart schema"], "depends_on": ["OMN-3"]}
    assert answers["list_sessions"] == cli_json(main, "list", "--json")
    assert answers["signals_since"] == cli_json(main, "signals", "--task", "OMN-1", "--json")
    assert answers["recall_decisions"] == cli_json(main, "recall", "where are carts stored", "--limit", "3", "--json")
    assert answers["recall_decisions"][0]["text"] == "Keep carts in PostgreSQL"

    resumed = json.loads(with_server(main, call("resume_session", task_id="OMN-1"))[1])
    from_cli = cli_json(main, "resume", "OMN-1", "--json")
    rebound = ("last_activity",)  # each resume binds again: a new activity; the agent recorded stays
    assert {k: v for k, v in resumed["session"].items() if k not in rebound} == \
        {k: v for k, v in from_cli["session"].items() if k not in rebound}
    assert resumed["conflicts"] == from_cli["conflicts"] and resumed["stores"] == from_cli["stores"]
    assert (from_cli["session"]["next_action"] == "write the migration"
            and from_cli["session"]["phase"] == "implementing")
    assert resumed["session"]["agent"] == from_cli["session"]["agent"] == "mcp-client"
    assert [c["other_task_id"] for c in from_cli["conflicts"]] == ["OMN-2"]


@pytest.mark.parametrize("tool, arguments, command", [
    ("record_touch", {"paths": ["src/db.py"], "task_id": "OMN-1"}, ["touch", "src/db.py", "--task", "OMN-1"]),
    ("record_decision", {"text": "Keep carts in PostgreSQL", "context": "restarts"},
     ["decide", "Keep carts in PostgreSQL", "--context", "restarts"]),
    ("update_session", {"phase": "reviewing", "next_action": "ask for review", "done": ["migration"]},
     ["update", "--phase", "reviewing", "--next", "ask for review", "--done", "migration"]),
    ("bind_task", {"task_id": "OMN-1"}, ["bind", "OMN-1"]),
])
def test_the_write_tools_answer_as_the_cli_json(home, worktrees, cli, tool, arguments, command):
    main = two_agents(worktrees, cli)
    is_error, text = with_server(main, call(tool, **arguments))
    assert not is_error, text
    assert json.loads(text) == cli_json(main, *command, "--json")


def big_ticket(cli, main: Path) -> None:
    """OMN-1 with 600 files and 40 decisions: a resume of about 40,000 characters."""
    cli(main, "bind", "OMN-1")
    files = [f"src/module_{n:03}/implementation_file.py" for n in range(600)]
    for start in range(0, 600, 200):
        assert cli(main, "touch", *files[start:start + 200])[0] == 0
    for n in range(40):
        cli(main, "decide", f"Decision {n}: keep the cart service stateless, carts in PostgreSQL ({n})",
            "--context", f"they must survive restarts, reason {n}")
    cli(main, "update", "--next", "write the migration", "--phase", "implementing")


def test_a_600_file_ticket_resumes_whole_within_the_budget_and_the_rest_can_be_fetched(home, worktrees, cli):
    main, _ = worktrees
    big_ticket(cli, main)
    whole = cli_json(main, "resume", "OMN-1", "--json")
    assert len(json.dumps(whole, ensure_ascii=False)) > 30_000

    async def script(session):
        first = await session.call_tool("resume_session", {"task_id": "OMN-1"})
        pages = {}
        for section in ("files", "decisions"):
            offset, items = 0, []
            while offset is not None:
                result = await session.call_tool("resume_session", {"task_id": "OMN-1", "section": section,
                                                                    "offset": offset})
                assert not result.is_error and len(result.content[0].text) <= 10_000
                got = json.loads(result.content[0].text)
                items += got["items"]
                offset = got["next_offset"]
            pages[section] = items
        return first.content[0].text, pages

    text, pages = with_server(main, script)
    assert len(text) <= 10_000
    answer = json.loads(text)
    # Priority order: status, state and next action whole; the details as far as they fit.
    assert answer["status"] == whole["status"] and answer["session"]["next_action"] == "write the migration"
    assert answer["session"]["phase"] == "implementing" and answer["conflicts"] == whole["conflicts"]
    omitted = answer["omitted"]
    assert omitted["files"]["total"] == 600 and omitted["decisions"]["total"] == 40
    for section, path in (("files", "files_touched"), ("decisions", "decisions")):
        shown = answer["session"][path]
        assert len(shown) == omitted[section]["shown"] < omitted[section]["total"]
        assert shown == whole["session"][path][omitted[section]["first_shown"]:], "the newest are shown"
        assert omitted[section]["next"] == {"section": section, "offset": 0}
    assert "section=NAME" in answer["fetch"]
    assert pages["files"] == whole["session"]["files_touched"]
    assert pages["decisions"] == whole["session"]["decisions"]
    # The CLI fits only when asked, to the same budget, and pages alike.
    fitted = run_process(main, "resume", "OMN-1", "--json", "--budget", "10000")
    assert fitted.returncode == 0 and len(fitted.stdout.rstrip("\n")) <= 10_000
    assert json.loads(fitted.stdout)["omitted"]["files"]["total"] == 600
    paged = cli_json(main, "resume", "OMN-1", "--json", "--section", "files", "--offset", "590")
    assert paged["items"] == whole["session"]["files_touched"][590:] and paged["next_offset"] is None


def test_the_answer_budget_is_a_setting(home, worktrees, cli):
    main, _ = worktrees
    big_ticket(cli, main)
    (home / "baton.toml").write_text("[mcp]\nanswer_budget = 4000\n")
    text = with_server(main, call("resume_session", task_id="OMN-1"))[1]
    assert len(text) <= 4000 and json.loads(text)["omitted"]["files"]["total"] == 600
    (home / "baton.toml").write_text("[mcp]\nanswer_budget = 100\n")
    is_error, text = with_server(main, call("list_sessions"))
    assert is_error and "answer_budget is out of range" in json.loads(text)["error"]["message"]


def test_a_handoff_written_and_verified_through_the_tools(home, worktrees, cli):
    main, _ = worktrees
    allow_commands(home, "git --version", "python3 --version")
    cli(main, "bind", "OMN-1")
    cli(main, "update", "--next", "write the migration")

    async def script(session):
        written = await session.call_tool("write_handoff", {"checks": ["git --version"],
                                                            "probes": {"Python": "python3 --version"}})
        verified = await session.call_tool("verify_handoff", {})
        return written, verified

    written, verified = with_server(main, script)
    assert not written.is_error and not verified.is_error, (written.content, verified.content)
    report = json.loads(written.content[0].text)
    assert report["task_id"] == "OMN-1" and report["latest"] == "docs/handoffs/LATEST.md"
    assert "Python" in [c["section"] for c in report["live_state"]]
    assert [c["exit_status"] for c in report["checks"]] == [0]
    assert "write the migration" in (main / "docs" / "handoffs" / "LATEST.md").read_text()
    verification = json.loads(verified.content[0].text)
    assert {c["status"] for c in verification["live_state"]} == {"verified"}
    assert verification == cli_json(main, "handoff", "verify", "--json")


@pytest.mark.parametrize("name, arguments, message", [
    ("resume_session", {"task_id": "bad id!"}, "invalid"),
    ("signals_since", {"since": "yesterday"}, "since is not an ISO 8601 time"),
    ("recall_decisions", {"query": "  "}, "search text is empty"),
    ("record_touch", {"paths": ["a.py"]}, "no task"),
    ("update_session", {"task_id": "OMN-1"}, "nothing to update"),
    ("bind_task", {"task_id": "OMN-1", "worktree": "/no/such/dir"}, "worktree is not a directory"),
    ("write_handoff", {"task_id": "OMN-1", "checks": ["make | tee log"]}, "shell"),
    ("resume_session", {"task_id": ".."}, "invalid task id '..'"),
    ("bind_task", {"task_id": "-x"}, "invalid task id '-x'"),
    ("record_decision", {"text": "use\x00 Postgres"}, "text holds a control character (NUL)"),
    ("update_session", {"next_action": "go \x1b[2J"}, "next_action holds a control character (\\x1b)"),
    ("record_touch", {"paths": ["ok.py", "a\x85.py"]}, "paths[1] holds a control character (\\x85)"),
    ("write_handoff", {"probes": {"Py\x07": "python -V"}}, "probes.Py\\x07 holds a control character (\\x07)"),
])
def test_bad_input_comes_back_as_a_tool_error(home, tmp_path, name, arguments, message):
    is_error, text = with_server(tmp_path, call(name, **arguments))
    assert is_error
    error = json.loads(text)["error"]
    assert error["type"] == "bad_input" and error["recoverable"] is False and error["store"] is None
    assert message in error["message"] and "\n" not in error["message"]


def test_the_mcp_tool_answers_bad_input_and_stores_nothing(ways_out, tmp_path):
    cases = [(spelled(raw, ways_out, tmp_path), says) for raw, says in REFUSED]

    async def script(session):
        errors = []
        for raw, _ in cases:
            result = await session.call_tool("record_touch", {"paths": ["src/ok.py", raw]})
            errors.append((result.is_error, json.loads(result.content[0].text)))
        resumed = await session.call_tool("resume_session", {"task_id": "OMN-1"})
        return errors, json.loads(resumed.content[0].text)["session"]["files_touched"]

    errors, stored = with_server(ways_out, script)
    for (raw, says), (is_error, answer) in zip(cases, errors, strict=True):
        assert is_error, raw[:80]
        error = answer["error"]
        assert error["type"] == "bad_input" and says in error["message"] and "\n" not in error["message"]
    assert stored == [], "nothing outside the repository is stored"


@pytest.mark.parametrize("name, arguments, message", [
    ("bind_task", {}, "task_id: field required"),
    ("record_touch", {"paths": "src/a.py"}, "paths: input should be a valid list"),
    ("recall_decisions", {"query": "x", "limit": "many"}, "limit: input should be a valid integer"),
    ("no_such_tool", {}, "Unknown tool: no_such_tool"),
])
def test_a_missing_or_invalid_argument_is_one_line_of_bad_input(home, tmp_path, name, arguments, message):
    async def script(session):
        result = await session.call_tool(name, arguments)
        return result.is_error, result.content[0].text, result.structured_content

    is_error, text, structured = with_server(tmp_path, script)
    assert is_error and structured == json.loads(text)
    error = structured["error"]
    assert error["type"] == "bad_input" and message in error["message"], error
    assert "\n" not in error["message"] and "pydantic" not in error["message"]


def test_a_store_that_is_down_is_a_structured_recoverable_error(home, tmp_path):
    (tmp_path / "home-file").write_text("not a directory\n")
    params = StdioServerParameters(command=sys.executable, args=["-m", "baton.skills.frontends.cli", "mcp"],
                                   cwd=str(tmp_path), env={**os.environ, "BATON_HOME": str(tmp_path / "home-file")})

    async def main():
        with anyio.fail_after(WAIT):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("list_sessions", {})
                return result.is_error, json.loads(result.content[0].text)

    is_error, answer = anyio.run(main)
    assert is_error
    assert answer["error"]["type"] == "store_unavailable" and answer["error"]["recoverable"] is True
    assert answer["error"]["store"] == "session registry" and "is not a directory" in answer["error"]["message"]


def test_the_server_exits_when_its_client_goes(home, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "mcp"], cwd=tmp_path,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdin.close()
    assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_server_at_once_while_its_input_is_open(home, tmp_path, stop):
    """Claude Code sends SIGINT at exit and escalates to SIGTERM 100 ms later; stdin stays open."""
    process = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "mcp"], cwd=tmp_path,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}
    process.stdin.write((json.dumps(initialize) + "\n").encode())
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    process.send_signal(stop)
    try:
        # stdin is closed only afterwards: an exit here is the signal's, and its status says which
        assert process.wait(timeout=5) == 128 + stop, "stopped by the signal, not when the client closed stdin"
    finally:
        process.kill()
        process.stdin.close()
