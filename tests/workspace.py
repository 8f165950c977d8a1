"""What a test works in and with: the project's own root, git repositories made with a
fixed identity, Baton run as a fresh process, and two agents at work in two worktrees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Commits in test repositories need an author whatever the machine's git configuration.
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@e"}


def git_may_fail(cwd: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **GIT_IDENTITY})


def git(cwd: Path, *args: str) -> str:
    """git's output; raises CalledProcessError when git fails."""
    result = git_may_fail(cwd, *args)
    result.check_returncode()
    return result.stdout


def make_repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if origin:
        git(path, "remote", "add", "origin", origin)
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


def agent_worktree(tmp_path: Path, monkeypatch) -> Path:
    """The worktree `shop-agent` (branch agent) of a repository `shop`, for a real agent's
    run, and a runtime directory of the test's own (the hooks' marks of what was told)."""
    main = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    worktree = tmp_path / "shop-agent"
    git(main, "worktree", "add", "-q", str(worktree), "-b", "agent")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return worktree


def two_agents(worktrees: tuple[Path, Path], cli) -> Path:
    """OMN-1 in the main worktree and OMN-2 in the second, overlapping on src/db.py, each
    with a decision about PostgreSQL. Returns the main worktree."""
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/db.py")
    cli(main, "decide", "Keep carts in PostgreSQL")
    cli(second, "bind", "OMN-2")
    cli(second, "decide", "Persist payments in PostgreSQL")
    cli(second, "touch", "src/db.py")
    cli(main, "index")
    return main


def run_process(cwd: Path, *args: str, env: dict | None = None, timeout: float = 60,
                prelude: str = "") -> subprocess.CompletedProcess:
    """Run baton as a fresh process (prelude: Python run before the CLI, e.g. to hide a module).
    In lane `on` (tests/lanes.py) it goes through the console entry to the resident, unless a
    prelude must change the process that runs the command."""
    from tests import lanes

    if lanes.current is not None and not prelude:
        return lanes.current.run(cwd, args, env=env, timeout=timeout)
    code = f"{prelude}\nimport sys\nfrom baton.skills.frontends.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def live_processes(variable: str) -> dict[int, str]:
    """The live processes (zombies aside) whose environment holds variable (NAME=value),
    from /proc, this one aside: each one's command line by pid."""
    marker = variable.encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if marker in environ and state != "Z":
            found[int(entry.name)] = cmdline
    return found
