"""The check before an edit: its verdicts (a pure function of the holds found), the files
resolved against the worktree that holds them, the PreToolUse hook's answer as Claude Code
and Codex read it, `baton check`, and the edit let through when Baton cannot answer."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from baton.registry.base import HolderNote
from baton.skills.services.leases import Lease
from baton.skills.services.pre_edit import verdict
from tests.test_claude_hooks import hook, payload, runtime_dir  # noqa: F401 -- its marks of what was told

T0 = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
UNTIL = T0 + timedelta(hours=2)


def held(task_id: str, pattern: str, exclusive: bool, agent: str | None, reason: str) -> Lease:
    return Lease("0", task_id, "repo", pattern, exclusive, agent, reason, T0, UNTIL, "active")

NOTES = {"OMN-2": HolderNote("codex", "feat/carts", "migrate the cart table"),
         "OMN-3": HolderNote(None, "fix/tax", None)}


def test_nothing_held_allows_silently():
    found = verdict({}, {}, {}, on_exclusive="ask")
    assert (found.decision, found.reason, found.context, found.holdings) == ("allow", None, None, [])


def test_another_tickets_touch_allows_with_who_which_files_since_when_and_their_next_action():
    found = verdict({"src/cart.py": [("OMN-2", T0)]}, {}, NOTES, on_exclusive="deny")
    assert found.decision == "allow" and found.reason is None
    assert "src/cart.py" in found.context and "ticket OMN-2 (agent codex, branch feat/carts)" in found.context
    assert "last at 2026-12-01 09:30 UTC" in found.context
    assert "their next action: migrate the cart table" in found.context


def test_a_shared_lease_allows_with_its_holder_in_the_context():
    shared = held("OMN-3", "src/tax/**", False, "claude", "rates change")
    found = verdict({}, {"src/tax/vat.py": [shared]}, NOTES, on_exclusive="deny")
    assert found.decision == "allow"
    assert "shared lease on it (src/tax/**) until 2026-12-01 11:30 UTC" in found.context
    assert "ticket OMN-3 (agent claude, branch fix/tax)" in found.context and "rates change" in found.context


@pytest.mark.parametrize("on_exclusive", ["ask", "deny"])
def test_an_exclusive_lease_asks_or_denies_naming_the_holder(on_exclusive):
    exclusive = held("OMN-2", "src/cart.py", True, None, "schema migration")
    found = verdict({"src/cart.py": [("OMN-3", T0)]}, {"src/cart.py": [exclusive]}, NOTES, on_exclusive=on_exclusive)
    assert found.decision == on_exclusive
    assert "src/cart.py is held exclusively by ticket OMN-2 (agent codex, branch feat/carts)" in found.reason
    assert "until 2026-12-01 11:30 UTC (schema migration)" in found.reason
    assert ("release the lease" in found.reason) == (on_exclusive == "deny"), "a denial says how to get it released"
    assert "OMN-3" in found.context and "OMN-2" not in found.context, "the other holds stay context"


def test_an_unknown_on_exclusive_is_refused():
    with pytest.raises(ValueError, match="on_exclusive"):
        verdict({}, {}, {}, on_exclusive="warn")


def pre_tool_use(cwd, file, *, tool="Edit"):
    event = payload("post_tool_use_edit", cwd, file=file)
    event["hook_event_name"], event["tool_name"] = "PreToolUse", tool
    del event["tool_response"], event["duration_ms"]
    return event


def test_an_edit_in_another_worktree_is_checked_against_the_file_there(home, worktrees, cli, capsys):
    """The agent works in main; the file it edits lies in second, where OMN-2 touched it:
    the path is that worktree's, not one relative to the agent's directory."""
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    cli(second, "update", "--next", "split the cart service")
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/other.py")
    code, out, err = hook("pre-tool-use", pre_tool_use(main, second / "src" / "cart.py"), capsys)
    assert code == 0 and "baton:" not in err, err
    answer = out["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse" and "permissionDecision" not in answer, \
        "an overlap decides nothing: the user's own permission rules still apply"
    assert "src/cart.py: ticket OMN-2" in answer["additionalContext"]
    assert "their next action: split the cart service" in answer["additionalContext"]
    # The same file in the agent's own worktree is the same file of the repository.
    _, out, _ = hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)
    assert "OMN-2" in out["hookSpecificOutput"]["additionalContext"]


def test_a_file_no_other_ticket_holds_is_silent(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/mine.py")  # its own touch is no overlap
    for file in (main / "src" / "mine.py", main / "src" / "new.py"):
        code, out, err = hook("pre-tool-use", pre_tool_use(main, file), capsys)
        assert (code, out) == (0, None) and "baton:" not in err, err


def test_an_unbound_worktree_is_not_checked(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    assert hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)[:2] == (0, None)


def test_an_unavailable_graph_lets_the_edit_through_with_one_line(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    cli(main, "bind", "OMN-1")
    for suffix in ("-wal", "-shm", ""):
        (home / f"graph.db{suffix}").unlink(missing_ok=True)
    (home / "graph.db").mkdir()  # no database can open there
    code, out, err = hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)
    assert code == 0 and set(out) == {"systemMessage"}, out
    assert out["systemMessage"].startswith("Baton could not check this edit against other tickets")
    assert out["systemMessage"].endswith("it goes ahead.") and "\n" not in out["systemMessage"]
    assert len([line for line in err.splitlines() if line.startswith("baton:")]) == 1, err
    # The user is told once per agent session; stderr (the debug log) has each edit's line.
    code, out, err = hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)
    assert (code, out) == (0, None) and "could not check this edit" in err


def test_a_bad_payload_lets_the_edit_through(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    event = pre_tool_use(main, main / "a.py")
    event["tool_input"]["file_path"] = "bad\x00path"
    assert hook("pre-tool-use", event, capsys)[:2] == (0, None)


@pytest.mark.parametrize("decision,patch,expected", [
    ("deny", False, {"permissionDecision": "deny", "permissionDecisionReason": "held", "additionalContext": "also"}),
    ("ask", False, {"permissionDecision": "ask", "permissionDecisionReason": "held", "additionalContext": "also"}),
    ("deny", True, {"permissionDecision": "deny", "permissionDecisionReason": "held", "additionalContext": "also"}),
    ("ask", True, {"additionalContext": "held\n\nalso"}),  # Codex takes no `ask` from a hook
])
def test_the_hook_answers_in_the_agents_decision_fields(decision, patch, expected):
    from baton.skills.frontends.hooks import pre_tool_use_output

    answer = pre_tool_use_output(decision, "held", "also", patch=patch)
    assert answer == {"hookSpecificOutput": {"hookEventName": "PreToolUse", **expected}}
    assert pre_tool_use_output("allow", None, None, patch=patch) == {}


def test_codex_patch_files_are_checked(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    cli(main, "bind", "OMN-1")
    event = {"session_id": "s", "cwd": str(main), "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
             "tool_input": {"command": "*** Begin Patch\n*** Update File: src/cart.py\n@@\n-a\n+b\n*** End Patch\n"}}
    _, out, _ = hook("pre-tool-use", event, capsys)
    assert "src/cart.py: ticket OMN-2" in out["hookSpecificOutput"]["additionalContext"]


def test_baton_check_answers_as_the_hook_decides(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/cart.py")
    code, out, _ = cli(main, "check", "src/cart.py", "src/free.py")  # unbound: every ticket is another's
    assert code == 0 and "src/cart.py: ticket OMN-2" in out and "Decision: allow" in out
    cli(main, "bind", "OMN-1")
    code, out, _ = cli(main, "check", "--json", "src/cart.py")
    answer = json.loads(out)
    assert (answer["task_id"], answer["decision"], answer["files"]) == ("OMN-1", "allow", ["src/cart.py"])
    assert [(h["task_id"], h["kind"], h["path"]) for h in answer["holdings"]] == [("OMN-2", "touch", "src/cart.py")]
    code, out, _ = cli(second, "check", "src/cart.py")
    assert code == 0 and out.strip() == "No other active ticket holds these files."


@pytest.mark.parametrize("on_exclusive", ["ask", "deny"])
def test_another_tickets_exclusive_lease_asks_or_denies_through_the_hook(home, worktrees, cli, capsys,
                                                                       monkeypatch, on_exclusive):
    """A lease claimed with `baton claim` reaches the check: the edit of a file under another
    ticket's exclusive glob is asked about or denied, the holder and its reason named."""
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "--exclusive", "--reason", "schema migration", "src/db/**")[0] == 0
    cli(main, "bind", "OMN-1")
    monkeypatch.setenv("BATON_ON_EXCLUSIVE", on_exclusive)
    code, out, err = hook("pre-tool-use", pre_tool_use(main, main / "src" / "db" / "carts.sql"), capsys)
    assert code == 0 and "baton:" not in err, err
    answer = out["hookSpecificOutput"]
    assert answer["permissionDecision"] == on_exclusive
    assert "OMN-2" in answer["permissionDecisionReason"] and "schema migration" in answer["permissionDecisionReason"]
    # Outside the glob, and for the holder itself, nothing is held.
    assert hook("pre-tool-use", pre_tool_use(main, main / "src" / "api.py"), capsys)[:2] == (0, None)
    assert hook("pre-tool-use", pre_tool_use(second, second / "src" / "db" / "carts.sql"), capsys)[:2] == (0, None)


def test_a_shared_lease_is_context_and_a_released_one_is_nothing(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "src/cart.py")[0] == 0
    cli(main, "bind", "OMN-1")
    code, out, _ = hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)
    answer = out["hookSpecificOutput"]
    assert "permissionDecision" not in answer and "OMN-2" in answer["additionalContext"]
    assert cli(second, "release", "src/cart.py")[0] == 0
    assert hook("pre-tool-use", pre_tool_use(main, main / "src" / "cart.py"), capsys)[:2] == (0, None)


def test_install_claude_adds_the_pre_tool_use_hook(home, worktrees, cli):
    main, _ = worktrees
    code, _, err = cli(main, "install", "claude")
    assert code == 0, err
    settings = json.loads((main / ".claude" / "settings.json").read_text())
    groups = settings["hooks"]["PreToolUse"]
    assert [g["matcher"] for g in groups] == ["Edit|MultiEdit|Write|NotebookEdit"]
    assert " hook pre-tool-use" in groups[0]["hooks"][0]["command"]
