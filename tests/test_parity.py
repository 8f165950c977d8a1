"""The CLI and the MCP server are two shells over the same services: every command with
`--json` has a tool with the same options (or is excluded here, saying why), and both
answer the same JSON for the same input on a real data home."""

import argparse
import json

import pytest

pytest.importorskip("mcp")

from tests.test_mcp_server import allow_commands, call, cli_json, with_server
from tests.workspace import two_agents

# Options and commands with --json that have no tool, each with why.
EXCLUDED_OPTIONS = {
    ("resume", "list"): "resume --list is list_sessions",
    ("resume", "budget"): "a tool's answers keep the server's budget, [mcp] answer_budget",
    ("handoff", "handoff_action"): "selects `handoff verify`, which is verify_handoff",
    ("handoff verify", "strict"): "sets the exit status for a script or git hook; live_state carries the same verdict",
    ("list", "all_projects"): "the lead's view of every project; a tool serves its worktree's project only",
}
EXCLUDED_COMMANDS = {
    "doctor": "an operator's check of this machine's servers; a tool call reports a store that is down itself",
    "redact": "an operator's scan of every ticket's stored history, not one agent's",
    "gc": "retention (and, with --checkpoints, a repository's checkpoints) is the operator's to run, not one agent's",
    "checkpoints": "resume_session carries the latest checkpoint; the whole list is for a person choosing one",
    "runs": "resume_session carries the run and its parent; the tree is for a person",
    "env": "`env record` runs setup commands in the worktree: a person's or an agent's shell, not a tool call",
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    from baton.skills.frontends.cli import _parser

    def subcommands(parser):
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices

    commands = dict(subcommands(_parser()))
    commands["handoff verify"] = subcommands(commands["handoff"])["verify"]
    return commands


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions if not isinstance(a, argparse._HelpAction)
            and a.dest not in ("json", "verify_json")}


def _tool_arguments() -> dict[str, set[str]]:
    from baton.skills.frontends.cli import COMMANDS
    from baton.skills.frontends.mcp_server import catalogue

    return {tool["name"]: set(tool["inputSchema"]["properties"]) for tool in catalogue(COMMANDS)[0]}


def _parity() -> dict[str, tuple[str, dict[str, str]]]:
    from baton.skills.frontends.cli import COMMANDS

    rows = {row.name: row for row in COMMANDS}
    rows |= {f"{row.name} {row.subcommand.name}": row.subcommand for row in COMMANDS if row.subcommand}
    commands = _commands()
    parity = {}
    for name, row in rows.items():
        if row.tool is not None:
            renamed = {"task": "task_id", **dict(row.tool.renamed)}
            excluded = {option for (command, option) in EXCLUDED_OPTIONS if command == name}
            assert set(row.tool.without) <= excluded, f"{name}: options the tool lacks without a reason here"
            options = _options(commands[name]) - excluded
            parity[name] = (row.tool.name, {option: renamed.get(option, option) for option in options})
    return parity


# command -> (tool, {CLI option dest: tool argument}), from the CLI's command table: an option
# keeps its name in the tool unless the row renames it (--task is the tool's task_id).
# `worktree` is the tool's stand-in for the directory a command runs in, so it has no option.
PARITY = _parity()


def test_every_command_with_json_has_a_tool_or_says_why_not():
    commands = _commands()
    with_json = {name for name, parser in commands.items()
                 if {"json", "verify_json"} & {a.dest for a in parser._actions}}
    assert with_json - set(PARITY) - set(EXCLUDED_COMMANDS) == set(), "a --json command with no tool"
    assert set(EXCLUDED_COMMANDS) <= with_json and all(EXCLUDED_COMMANDS.values())


@pytest.mark.parametrize("command", sorted(PARITY))
def test_the_tool_takes_every_option_of_its_command(command):
    tool, mapping = PARITY[command]
    options = _options(_commands()[command]) - {option for (name, option) in EXCLUDED_OPTIONS if name == command}
    arguments = _tool_arguments()[tool]
    assert options == set(mapping), f"{command}: options without a mapping: {options ^ set(mapping)}"
    assert set(mapping.values()) | {"worktree"} >= arguments, f"{tool}: arguments the CLI lacks"
    assert set(mapping.values()) <= arguments, f"{tool}: lacks {set(mapping.values()) - arguments}"


