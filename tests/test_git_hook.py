"""The pre-commit guard: advisory by default, blocking with --strict, with real commits in a
real repository; an earlier pre-commit hook keeps running and comes back on uninstall."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.workspace import git, git_may_fail


def commit(cwd: Path, *paths: str, message: str = "change", extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    for path in paths:
        target = cwd / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{message}\n")
    git(cwd, "add", *paths)
    return git_may_fail(cwd, "commit", "-q", "-m", message, *extra, timeout=120)


def hooks_dir(cwd: Path) -> Path:
    return Path(git(cwd, "rev-parse", "--path-format=absolute", "--git-path", "hooks").strip())


@pytest.fixture
def overlapping(home, worktrees, cli) -> Path:
    """OMN-2 (second worktree) is changing src/db.py; the main worktree works on OMN-1."""
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")
    cli(main, "bind", "OMN-1")
    return main


def test_advisory_guard_warns_and_lets_the_commit_through(overlapping, cli):
    main = overlapping
    code, out, _ = cli(main, "install", "git-hook")
    assert code == 0 and "installed (advisory)" in out
    result = commit(main, "src/db.py", "src/other.py")
    assert result.returncode == 0, result.stderr
    assert "src/db.py also touched by OMN-2, another active ticket" in result.stderr
    assert "other.py" not in result.stderr
    assert git(main, "log", "-1", "--format=%s").strip() == "change"


def test_strict_guard_blocks_an_overlapping_commit(overlapping, cli):
    main = overlapping
    head = git(main, "rev-parse", "HEAD")
    assert cli(main, "install", "git-hook", "--strict")[0] == 0
    blocked = commit(main, "src/db.py")
    assert blocked.returncode != 0
    assert "also touched by OMN-2" in blocked.stderr and "commit blocked (--strict)" in blocked.stderr
    assert git(main, "rev-parse", "HEAD") == head
    fine = commit(main, "docs/readme.md", extra=("--only", "docs/readme.md"))
    assert fine.returncode == 0 and fine.stderr == "", "a commit that overlaps nothing goes through quietly"
    assert commit(main, "src/db.py", extra=("--no-verify",)).returncode == 0


def test_the_guard_records_the_staged_files_and_tells_the_other_ticket(overlapping, worktrees, cli):
    main = overlapping
    cli(main, "install", "git-hook")
    commit(main, "src/db.py")
    _, second = worktrees
    code, out, _ = cli(second, "signals", "--task", "OMN-2")
    assert "conflict_detected from OMN-1" in out


def test_an_earlier_pre_commit_hook_keeps_running_and_comes_back(overlapping, cli):
    main = overlapping
    directory = hooks_dir(main)
    directory.mkdir(parents=True, exist_ok=True)
    earlier = directory / "pre-commit"
    body = (b"#!/bin/sh\n# the team's own check\necho ran >> \"$(git rev-parse --show-toplevel)/earlier.log\"\n"
            b"[ -e \"$(git rev-parse --show-toplevel)/forbidden\" ] && exit 1\nexit 0\n")
    earlier.write_bytes(body)
    earlier.chmod(0o750)
    code, out, _ = cli(main, "install", "git-hook", "--strict")
    assert code == 0 and "the earlier hook keeps running first (pre-commit.before-baton)" in out
    assert cli(main, "install", "git-hook", "--strict")[1].strip().endswith(
        "unchanged (strict); the earlier hook keeps running first (pre-commit.before-baton)")
    assert commit(main, "docs/a.md").returncode == 0
    assert (main / "earlier.log").read_text() == "ran\n"
    (main / "forbidden").write_text("")
    failed = commit(main, "docs/b.md")
    assert failed.returncode != 0, "the earlier hook's failure still stops the commit"
    code, out, _ = cli(main, "uninstall", "git-hook")
    assert code == 0 and "the earlier hook is back in place" in out
    assert earlier.read_bytes() == body and stat.S_IMODE(earlier.stat().st_mode) == 0o750
    assert not (directory / "pre-commit.before-baton").exists()
    assert "no Baton guard installed" in cli(main, "uninstall", "git-hook")[1]


def test_switching_to_strict_updates_the_script_in_place(overlapping, cli):
    main = overlapping
    cli(main, "install", "git-hook")
    assert "updated (strict)" in cli(main, "install", "git-hook", "--strict")[1]
    assert commit(main, "src/db.py").returncode != 0
    assert cli(main, "uninstall", "git-hook")[0] == 0
    assert not (hooks_dir(main) / "pre-commit").exists()
    assert commit(main, "src/db.py").returncode == 0


def test_an_unbound_worktree_commits_with_a_note(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "install", "git-hook", "--strict")
    result = commit(main, "a.txt")
    assert result.returncode == 0
    assert "is not bound to a ticket" in result.stderr and "nothing checked" in result.stderr


def test_install_outside_a_repository_is_refused(home, tmp_path, cli):
    code, _, err = cli(tmp_path, "install", "git-hook")
    assert code == 2 and "not in a git repository" in err


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("broken", ["bad baton.toml", "data home is a file"])
def test_the_guard_never_stops_a_commit_because_baton_failed(overlapping, cli, monkeypatch, tmp_path, broken, strict):
    main = overlapping
    cli(main, *(["install", "git-hook"] + (["--strict"] if strict else [])))
    if broken == "bad baton.toml":
        (Path(os.environ["BATON_HOME"]) / "baton.toml").write_text("stores = [\n")
    else:
        (tmp_path / "not-a-directory").write_text("")
        monkeypatch.setenv("BATON_HOME", str(tmp_path / "not-a-directory"))
    result = commit(main, "src/db.py")
    assert result.returncode == 0, result.stderr
    assert "baton: pre-commit guard skipped: " in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr


HUSKY_H = b"""#!/bin/sh
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n
[ ! -f "$s" ] && exit 0
sh -e "$s" "$@"
"""


def tree_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_husky_keeps_running_the_teams_hook_and_baton_says_where_to_add_the_guard(overlapping, cli):
    main = overlapping
    husky = main / ".husky"
    (husky / "_").mkdir(parents=True)
    (husky / "_" / "h").write_bytes(HUSKY_H)
    (husky / "_" / "pre-commit").write_bytes(b'#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n')
    (husky / "_" / "pre-commit").chmod(0o755)
    (husky / "pre-commit").write_bytes(b'echo team-check >> "$(git rev-parse --show-toplevel)/team.log"\n')
    git(main, "config", "core.hooksPath", ".husky/_")
    before = tree_of(husky)
    code, _, err = cli(main, "install", "git-hook", "--strict")
    assert code == 2 and err.count("\n") == 1, err
    assert ("husky" in err and ".husky/pre-commit" in err and "`baton guard --strict`" in err
            and "nothing changed" in err)
    assert tree_of(husky) == before
    assert commit(main, "docs/a.md").returncode == 0
    assert (main / "team.log").read_text() == "team-check\n", "the team's hook still runs"


@pytest.mark.parametrize("manager, body, says", [
    ("lefthook", b'#!/bin/sh\nif [ "$LEFTHOOK" = "0" ]; then exit 0; fi\nlefthook run "pre-commit" "$@"\n',
     "lefthook.yml"),
    ("pre-commit", (b"#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"
                    b"ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)\n"),
     ".pre-commit-config.yaml"),
])
def test_a_hook_managers_pre_commit_hook_is_left_alone(overlapping, cli, manager, body, says):
    main = overlapping
    directory = hooks_dir(main)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pre-commit").write_bytes(body)
    before = tree_of(directory)
    code, _, err = cli(main, "install", "git-hook")
    assert code == 2 and manager in err and says in err and "`baton guard`" in err and "nothing changed" in err
    assert tree_of(directory) == before


def test_a_shared_hooks_path_is_left_alone(overlapping, cli):
    main = overlapping
    shared = main / "githooks"
    shared.mkdir()
    (shared / "pre-commit").write_bytes(b"#!/bin/sh\nexit 0\n")
    git(main, "config", "core.hooksPath", "githooks")
    code, _, err = cli(main, "install", "git-hook")
    assert code == 2 and "core.hooksPath" in err and "githooks" in err and "`baton guard`" in err
    assert tree_of(shared) == {"pre-commit": b"#!/bin/sh\nexit 0\n"}
