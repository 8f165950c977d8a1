"""Workflow stages and interrupted work, end to end through the command line: a lifecycle
with a repair walked on the embedded stores and on the servers, claims re-checked by
resume (a stale TEST_PASS, a COMMITTED whose commit is gone), and `baton recover` finding
an agent killed mid-session and nothing while the agent lives."""

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from tests.workspace import git


def stage(cli, cwd: Path, *args: str) -> dict:
    code, out, err = cli(cwd, "stage", *args, "--json")
    assert code == 0, err
    return json.loads(out)["state"]


def workflow(cli, cwd: Path, task: str = "OMN-1") -> dict:
    code, out, err = cli(cwd, "resume", task, "--json")
    assert code == 0, err
    return json.loads(out)["workflow"]


def test_the_lifecycle_and_a_repair_walked_through_the_cli(any_home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    assert workflow(cli, main) is None  # a ticket without stages: its phase is all there is
    code, _, err = cli(main, "stage", "IMPLEMENTED")
    assert code == 2 and err.count("\n") == 1 and "allowed next: PLAN_READY, WORKFLOW_BLOCKED" in err
    stage(cli, main, "PLAN_READY")
    stage(cli, main, "IMPLEMENTED")
    code, _, err = cli(main, "stage", "REVIEW_PASS")
    assert code == 2 and "--evidence PATH" in err
    (main / "review.md").write_text("approved\n")
    (main / "retro.md").write_text("nothing to document\n")
    assert stage(cli, main, "REVIEW_PASS", "--evidence", "review.md")["next_stage"] == "test"
    code, _, err = cli(main, "stage", "TEST_PASS", "--check", "git no-such-command")
    assert code == 2 and "the check exited 1" in err
    failed = stage(cli, main, "TEST_FAIL", "--repair-scope", "test-infrastructure")
    assert (failed["next_stage"], failed["repair_round"]) == ("implement", 1)
    # A test-infrastructure repair goes implement -> test, past the review.
    assert stage(cli, main, "IMPLEMENTED")["next_stage"] == "test"
    stage(cli, main, "TEST_PASS", "--check", "git --version")
    stage(cli, main, "RETRO_COMPLETE", "--evidence", "retro.md", "--result", "NO_DOC_CHANGE")
    stage(cli, main, "COMMIT_PENDING")
    git(main, "add", "review.md", "retro.md")
    git(main, "commit", "-q", "-m", "OMN-1")
    done = stage(cli, main, "COMMITTED")
    assert done["status"] == "COMMITTED" and done["next_stage"] is None
    shown = workflow(cli, main)
    assert [(p["stage"], p["held"]) for p in shown["completed"]] == [
        ("plan", True), ("implement", True), ("code-review", True), ("test", True), ("retrospective", True),
        ("commit", True)]
    assert shown["next_stage"] is None and not shown["fell_back"]
    code, out, _ = cli(main, "resume", "OMN-1")
    assert "### Workflow" in out and "**Next stage:** none: the workflow is complete" in out
    listed = json.loads(cli(main, "list", "--json")[1])
    assert [(line["task_id"], line["stage"]) for line in listed] == [("OMN-1", "COMMITTED")]


def test_a_stale_test_pass_is_shown_and_the_next_stage_falls_back(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / "src").mkdir()
    (main / "src" / "db.py").write_text("connect()\n")
    (main / "review.md").write_text("approved\n")
    for args in (["PLAN_READY"], ["IMPLEMENTED"], ["REVIEW_PASS", "--evidence", "review.md"],
                 ["TEST_PASS", "--check", "git --version"]):
        stage(cli, main, *args)
    assert workflow(cli, main)["next_stage"] == "retrospective"
    (main / "src" / "db.py").write_text("connect(retries=3)\n")
    shown = workflow(cli, main)
    test = next(p for p in shown["completed"] if p["stage"] == "test")
    assert not test["held"] and test["reason"].startswith("TEST_PASS claimed, but src/db.py changed after the check")
    assert (shown["next_stage"], shown["fell_back"], shown["state"]["next_stage"]) == ("test", True, "retrospective")
    _, out, _ = cli(main, "resume", "OMN-1")
    assert "- test: STALE: TEST_PASS claimed, but src/db.py changed after the check `git --version`" in out
    assert "**Next stage:** test (fell back" in out


def test_a_committed_whose_commit_is_gone_is_stale(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / "review.md").write_text("approved\n")
    for args in (["PLAN_READY"], ["IMPLEMENTED"], ["REVIEW_PASS", "--evidence", "review.md"],
                 ["TEST_PASS", "--check", "git --version"], ["RETRO_COMPLETE", "--evidence", "review.md"],
                 ["COMMIT_PENDING"]):
        stage(cli, main, *args)
    git(main, "commit", "-q", "--allow-empty", "-m", "OMN-1 done")
    commit = git(main, "rev-parse", "HEAD").strip()
    stage(cli, main, "COMMITTED")
    git(main, "reset", "-q", "--hard", "HEAD~1")
    git(main, "reflog", "expire", "--expire=now", "--all")
    git(main, "gc", "-q", "--prune=now")
    shown = workflow(cli, main)
    committed = next(p for p in shown["completed"] if p["stage"] == "commit")
    assert committed == {"stage": "commit", "status": "COMMITTED", "authority": "commit", "held": False,
                         "reason": f"COMMITTED claimed, but commit {commit[:12]} does not exist in this repository"}
    assert all(p["held"] for p in shown["completed"] if p["stage"] != "commit")
    assert (shown["next_stage"], shown["resume_from"]) == ("commit", "commit")


AGENT = """
import subprocess, sys, time
subprocess.run([sys.executable, "-c", "from baton.skills.frontends.cli import run; run()",
                "hook", "user-prompt-submit"], input=sys.argv[1], text=True, check=True)
print("beat", flush=True)
time.sleep(600)
"""


def session_start(cwd: Path) -> str:
    """The context Claude Code's session-start hook gives an agent starting in cwd."""
    import io

    from baton.skills.frontends.hooks import run_hook

    out = io.StringIO()
    event = {"session_id": str(uuid.uuid4()), "transcript_path": "/dev/null", "cwd": str(cwd),
             "hook_event_name": "SessionStart", "source": "startup"}
    assert run_hook("session-start", io.StringIO(json.dumps(event)), out) == 0
    return json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]


