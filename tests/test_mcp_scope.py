"""`baton mcp` serves one worktree: through the real server, every tool argument naming
another worktree, a handoff path outside it, a command the allowlist does not admit and
`allow_unsigned_probes` (without the server's flag) are refused, and nothing happens."""

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from tests.test_mcp_server import allow_commands, with_server

pytestmark = pytest.mark.slow  # starts `baton mcp`


def calls(*requests: tuple[str, dict]):
    """A script making each (tool, arguments) call in turn: [(is_error, answer)]."""
    async def script(session):
        answers = []
        for name, arguments in requests:
            result = await session.call_tool(name, arguments)
            answers.append((result.is_error, json.loads(result.content[0].text)))
        return answers

    return script


def refused(answer: tuple[bool, dict], message: str) -> bool:
    is_error, body = answer
    return is_error and body["error"]["type"] == "bad_input" and message in body["error"]["message"]


def test_a_tool_naming_another_worktree_is_refused_and_changes_nothing(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(main, "bind", "OMN-1")
    binding = (second / ".baton" / "active_session.yaml").read_text()
    elsewhere = str(second)
    answers = with_server(main, calls(
        ("bind_task", {"task_id": "OMN-9", "worktree": elsewhere}),
        ("write_handoff", {"worktree": elsewhere}),
        ("record_touch", {"paths": ["src/db.py"], "worktree": elsewhere}),
        ("record_decision", {"text": "Use Redis", "worktree": elsewhere}),
        ("update_session", {"next_action": "x", "worktree": elsewhere}),
        ("end_session", {"worktree": elsewhere}),
        ("take_checkpoint", {"worktree": elsewhere}),
        ("verify_handoff", {"worktree": elsewhere}),
        ("resume_session", {"task_id": "OMN-2", "worktree": elsewhere}),
        ("recover_work", {"worktree": elsewhere}),
        ("record_stage", {"status": "PLAN", "worktree": elsewhere}),
    ), "--allow-unsigned-probes")
    for answer in answers:
        assert refused(answer, "is not this server's worktree"), answer
    assert (second / ".baton" / "active_session.yaml").read_text() == binding
    assert not (second / "docs").exists()
    code, out, _ = cli(second, "resume", "OMN-2", "--json")
    session = json.loads(out)["session"]
    assert session["status"] == "active" and session["files_touched"] == [] and session["decisions"] == []


def test_a_directory_inside_the_served_worktree_is_served(home, worktrees, cli):
    main, _ = worktrees
    (main / "src").mkdir()
    [(is_error, answer)] = with_server(main, calls(("bind_task", {"task_id": "OMN-1", "worktree": "src"})))
    assert not is_error, answer
    assert answer["worktree"] == str(main)


def test_a_handoff_path_outside_the_worktree_is_refused(home, worktrees, cli, tmp_path):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "handoff")
    outside = tmp_path / "elsewhere.md"
    outside.write_text((second / "docs" / "handoffs" / "LATEST.md").read_text())
    (main / "link.md").symlink_to(outside)
    answers = with_server(main, calls(
        ("verify_handoff", {"path": str(outside)}),
        ("verify_handoff", {"path": str(second / "docs" / "handoffs" / "LATEST.md")}),
        ("verify_handoff", {"path": "../shop-second"}),
        ("verify_handoff", {"path": "link.md"}),
    ))
    for answer in answers:
        assert refused(answer, "is not in this server's worktree"), answer


def test_unsigned_probes_need_the_servers_flag(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "handoff")
    asked = (("verify_handoff", {"allow_unsigned_probes": True}),
             ("resume_session", {"task_id": "OMN-1", "allow_unsigned_probes": True}))
    for answer in with_server(main, calls(*asked)):
        assert refused(answer, "baton mcp --allow-unsigned-probes"), answer
    for is_error, answer in with_server(main, calls(*asked), "--allow-unsigned-probes"):
        assert not is_error, answer


def test_a_command_outside_the_allowlist_never_runs(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    allow_commands(home, "git --version")
    pwned = main / "pwned"
    shell = f"sh -c 'touch {pwned}'"
    answers = with_server(main, calls(
        ("write_handoff", {"checks": [shell]}),
        ("write_handoff", {"probes": {"Owned": shell}}),
        ("write_handoff", {"checks": ["git --version"], "probes": {"Python": "python3 -c 'import os'"}}),
        ("update_session", {"checks": [shell]}),
        ("record_stage", {"status": "PLAN", "check": shell}),
    ))
    for answer in answers:
        assert refused(answer, "is not allowlisted for MCP clients"), answer
    assert not pwned.exists() and not (main / "docs").exists()
    [(is_error, answer)] = with_server(main, calls(("update_session", {"checks": ["git --version"]})))
    assert not is_error and answer["recorded"]["checks"][0]["exit_status"] == 0, answer
    [(is_error, answer)] = with_server(main, calls(("update_session", {"checks": [shell]})),
                                       "--allow-unsigned-probes")
    assert not is_error and pwned.exists(), answer


def test_the_served_worktree_is_claude_project_dir(home, worktrees, cli, monkeypatch):
    main, second = worktrees
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(second))
    answers = with_server(main, calls(("bind_task", {"task_id": "OMN-2"}),
                                      ("bind_task", {"task_id": "OMN-1", "worktree": str(main)})))
    assert not answers[0][0] and answers[0][1]["worktree"] == str(second)
    assert refused(answers[1], "is not this server's worktree")
    assert not (Path(main) / ".baton").exists() and os.environ["CLAUDE_PROJECT_DIR"] == str(second)
