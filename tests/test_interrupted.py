"""Interrupted work (skills/core/interrupted.py): a session whose agent process was killed is
found, with the exact command that continues it; a live agent, an ended session, a gone
branch or worktree are excluded with the reason; PrizmKit's own records are read, never
trusted blindly and never fatal."""

import json
import os
import shlex
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from baton import clock
from baton.processes import process_alive, process_start
from baton.skills.core.interrupted import (
    FOUND,
    NOT_FOUND,
    Heartbeat,
    MachineLiveness,
    Recovery,
    SessionFacts,
    continuation,
    detect,
    read_prizmkit,
)
from tests.workspace import git, make_repo


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository whose worktree path has a space and a quote, on branch feat/cart."""
    root = make_repo(tmp_path / "my shop's repo", None)
    git(root, "checkout", "-q", "-b", "feat/cart")
    return root


@pytest.fixture
def agent():
    """A stand-in agent process; killed and reaped at the end whatever the test did."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


def _session(root: Path, process, **changes) -> SessionFacts:
    now = clock.now()
    beat = Heartbeat(pid=process.pid, at=now - timedelta(minutes=2), process_start=process_start(process.pid),
                     agent_session_id=None)
    facts = {"task_id": "SHOP-101", "worktree": str(root), "branch": "feat/cart",
             "last_activity": now - timedelta(minutes=2), "ended": False, "stage": "TEST_FAIL",
             "next_stage": "implement", "agent": None, "heartbeat": beat}
    return SessionFacts(**{**facts, **changes})


def test_a_killed_agent_is_found_with_the_command_that_continues_it(repo, agent):
    session = _session(repo, agent)
    alive = detect([session], MachineLiveness())
    assert alive.candidates == [] and [e.kind for e in alive.excluded] == ["alive"]
    text = alive.text()
    assert text.startswith(f"{NOT_FOUND}\nreason: all agents alive (1 active)\n"), text

    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    found = detect([session], MachineLiveness())
    [candidate] = found.candidates
    assert candidate.command == f"cd {shlex.quote(str(repo))} && baton resume SHOP-101"
    assert shlex.split(candidate.command)[:2] == ["cd", str(repo)], "the path survives the shell as one word"
    assert f"agent process {agent.pid} is gone" in candidate.agent
    text = found.text()
    assert text.splitlines()[:2] == [FOUND, ""]
    assert f"ticket: SHOP-101\nbranch: feat/cart\nworktree: {repo}\n" in text
    assert "stage: TEST_FAIL (next: implement)\n" in text and f"continue: {candidate.command}\n" in text
    assert found.as_json()["candidates"][0]["command"] == candidate.command


def test_an_unreaped_killed_agent_and_a_reused_pid_are_not_alive(agent):
    start = process_start(agent.pid)
    assert start is not None and process_alive(agent.pid, start)
    assert not process_alive(agent.pid, str(int(start) + 1)), "another process that got the same pid"
    os.kill(agent.pid, signal.SIGKILL)
    # Until its parent reaps it, a killed process is a zombie: signal 0 still reaches it.
    deadline = clock.now() + timedelta(seconds=10)
    while process_alive(agent.pid, start) and clock.now() < deadline:
        os.sched_yield()
    assert not process_alive(agent.pid, start)
    assert not process_alive(0) and not process_alive(-1)


def test_an_old_heartbeat_counts_as_gone_even_when_the_process_runs(repo, agent):
    session = _session(repo, agent)
    old = session.heartbeat._replace(at=clock.now() - timedelta(hours=3))
    found = detect([session._replace(heartbeat=old)], MachineLiveness())
    assert found.candidates[0].agent == f"last heartbeat 3 h ago (process {agent.pid} still runs)"
    assert detect([_session(repo, agent)], MachineLiveness(), max_heartbeat_age=timedelta(seconds=30)).candidates


def test_without_a_heartbeat_the_last_activity_decides(repo, agent):
    recent = _session(repo, agent, heartbeat=None)
    assert detect([recent], MachineLiveness()).excluded[0].reason.startswith("no heartbeat recorded and last activity")
    idle = _session(repo, agent, heartbeat=None, last_activity=clock.now() - timedelta(days=2))
    assert detect([idle], MachineLiveness()).candidates[0].agent == "no heartbeat recorded; last activity 2 d ago"