def test_recover_finds_a_killed_agents_session_and_nothing_while_it_lives(registry_home, worktrees, cli,
                                                                           monkeypatch, tmp_path):
    main, second = worktrees
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # where the hooks mark what they told
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")
    stage(cli, second, "PLAN_READY")
    agent_session = str(uuid.uuid4())
    payload = json.dumps({"session_id": agent_session, "cwd": str(second), "hook_event_name": "UserPromptSubmit",
                          "prompt": "go on"})
    agent = subprocess.Popen([sys.executable, "-c", AGENT, payload], cwd=second, stdout=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    try:
        assert agent.stdout.readline() == "beat\n"  # the hook ran as the agent's child and recorded it
        code, out, _ = cli(main, "recover", "--verbose")
        assert code == 0 and out.startswith("NO_INTERRUPTED_TASK_FOUND\nreason: all agents alive (2 active)\n"), out
        assert f"excluded OMN-2 ({second}): agent alive" in out
        assert "Interrupted work" not in session_start(main)
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=10)
    code, out, _ = cli(main, "recover")
    assert code == 0 and out.startswith("INTERRUPTED_TASK_FOUND\n"), out
    assert "ticket: OMN-2\nbranch: second\n" in out and f"worktree: {second}\n" in out
    assert "stage: PLAN_READY (next: implement)\n" in out
    assert f"agent: agent process {agent.pid} is gone" in out
    assert f"continue: cd {second} && claude --resume {agent_session}\n" in out
    code, out, _ = cli(main, "recover", "--json")
    found = json.loads(out)
    assert found["status"] == "interrupted_task_found" and [c["task_id"] for c in found["candidates"]] == ["OMN-2"]
    listed = {line["task_id"]: line["interrupted"] for line in json.loads(cli(main, "list", "--json")[1])}
    assert listed == {"OMN-1": False, "OMN-2": True}, "the lead's list (and the dashboard) marks it too"
    assert ("Interrupted work in this repository: OMN-2 (second); `baton recover` shows how to continue each."
            in session_start(main)), "an agent starting in another worktree of the repository is told"
    # An ended session is not interrupted work.
    cli(second, "end", "OMN-2")
    cli(main, "end", "OMN-1")
    code, out, _ = cli(main, "recover", "--verbose")
    assert out.startswith("NO_INTERRUPTED_TASK_FOUND\nreason: nothing active (2 ended)\n"), out
    assert f"excluded OMN-2 ({second}): the session was ended" in out


