"""Two agents in two worktrees of one repo, end to end through the CLI."""

import json
import os

from tests.workspace import git


def test_two_agents_two_worktrees(any_home, worktrees, cli):
    main, second = worktrees
    assert cli(main, "bind", "OMN-1", "--agent", "claude")[0] == 0
    assert cli(main, "touch", "src/db.py", "src/cart.py")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL", "--context", "must survive restarts")[0] == 0
    assert cli(main, "update", "--phase", "implementing", "--next", "write migration", "--done", "schema")[0] == 0

    assert cli(second, "bind", "OMN-2")[0] == 0
    cli(second, "decide", "Persist payment intents in PostgreSQL so they survive restarts")
    code, out, _ = cli(second, "touch", "./src//db.py", "src/pay.py")
    # On servers the hook only keeps the touch; the overlap is found where it is projected
    # and reaches the agent as a signal (checked in the resume below).
    embedded = not os.environ.get("BATON_DATABASE_URL")
    assert code == 0 and ("Warning: OMN-1 also touching src/db.py" in out) == embedded
    code, out, _ = cli(second, "touch", "src/db.py")
    assert out == "", "an overlap already signalled is not warned again"
    assert cli(main, "index")[0] == 0  # what the background indexer does after each decision

    code, out, _ = cli(main, "resume", "OMN-1")
    for heading in ("## Resuming OMN-1", "### Files touched", "### Decisions made",
                    "### Related decisions from other tasks", "### Conflicts", "### While you were gone"):
        assert heading in out
    assert "**Phase:** implementing" in out


    # A new overlap after that resume is news for the next one.
    out = cli(second, "touch", "src/cart.py")[1]
    assert ("Warning: OMN-1 also touching src/cart.py, src/db.py" in out) == embedded

    code, out, _ = cli(main, "resume", "OMN-1", "--json")
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"status", "task_id", "reason", "session", "conflicts", "related_decisions", "signals",
                           "stores", "bound", "run", "checkpoint", "compatibility", "fork_of",
                           "forks_overlapping", "continuation", "handoff", "live_state", "workflow", "prizmkit",
                           "conflicts_more", "warnings", "leases", "lease_notices", "superseded"}
    assert result["handoff"] is None and result["live_state"] == [], "no handoff in this worktree"
    assert result["status"] == "found" and result["bound"] is True
    assert result["stores"] == {"registry": "ok", "graph": "ok", "recall": "ok", "signals": "ok"}
    session = result["session"]
    assert session["phase"] == "implementing" and session["next_action"] == "write migration"
    assert sorted(session["files_touched"]) == ["src/cart.py", "src/db.py"]
    assert session["repo"] == "github.com/acme/shop"
    assert result["conflicts"] == [{"other_task_id": "OMN-2", "shared_files": ["src/cart.py", "src/db.py"],
                                    "signal_id": result["conflicts"][0]["signal_id"]}]
    assert [r["task_id"] for r in result["related_decisions"]] == ["OMN-2"]
    assert 0.4 <= result["related_decisions"][0]["score"] <= 1
    kinds = [(s["signal_type"], s["task_id"]) for s in result["signals"]]
    assert ("conflict_detected", "OMN-2") in kinds

    code, out, _ = cli(main, "list", "--json")
    rows = {row["task_id"]: row for row in json.loads(out)}
    assert rows["OMN-1"]["conflicts_with"] == ["OMN-2"] and rows["OMN-2"]["conflicts_with"] == ["OMN-1"]
    assert (rows["OMN-1"]["conflicting_tickets"], rows["OMN-1"]["conflicting_files"]) == (1, 2)
    assert result["conflicts_more"] == 0
    assert set(rows["OMN-1"]) == {"task_id", "status", "phase", "last_activity", "stale", "files_touched",
                                  "conflicts_with", "handoff", "agent", "repo", "runs", "stage", "interrupted",
                                  "fork_of", "checkpoint", "conflicting_tickets", "conflicting_files", "leases"}
    code, out, _ = cli(main, "resume", "--list")
    assert "CONFLICTS with OMN-2 over 2 files" in out

    # Completing one ticket ends the conflict.
    assert cli(second, "end")[0] == 0
    rows = {row["task_id"]: row for row in json.loads(cli(main, "list", "--json")[1])}
    assert "OMN-2" not in rows and rows["OMN-1"]["conflicts_with"] == []
    assert "OMN-2" in {row["task_id"] for row in json.loads(cli(main, "list", "--json", "--all")[1])}


def test_binding_file_is_the_authority_and_stays_out_of_git(any_home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OMN-7")
    text = (main / ".baton" / "active_session.yaml").read_text()
    assert 'task_id: "OMN-7"' in text and "session_id:" in text and "bound_at:" in text
    assert "/.baton/" in (main / ".git" / "info" / "exclude").read_text().splitlines()
    assert git(main, "status", "--porcelain") == ""
    monkeypatch.setenv("BATON_TASK_ID", "OMN-ENV")
    cli(main / ".", "touch", "a.py")
    assert json.loads(cli(main, "resume", "OMN-7", "--json")[1])["session"]["files_touched"] == ["a.py"]
    cli(main, "touch", "--task", "OMN-8", "b.py")
    assert json.loads(cli(main, "resume", "OMN-8", "--json")[1])["session"]["files_touched"] == ["b.py"]
    code, out, _ = cli(main, "env")
    assert "export BATON_TASK_ID=OMN-8" in out, "resume rebinds the worktree"


def test_not_found_binds_and_starts_fresh(any_home, worktrees, cli):
    main, _ = worktrees
    code, out, _ = cli(main, "resume", "NEW-1")
    assert (code, out.strip()) == (0, "No session history for NEW-1. Starting fresh.")
    assert json.loads(cli(main, "resume", "NEW-1", "--json")[1])["status"] == "found"


def test_end_and_reopen_is_a_new_run(any_home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-3")
    cli(main, "end", "OMN-3")
    session = json.loads(cli(main, "list", "--all", "--json")[1])[0]
    assert (session["status"], session["phase"]) == ("completed", "completed")
    assert cli(main, "update", "--phase", "reviewing")[0] == 2
    cli(main, "bind", "OMN-3")
    result = json.loads(cli(main, "resume", "OMN-3", "--json")[1])
    assert result["session"]["status"] == "active" and result["session"]["runs"] == 2


def test_signals_and_recall_commands(any_home, worktrees, cli):
    main, second = worktrees
    cli(main, "bind", "A-1")
    cli(main, "decide", "Cache tokens in Redis with a short TTL")
    cli(second, "bind", "B-1")
    cli(second, "update", "--phase", "reviewing")
    signals = json.loads(cli(main, "signals", "--json")[1])
    assert {"ticket_claimed", "decision_recorded", "phase_changed"} <= {s["signal_type"] for s in signals}
    assert all(s["task_id"] == "B-1" for s in json.loads(cli(main, "signals", "--task", "B-1", "--json")[1]))
    cli(main, "index")
    hits = json.loads(cli(main, "recall", "where do we cache auth tokens", "--json")[1])
    assert hits[0]["task_id"] == "A-1" and hits[0]["score"] > 0.4