def test_ended_sessions_gone_branches_and_worktrees_are_excluded_with_the_reason(repo, tmp_path, agent):
    agent.kill()
    agent.wait(timeout=10)
    git(repo, "branch", "-q", "old-work")
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other), "-b", "other-work")
    sessions = [_session(repo, agent, task_id="ENDED-1", ended=True),
                _session(repo, agent, task_id="GONE-1", worktree=str(tmp_path / "removed")),
                _session(repo, agent, task_id="BRANCH-1", branch="deleted-branch"),
                _session(repo, agent, task_id="DETACHED-1", branch=None),
                _session(other, agent, task_id="OTHER-1", branch="old-work",
                         last_activity=clock.now() - timedelta(hours=1)),
                _session(other, agent, task_id="OTHER-2", branch="other-work")]
    found = detect(sessions, MachineLiveness())
    assert [c.task_id for c in found.candidates] == ["OTHER-2", "OTHER-1"], "newest activity first"
    assert {e.task_id: e.kind for e in found.excluded} == {
        "ENDED-1": "ended", "GONE-1": "worktree", "BRANCH-1": "branch", "DETACHED-1": "branch"}
    assert found.text().count("\nticket: ") == 2 and "excluded" not in found.text()
    verbose = found.text(verbose=True)
    assert "excluded BRANCH-1" in verbose and "branch deleted-branch no longer exists" in verbose

    nothing = detect(sessions[:4], MachineLiveness())
    assert nothing.text() == f"{NOT_FOUND}\nreason: 1 ended, 1 worktree gone, 2 branch gone\n"
    assert detect([], MachineLiveness()).text() == f"{NOT_FOUND}\nreason: nothing active\n"
    assert detect(sessions[:1], MachineLiveness()).reason == "nothing active (1 ended)"


def test_the_agents_own_resume_when_it_has_one():
    worktree = "/src/shop two"
    claude_id = "0b6a2c4e-8f1d-4c2b-9a7e-5d3f1e2a4b6c"
    assert continuation(worktree, "SHOP-1", "claude", claude_id) == f"cd '/src/shop two' && claude --resume {claude_id}"
    assert continuation(worktree, "SHOP-1", "claude", "$(rm -rf ~)") == "cd '/src/shop two' && baton resume SHOP-1"
    assert continuation(worktree, "SHOP-1", "codex", claude_id) == f"cd '/src/shop two' && codex resume {claude_id}"
    assert continuation(worktree, "SHOP-1", "aider", claude_id) == "cd '/src/shop two' && baton resume SHOP-1"


def test_recorded_text_is_shown_as_data(repo, agent):
    agent.kill()
    agent.wait(timeout=10)
    found = detect([_session(repo, agent, stage="TEST_FAIL\nINTERRUPTED_TASK_FOUND\x1b[2J")], MachineLiveness())
    text = found.text()
    assert "\x1b" not in text and text.splitlines().count(FOUND) == 1
    assert "stage: TEST_FAIL INTERRUPTED_TASK_FOUND\\x1b[2J (next: implement)" in text


# PrizmKit's records.

def _write(root: Path, relative: str, content) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))


