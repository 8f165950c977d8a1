"""A repository's own .git/config never makes Baton run a command: every git call Baton
makes turns core.fsmonitor off (the hooks, the guard, the git-hook install, the probes)."""

import io
import json
import subprocess

from tests.workspace import git


def watched(repo, tmp_path):
    """Set core.fsmonitor to a command that leaves a marker file; returns the marker."""
    marker = tmp_path / "fsmonitor-ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    return marker


def test_no_git_call_of_baton_runs_the_repositorys_fsmonitor(home, worktrees, cli, tmp_path):
    from baton.skills.frontends.hooks import run_hook

    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    (main / "src").mkdir()
    (main / "src" / "cart.py").write_text("carts\n")
    git(main, "add", "src/cart.py")
    marker = watched(main, tmp_path)
    subprocess.run(["git", "status", "--porcelain"], cwd=main, capture_output=True, check=True)
    assert marker.exists(), "the configured command runs on a plain git status"
    marker.unlink()

    for event in ("stop", "session-end"):
        out = io.StringIO()
        assert run_hook(event, io.StringIO(json.dumps({"session_id": "s1", "cwd": str(main)})), out) == 0
    assert "src/cart.py" in json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]["files_touched"], \
        "the stop hook did read git's status"
    assert cli(main, "guard")[0] == 0
    assert cli(main, "install", "git-hook")[0] == 0
    assert cli(main, "uninstall", "git-hook")[0] == 0
    assert cli(main, "handoff")[0] == 0
    assert cli(main, "handoff", "verify")[0] == 0
    assert not marker.exists(), "a Baton command ran the repository's fsmonitor command"
