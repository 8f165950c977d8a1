"""A full disk: every command answers in one line with exit 3 (never a signal or a
traceback), nothing written before is lost or corrupted, and everything works again once
there is space. Each test mounts its own small tmpfs (root only; skipped elsewhere)."""

import errno
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from tests.workspace import run_process

pytestmark = pytest.mark.slow  # each test fills a small tmpfs, seconds apiece

COMMANDS = {
    "bind": ["bind", "OMN-1"],
    "touch": ["touch", "--task", "OMN-1", "src/b.py"],
    "decide": ["decide", "--task", "OMN-1", "Keep carts in PostgreSQL"],
    "update": ["update", "--task", "OMN-1", "--next", "write the migration"],
    "resume": ["resume", "OMN-1"],
    "list": ["list"],
    "recall": ["recall", "where do we keep carts"],
    "doctor": ["doctor"],
    "handoff": ["handoff", "--task", "OMN-1"],
    "index": ["index"],
}
# What the commands that never create the recall index answer in a home that has none.
NOTHING_RECORDED = {"recall": "No decisions recorded.\n",
                    "index": "Indexed 0 decisions (0 were indexed already); 0 wait.\n"}


@pytest.fixture
def small_disk(tmp_path):
    """mount(directory, size): a tmpfs of that size at directory, unmounted at teardown."""
    mounted: list[Path] = []

    def mount(directory: Path, size: str = "2m") -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"mounting a tmpfs is not permitted here: {result.stderr.strip()}")
        mounted.append(directory)
        return directory

    yield mount
    for directory in reversed(mounted):
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=True)


