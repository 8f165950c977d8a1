import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}).stdout


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "baton-home"
    monkeypatch.setenv("BATON_HOME", str(path))
    monkeypatch.delenv("BATON_TASK_ID", raising=False)
    monkeypatch.delenv("BATON_SESSION_ID", raising=False)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "2")
    return path


def make_repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if origin:
        git(path, "remote", "add", "origin", origin)
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


@pytest.fixture
def worktrees(tmp_path) -> tuple[Path, Path]:
    """Two worktrees of one repository with an origin."""
    main = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    second = tmp_path / "shop-second"
    git(main, "worktree", "add", "-q", str(second), "-b", "second")
    return main, second


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run `baton ARGS` in-process in a directory; returns (exit status, stdout, stderr)."""
    from skills.cli import main

    def run(cwd: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def run_process(cwd: Path, *args: str, env: dict | None = None, timeout: float = 60,
                prelude: str = "") -> subprocess.CompletedProcess:
    """Run baton as a fresh process (prelude: Python run before the CLI, e.g. to hide a module)."""
    code = f"{prelude}\nimport sys\nfrom skills.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
