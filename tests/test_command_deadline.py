"""One deadline per command (BATON_COMMAND_BUDGET): every wait of a command draws on it, each
kind within its own cap, and a part it cut says so. A git that hangs and a handoff probe
that hangs cost `baton resume` at most its deadline, never each its own timeout."""

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import timing
from tests.workspace import run_process

DEADLINE = 2.0  # seconds; every cap it must cut is longer (git 10 s, a checkpoint 30 s, a probe 10 s)


def hanging_git(directory: Path, marker: Path) -> Path:
    """A `git` that runs the real one, except `git status` while marker exists: that hangs."""
    real = shutil.which("git")
    assert real is not None
    directory.mkdir()
    script = directory / "git"
    script.write_text(f"""#!/bin/sh
if [ -f {shlex.quote(str(marker))} ]; then
    for arg in "$@"; do [ "$arg" = status ] && exec sleep 60; done
fi
exec {shlex.quote(real)} "$@"
""")
    script.chmod(0o755)
    return directory


def hanging_probe(worktree: Path, marker: Path) -> None:
    script = worktree / "slow.sh"
    script.write_text(f"#!/bin/sh\n[ -f {shlex.quote(str(marker))} ] && exec sleep 60\necho ok\n")
    script.chmod(0o755)


@pytest.fixture
def resumable(home, worktrees, cli, tmp_path) -> tuple[Path, Path, Path, dict]:
    """OMN-1 bound in the main worktree with a handoff whose probe `slow` hangs while the
    probe's marker exists; a git on PATH whose status hangs while the git's marker exists.
    Returns (worktree, git marker, probe marker, the environment of a resume)."""
    main, _ = worktrees
    git_hangs, probe_hangs = tmp_path / "git-hangs", tmp_path / "probe-hangs"
    cli(main, "bind", "OMN-1")
    hanging_probe(main, probe_hangs)
    code, _, err = cli(main, "handoff", "--probe", "slow=./slow.sh")
    assert code == 0, err
    path = f"{hanging_git(tmp_path / 'bin', git_hangs)}{os.pathsep}{os.environ['PATH']}"
    return main, git_hangs, probe_hangs, {"PATH": path, "BATON_COMMAND_BUDGET": str(DEADLINE)}


def resume_within(worktree: Path, env: dict, bound: float) -> tuple[subprocess.CompletedProcess, float]:
    """`baton resume OMN-1 --json` as a fresh process, and how long it took; fails the test
    when it has not answered within bound (plus a margin to tell a slow answer from none)."""
    try:
        return timing.timed(lambda: run_process(worktree, "resume", "OMN-1", "--json", env=env, timeout=bound + 10))
    except subprocess.TimeoutExpired:
        pytest.fail(f"resume did not answer within {bound + 10:.1f} s: nothing bounds its waits")


def live_state(result: subprocess.CompletedProcess) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    return {claim["section"]: claim for claim in json.loads(result.stdout)["live_state"]}


@pytest.mark.slow
def test_a_hanging_git_and_a_hanging_probe_cost_a_resume_its_deadline_and_it_says_what_ran_out(resumable):
    main, git_hangs, probe_hangs, env = resumable
    healthy = timing.floor(lambda: run_process(main, "resume", "OMN-1", "--json", env=env, timeout=60))
    git_hangs.write_text("")
    probe_hangs.write_text("")
    bound = timing.bound(healthy, DEADLINE)
    result, took = resume_within(main, env, bound)
    assert took < bound, f"resume took {took:.1f} s; its deadline is {DEADLINE:g} s (healthy: {healthy:.2f} s)"
    found = live_state(result)
    # The bind's checkpoint met the hanging `git status` first, and the answer says which limit cut it.
    said = [line for line in json.loads(result.stdout)["warnings"] if "git status: no answer within" in line]
    assert said, result.stdout
    assert said[0].endswith(f", what was left of the command's {DEADLINE:g} s deadline (BATON_COMMAND_BUDGET)"), said
    assert said[0] in result.stderr
    # Nothing was left for the probes: each says so instead of running into its own timeout.
    assert found["slow"]["status"] == "not_run", found["slow"]
    assert found["slow"]["reason"] == f"no time left of the command's {DEADLINE:g} s deadline (BATON_COMMAND_BUDGET)"


@pytest.mark.slow
def test_a_hanging_probe_is_cut_at_what_the_deadline_has_left(resumable):
    main, _, probe_hangs, env = resumable
    healthy = timing.floor(lambda: run_process(main, "resume", "OMN-1", "--json", env=env, timeout=60))
    probe_hangs.write_text("")
    bound = timing.bound(healthy, DEADLINE)
    result, took = resume_within(main, env, bound)
    assert took < bound, f"resume took {took:.1f} s; its deadline is {DEADLINE:g} s (healthy: {healthy:.2f} s)"
    slow = live_state(result)["slow"]
    assert slow["status"] == "failed" and slow["reason"].startswith("timed out after"), slow
    assert slow["reason"].endswith(f", when the command's {DEADLINE:g} s deadline (BATON_COMMAND_BUDGET) ran out")


def test_git_says_which_limit_ran_out_and_why_it_failed(worktrees, tmp_path, monkeypatch):
    from baton.deadline import Deadline
    from baton.errors import GitFailed
    from baton.git import run_git

    main, _ = worktrees
    marker = tmp_path / "git-hangs"
    monkeypatch.setenv("PATH", f"{hanging_git(tmp_path / 'bin', marker)}{os.pathsep}{os.environ['PATH']}")
    marker.write_text("")
    with pytest.raises(GitFailed) as cut_by_cap:
        run_git(main, "status", cap=0.2)
    assert cut_by_cap.value.reason == "git status: no answer within 0.2 s"
    deadline = Deadline(0.3)
    with pytest.raises(GitFailed) as cut_by_deadline:
        run_git(main, "-c", "color.ui=never", "status", cap=5, deadline=deadline)
    assert cut_by_deadline.value.reason == (
        "git status: no answer within 0.3 s, what was left of the command's 0.3 s deadline (BATON_COMMAND_BUDGET)")
    assert deadline.left() == 0
    with pytest.raises(GitFailed) as spent:
        run_git(main, "rev-parse", "HEAD", deadline=deadline)
    assert spent.value.reason == (
        "git rev-parse: not started, no time left of the command's 0.3 s deadline (BATON_COMMAND_BUDGET)")
    with pytest.raises(GitFailed) as refused:
        run_git(tmp_path, "rev-parse", "HEAD")
    assert refused.value.reason.startswith("git rev-parse exited 128: fatal: not a git repository"), refused.value
    assert run_git(tmp_path, "rev-parse", "HEAD", check=False).returncode == 128


def test_the_servers_budget_is_a_cap_below_the_command_deadline():
    from baton.budget import Budget, Server
    from baton.deadline import Deadline
    from baton.errors import StoreUnavailable

    deadline = Deadline(0.2)
    budget = Budget(2.0, deadline=deadline)
    assert budget.remaining() <= 0.2
    with deadline.waiting():  # another kind of wait (git, a probe) spends the deadline
        timing.wait_for(lambda: deadline.left() == 0, 5, "the deadline spent")
    assert budget.remaining() <= 0
    with pytest.raises(StoreUnavailable) as refused, budget.gate(Server("a server", ())).call("session registry"):
        pass
    assert refused.value.reason == "a server: no time left of the command's 0.2 s deadline (BATON_COMMAND_BUDGET)"
    budget.renew()  # the next unit of a long-running command: the deadline's too
    assert deadline.left() == 0.2