def fill(directory: Path) -> Path:
    """Fill directory's file system to the last byte; returns the file that holds the space."""
    filler = directory / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = 64 * 1024
    try:
        while chunk:
            try:
                os.write(descriptor, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(descriptor)
    assert os.statvfs(directory).f_bavail == 0
    return filler


def assert_one_line_and_exit_3(command: str, result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 3, (command, result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    errors = result.stderr.splitlines()
    if command == "resume":  # its answer: the registry is unavailable, on stdout
        assert result.stdout.startswith("Session registry unavailable: "), result.stdout
        assert len(errors) <= 1, errors
    elif command == "doctor":  # its answer: each store's state, on stdout
        assert "unavailable: " in result.stdout and not errors, (result.stdout, errors)
    else:
        assert len(errors) == 1 and errors[0].startswith("baton: "), errors


def assert_no_leftovers(home: Path) -> None:
    """No half-made file: no temporary file, no empty database (which would not be Baton's)."""
    for path in home.rglob("*"):
        assert ".new-" not in path.name and not path.name.startswith(".handoff-key-"), path
        if path.suffix == ".db":
            assert path.stat().st_size > 0, path
            with closing(sqlite3.connect(path)) as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", path


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fresh_data_home_on_a_full_disk(home, worktrees, small_disk, monkeypatch, command):
    """recall and index read the recall index only where one exists: in a fresh home they
    truly find no decision, and say so without writing anything."""
    main, _ = worktrees
    data = small_disk(home.parent / "disk")
    fresh = data / "home"
    fresh.mkdir(mode=0o700)  # as Baton makes one (a readable one is pointed out)
    monkeypatch.setenv("BATON_HOME", str(fresh))
    filler = fill(data)
    result = run_process(main, *COMMANDS[command])
    if command in NOTHING_RECORDED and result.returncode == 0:
        assert (result.stdout, result.stderr) == (NOTHING_RECORDED[command], "")
    else:
        assert_one_line_and_exit_3(command, result)
    assert_no_leftovers(fresh)
    filler.unlink()
    result = run_process(main, *COMMANDS[command])
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert_no_leftovers(fresh)


@pytest.fixture
def history(home, worktrees, small_disk, monkeypatch):
    """OMN-1 with a binding, a touch, a decision, a next action and a handoff, its data
    home on a small disk."""
    main, _ = worktrees
    data = small_disk(home.parent / "disk")
    monkeypatch.setenv("BATON_HOME", str(data / "home"))
    for args in (["bind", "OMN-1"], ["touch", "src/a.py"], ["decide", "Keep carts in PostgreSQL"],
                 ["update", "--next", "write the migration"], ["handoff"]):
        result = run_process(main, *args)
        assert result.returncode == 0, (args, result.stderr)
    return main, data


def recorded(main: Path) -> dict:
    result = run_process(main, "resume", "OMN-1", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["session"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_data_home_with_history_on_a_full_disk(history, command):
    """Every open of a WAL database needs its shared-memory file, which a full disk refuses:
    reads fail too, in one line. handoff: the worktree still takes the document, so it is
    written (without its journal, which the registry could not give) and each store that
    failed is one warning line."""
    main, data = history
    before = recorded(main)
    latest = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    filler = fill(data)
    result = run_process(main, *COMMANDS[command])
    if command == "handoff":
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert all(line.startswith("baton: warning: ") for line in result.stderr.splitlines()), result.stderr
        assert "the journal is missing" in (main / "docs" / "handoffs" / "LATEST.md").read_text()
    else:
        assert_one_line_and_exit_3(command, result)
        assert (main / "docs" / "handoffs" / "LATEST.md").read_text() == latest
    filler.unlink()
    assert_no_leftovers(data / "home")
    after = recorded(main)
    for key in ("decisions", "files_touched", "next_action", "handoff"):
        assert after[key] == before[key], key
    for args in COMMANDS.values():
        result = run_process(main, *args)
        assert result.returncode == 0, (args, result.stderr)


def test_hooks_on_a_full_disk_say_one_line_and_exit_0(history):
    main, data = history
    fill(data)
    for event in ("session-start", "user-prompt-submit", "stop", "session-end"):
        result = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "hook", event], cwd=main,
                                capture_output=True,
                                text=True, timeout=60, input=json.dumps({"session_id": "s1", "cwd": str(main)}))
        assert result.returncode == 0 and "Traceback" not in result.stderr, (event, result.stderr)
        assert all(line.startswith(("baton: hook ", "baton: warning: "))
                   for line in result.stderr.splitlines()), (event, result.stderr)


def test_a_full_handoffs_directory_keeps_the_earlier_handoff(home, worktrees, small_disk):
    main, _ = worktrees
    assert run_process(main, "bind", "OMN-1").returncode == 0
    handoffs = small_disk(main / "docs" / "handoffs")
    assert run_process(main, "handoff").returncode == 0
    before = {path.name: path.read_bytes() for path in handoffs.iterdir()}
    filler = fill(handoffs)
    result = run_process(main, "handoff")
    assert_one_line_and_exit_3("handoff", result)
    assert "cannot write" in result.stderr and "No space left on device" in result.stderr
    assert {path.name: path.read_bytes() for path in handoffs.iterdir() if path != filler} == before, \
        "the earlier handoff and LATEST.md are as they were, and nothing half-written is left"
    filler.unlink()
    assert run_process(main, "handoff").returncode == 0
    assert len(list(handoffs.glob("*-OMN-1*.md"))) == 2


def test_a_full_worktree_keeps_its_binding(home, worktrees, small_disk):
    main, _ = worktrees
    assert run_process(main, "bind", "OMN-1").returncode == 0
    binding = small_disk(main / ".baton")
    assert run_process(main, "bind", "OMN-1").returncode == 0
    kept = (binding / "active_session.yaml").read_text()
    filler = fill(binding)
    result = run_process(main, "bind", "OMN-2")
    assert_one_line_and_exit_3("bind", result)
    assert "binding file unavailable: cannot write" in result.stderr
    assert (binding / "active_session.yaml").read_text() == kept
    assert sorted(path.name for path in binding.iterdir()) == ["active_session.yaml", "filler", "run.json"]
    filler.unlink()
    assert run_process(main, "bind", "OMN-2").returncode == 0
    assert '"OMN-2"' in (binding / "active_session.yaml").read_text()