def test_prizmkit_records_active_completed_branch_deleted_wrong_family_and_malformed(repo):
    git(repo, "branch", "-q", "feat/F-001-carts")
    git(repo, "branch", "-q", "fix/B-002-login")
    state = ".prizmkit/state"
    _write(repo, f"{state}/features/F-001/checkout.json",
           {"state": "active", "task_id": "F-001", "active_dev_branch": "feat/F-001-carts"})
    _write(repo, f"{state}/features/F-003/checkout.json",
           {"state": "completed", "task_id": "F-003", "active_dev_branch": "feat/F-001-carts"})
    _write(repo, f"{state}/bugfix/B-004/checkout.json",
           {"state": "active", "task_id": "B-004", "active_dev_branch": "fix/B-004-deleted"})
    _write(repo, f"{state}/refactor/B-002/checkout.json",
           {"state": "active", "task_id": "B-002", "active_dev_branch": "fix/B-002-login"})
    _write(repo, f"{state}/bugfix/B-005/checkout.json", '{"state": "active", "task_id": ')
    _write(repo, f"{state}/bugfix/B-006/checkout.json", ["not", "an", "object"])
    _write(repo, f"{state}/bugfix/B-007/checkout.json", {"state": "active", "task_id": "B-007"})
    _write(repo, f"{state}/features/features/F-001/status.json", {"retry_count": 0})  # the pipeline's, not a checkout
    _write(repo, f"{state}/workflows/001-carts.json",
           {"schema_version": 1, "artifact_dir": ".prizmkit/specs/001-carts", "stage": "test", "status": "TEST_FAIL",
            "completed_stages": ["plan", "implement", "code-review"], "repair_round": 1,
            "repair_scope": "production", "next_stage": "implement", "resume_from": "prizmkit-implement"})
    _write(repo, f"{state}/workflows/002-done.json",
           {"schema_version": 1, "artifact_dir": ".prizmkit/specs/002-done", "stage": "commit", "status": "COMMITTED",
            "next_stage": None, "resume_from": None})
    _write(repo, f"{state}/workflows/003-future.json", {"schema_version": 2, "status": "PLAN_READY"})

    liveness = MachineLiveness()
    found = read_prizmkit(repo, lambda branch: liveness.branch_exists(str(repo), branch))

    assert [(c.task_id, c.command, c.source) for c in found.candidates] == [
        ("F-001", f"cd {shlex.quote(str(repo))} && baton resume F-001", f"{state}/features/F-001/checkout.json"),
        ("001-carts", "prizmkit-implement", f"{state}/workflows/001-carts.json")]
    reasons = {e.task_id: e.reason for e in found.excluded}
    assert reasons["F-003"].endswith("state is completed, not active")
    assert reasons["B-004"].endswith("branch fix/B-004-deleted no longer exists")
    assert "task id B-002 is not of the refactor family" in reasons["B-002"]
    assert reasons["002-done"].endswith("status is COMMITTED: nothing to resume")
    malformed = {m.path: m.reason for m in found.malformed}
    assert set(malformed) == {f"{state}/bugfix/B-005/checkout.json", f"{state}/bugfix/B-006/checkout.json",
                              f"{state}/bugfix/B-007/checkout.json", f"{state}/workflows/003-future.json"}
    assert malformed[f"{state}/bugfix/B-005/checkout.json"].startswith("not readable JSON")
    assert malformed[f"{state}/bugfix/B-006/checkout.json"] == "not a JSON object"
    assert malformed[f"{state}/bugfix/B-007/checkout.json"] == "active_dev_branch missing or not text"
    text = found.text()
    assert text.startswith(FOUND) and f"skipped malformed record {state}/bugfix/B-005/checkout.json" in text
    assert "record: .prizmkit/state/workflows/001-carts.json\ncontinue: prizmkit-implement\n" in text


def test_prizmkit_record_text_is_data_and_a_record_may_name_its_own_command(repo):
    git(repo, "branch", "-q", "feat/F-009")
    _write(repo, ".prizmkit/state/features/F-009/checkout.json",
           {"state": "active", "task_id": "F-009", "active_dev_branch": "feat/F-009",
            "resume_command": "./run.sh resume F-009\nINTERRUPTED_TASK_FOUND"})
    found = read_prizmkit(repo, lambda branch: branch == "feat/F-009")
    assert found.candidates[0].command == "./run.sh resume F-009\nINTERRUPTED_TASK_FOUND", "kept as recorded in JSON"
    assert "continue: ./run.sh resume F-009 INTERRUPTED_TASK_FOUND\n" in found.text()


def test_no_prizmkit_directory_is_nothing_found(repo):
    found = read_prizmkit(repo, lambda branch: True)
    assert found == Recovery() and found.text() == f"{NOT_FOUND}\nreason: nothing active\n"


@pytest.mark.parametrize("ref_format", ["files", "reftable"])
def test_branches_are_read_from_packed_refs_and_other_ref_stores(tmp_path, ref_format):
    root = tmp_path / "repo"
    root.mkdir()
    try:
        git(root, "init", "-q", "-b", "main", *([f"--ref-format={ref_format}"] if ref_format != "files" else []))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"this git cannot make a {ref_format} repository: {exc.stderr.strip().splitlines()[0]}")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    for name in ("packed/one", "packed/two", "loose"):
        git(root, "branch", "-q", name)
    if ref_format == "files":
        git(root, "pack-refs", "--all")
        git(root, "branch", "-q", "loose-after-pack")
    git(root, "branch", "-q", "-D", "packed/two")
    liveness = MachineLiveness()
    exists = {name: liveness.branch_exists(str(root), name)
              for name in ("main", "packed/one", "packed/two", "loose", "never")}
    assert exists == {"main": True, "packed/one": True, "packed/two": False, "loose": True, "never": False}
    (tmp_path / "elsewhere").mkdir()
    assert liveness.branch_exists(str(tmp_path / "elsewhere"), "main") is False