@pytest.mark.slow  # starts `baton mcp`
def test_an_update_with_journal_and_checks_answers_as_the_cli(home, worktrees, cli):
    main = two_agents(worktrees, cli)
    allow_commands(home, "git --version")
    arguments = {"goal": "carts survive restarts", "constraints": ["no downtime"], "todo": ["migrate"],
                 "evidence": ["the load test"], "checks": ["git --version"], "next_action": "write it"}
    is_error, text = with_server(main, call("update_session", **arguments))
    assert not is_error, text
    from_cli = cli_json(main, "update", "--goal", "carts survive restarts", "--constraint", "no downtime",
                        "--todo", "migrate", "--evidence", "the load test", "--check", "git --version",
                        "--next", "write it", "--json")
    assert json.loads(text) == from_cli
    assert from_cli["recorded"]["checks"][0]["exit_status"] == 0


@pytest.mark.slow  # starts `baton mcp`
def test_check_paths_answers_as_baton_check(home, worktrees, cli):
    main = two_agents(worktrees, cli)
    is_error, text = with_server(main, call("check_paths", paths=["src/db.py", "src/free.py"]))
    assert not is_error, text
    answer = json.loads(text)
    assert answer == cli_json(main, "check", "src/db.py", "src/free.py", "--json")
    assert [(h["task_id"], h["path"]) for h in answer["holdings"]] == [("OMN-2", "src/db.py")]


@pytest.mark.slow  # starts `baton mcp`
def test_a_checkpoint_and_a_fork_through_the_tools_answer_as_the_cli(home, worktrees, cli, tmp_path):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / "carts.py").write_text("carts = []\n")
    is_error, text = with_server(main, call("take_checkpoint", label="carts"))
    assert not is_error, text
    taken = json.loads(text)
    assert taken["status"] == "taken" and taken["checkpoint"]["label"] == "carts"
    assert json.loads(with_server(main, call("take_checkpoint"))[1]) == {
        **cli_json(main, "checkpoint", "--json"), "status": "unchanged"}
    is_error, text = with_server(main, call("fork_task", task_id="OMN-1", new_task_id="OMN-3",
                                            into=str(tmp_path / "fork")))
    assert not is_error, text
    forked = json.loads(text)
    assert forked["run"]["diverged_at"] == taken["checkpoint"]["id"] and (tmp_path / "fork" / "carts.py").exists()
    is_error, text = with_server(main, call("restore_checkpoint", target="OMN-404"))
    assert is_error and json.loads(text)["error"]["type"] == "bad_input"


@pytest.mark.slow  # starts `baton mcp`
def test_end_through_the_tool_ends_the_session(home, worktrees, cli):
    main = two_agents(worktrees, cli)
    is_error, text = with_server(main, call("end_session", status="stalled"))
    assert not is_error, text
    assert json.loads(text) == {"task_id": "OMN-1", "status": "stalled", "warnings": []}
    assert cli_json(main, "resume", "OMN-1", "--json")["session"]["status"] == "stalled"


@pytest.mark.slow  # starts `baton mcp`
def test_unsigned_probes_run_only_for_the_servers_own_worktree(home, worktrees, cli):
    """Even on a server whose user allowed unsigned probes."""
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    for name, arguments in [("verify_handoff", {"allow_unsigned_probes": True, "worktree": str(second)}),
                            ("verify_handoff", {"allow_unsigned_probes": True, "path": "docs/handoffs/LATEST.md"}),
                            ("resume_session", {"task_id": "OMN-1", "allow_unsigned_probes": True,
                                                "worktree": str(second)})]:
        is_error, text = with_server(main, call(name, **arguments), "--allow-unsigned-probes")
        assert is_error, (name, arguments)
        error = json.loads(text)["error"]
        assert error["type"] == "bad_input" and ("allow_unsigned_probes" in text or "not this server's" in text)
    is_error, text = with_server(main, call("verify_handoff", allow_unsigned_probes=True), "--allow-unsigned-probes")
    assert not is_error, text