def test_recover_and_resume_read_a_repositorys_prizmkit_records(home, worktrees, cli):
    """PrizmKit's own records, read only through `baton recover` and `baton resume`: the active
    one found with its own command, the others excluded with the reason, a malformed one
    reported, never fatal."""
    main, _ = worktrees
    git(main, "branch", "-q", "feat/F-001-carts")
    state = main / ".prizmkit" / "state"
    records = {"features/F-001": {"state": "active", "task_id": "F-001", "active_dev_branch": "feat/F-001-carts",
                                  "resume_command": "/prizmkit-implement F-001"},
               "features/F-002": {"state": "completed", "task_id": "F-002", "active_dev_branch": "feat/F-001-carts"},
               "bugfix/B-003": {"state": "active", "task_id": "B-003", "active_dev_branch": "fix/B-003-gone"},
               "refactor/F-004": {"state": "active", "task_id": "F-004", "active_dev_branch": "feat/F-001-carts"}}
    for directory, record in records.items():
        (state / directory).mkdir(parents=True)
        (state / directory / "checkout.json").write_text(json.dumps(record))
    (state / "bugfix" / "B-005").mkdir()
    (state / "bugfix" / "B-005" / "checkout.json").write_text('{"state": "active",')
    before = {path: path.read_bytes() for path in state.rglob("*.json")}
    code, out, err = cli(main, "recover", "--verbose")
    assert code == 0 and err == "", err
    assert out.startswith("INTERRUPTED_TASK_FOUND\n\nticket: F-001\nbranch: feat/F-001-carts\n"), out
    assert "record: .prizmkit/state/features/F-001/checkout.json\ncontinue: /prizmkit-implement F-001\n" in out
    assert "skipped malformed record .prizmkit/state/bugfix/B-005/checkout.json: not readable JSON" in out
    found = json.loads(cli(main, "recover", "--json")[1])
    reasons = {e["task_id"]: e["reason"] for e in found["excluded"]}
    assert reasons["F-002"].endswith("state is completed, not active")
    assert reasons["B-003"].endswith("branch fix/B-003-gone no longer exists")
    assert "task id F-004 is not of the refactor family" in reasons["F-004"]

    def resumed(task_id: str) -> tuple[dict, str]:
        code, out, err = cli(main, "resume", task_id)  # the first resume of a ticket Baton never saw
        assert code == 0, err
        code, shown, err = cli(main, "resume", task_id, "--json")
        assert code == 0, err
        return json.loads(shown)["prizmkit"], out

    records, text = resumed("F-001")
    assert [(r["task_id"], r["command"]) for r in records["resumable"]] == [("F-001", "/prizmkit-implement F-001")]
    assert text.startswith("No session history for F-001. Starting fresh.\n\n### PrizmKit records (read only)\n")
    assert ("- .prizmkit/state/features/F-001/checkout.json: resumable on branch feat/F-001-carts; "
            "continue: `/prizmkit-implement F-001`") in text
    records, text = resumed("F-002")
    assert records["resumable"] == []
    assert "- not resumable: .prizmkit/state/features/F-002/checkout.json: state is completed, not active" in text
    records, text = resumed("B-005")
    assert [m["path"] for m in records["malformed"]] == [".prizmkit/state/bugfix/B-005/checkout.json"]
    assert "- skipped, malformed: .prizmkit/state/bugfix/B-005/checkout.json: not readable JSON" in text
    records, text = resumed("OMN-1")
    assert records is None and "PrizmKit" not in text, "a ticket of no record: nothing shown"
    assert "### PrizmKit records (read only)\n- .prizmkit/state/features/F-001/checkout.json: resumable" in cli(
        main, "resume", "F-001")[1], "shown for a ticket Baton knows too"
    assert {path: path.read_bytes() for path in state.rglob("*.json")} == before, "read only"

LIGHT = """
import sys
from baton.skills.frontends.cli import main
code = main(sys.argv[1:])
print("HEAVY", ",".join(sorted(m for m in ("pydantic", "psycopg") if m in sys.modules)))
sys.exit(code)
"""


def test_recover_reads_the_sessions_without_building_them(home, worktrees, cli):
    """`baton recover` answers within its 300 ms at 1,000 sessions (bench/recover.py) because it
    reads the sessions' outlines, not the validated sessions: no pydantic, touches pending or not."""
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    stage(cli, second, "PLAN_READY")
    cli(second, "touch", "src/a.py")  # kept unprojected until the next full read
    result = subprocess.run([sys.executable, "-c", LIGHT, "recover", "--all-repos", "--verbose"], cwd=main,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"excluded OMN-2 ({second}): no heartbeat recorded and last activity" in result.stdout
    assert result.stdout.endswith("HEAVY \n"), result.stdout

