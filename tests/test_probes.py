"""The probe runner: no shell, a timeout, an output cap, a minimal environment, the worktree root."""

import os
import sys
import time
from pathlib import Path

import pytest

from baton.errors import BadInput
from baton.skills.handoff.probe_policy import GIT_STATE_PROBES
from baton.skills.handoff.probes import (
    COMPLETED,
    NOT_RUNNABLE,
    TIMED_OUT,
    normalise_output,
    run_probe,
    shown_output,
)
from baton.skills.runtime.command_words import parse_command
from tests.workspace import git, make_repo


@pytest.mark.parametrize("command", [
    "touch MARKER; rm -rf x", "echo hi | sh", "echo hi > out.txt", "false && touch MARKER", "false || touch MARKER",
    "sleep 9 &", "echo $(touch MARKER)", "echo `touch MARKER`", "cat < /etc/passwd", "FOO=1 env", "(touch MARKER)",
    "echo 'unbalanced", "",
])
def test_commands_that_need_a_shell_are_refused(command):
    with pytest.raises(BadInput):
        parse_command(command)


def test_words_are_split_like_a_shell_would():
    assert parse_command("git log -1 '--format=%H %s' -- . ':(exclude)docs/handoffs'") == [
        "git", "log", "-1", "--format=%H %s", "--", ".", ":(exclude)docs/handoffs"]
    assert parse_command("grep -e 'a|b' file") == ["grep", "-e", "a|b", "file"]


def test_no_shell_ever_interprets_the_arguments(tmp_path):
    marker = tmp_path / "MARKER"
    run = run_probe(["echo", f"$(touch {marker})", ";", "touch", str(marker)], tmp_path, timeout=5)
    assert run.outcome == COMPLETED and run.exit_status == 0
    assert run.output == f"$(touch {marker}) ; touch {marker}"
    assert not marker.exists()


def test_a_hanging_probe_is_cut_at_its_timeout_with_everything_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    # The background child keeps the output pipe open; the probe's group is killed anyway.
    run = run_probe(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; sleep 30"], tmp_path, timeout=0.5)
    assert run.outcome == TIMED_OUT and run.exit_status is None and "timed out after 0.5s" in run.reason
    assert time.monotonic() - started < 3
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the background child was killed with the probe"


def _alive(pid: int) -> bool:
    """Running, that is: not gone and not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_probe_that_closes_its_output_but_keeps_running_is_still_cut(tmp_path):
    started = time.monotonic()
    run = run_probe(["sh", "-c", "exec >/dev/null 2>&1; sleep 30"], tmp_path, timeout=0.5)
    assert run.outcome == TIMED_OUT and time.monotonic() - started < 3


def test_a_probe_printing_megabytes_is_capped_and_still_reports_its_exit(tmp_path):
    code = "import sys\nfor _ in range(80): sys.stdout.write('x' * 65535 + '\\n')\nsys.exit(3)"
    run = run_probe([sys.executable, "-c", code], tmp_path, timeout=30)
    assert run.outcome == COMPLETED and run.exit_status == 3
    assert run.truncated and len(run.output.encode()) <= 64 * 1024


def test_the_environment_is_minimal_and_relative_path_entries_are_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("BATON_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    fake = tmp_path / "bin"
    fake.mkdir()
    marker = tmp_path / "planted-ran"
    (fake / "env").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (fake / "env").chmod(0o755)
    monkeypatch.setenv("PATH", f"bin{os.pathsep}{os.environ['PATH']}")
    run = run_probe(["env"], tmp_path, timeout=5)
    assert not marker.exists(), "a program planted in the worktree never shadows the real one"
    names = {line.split("=", 1)[0] for line in run.output.splitlines()}
    assert "BATON_SECRET_TOKEN" not in names and "GIT_DIR" not in names
    assert {"PATH", "LANG", "GIT_OPTIONAL_LOCKS"} <= names
    assert "bin" not in run.output.split("PATH=", 1)[1].splitlines()[0].split(os.pathsep)


def test_probes_run_in_the_given_root_with_no_terminal_input(tmp_path):
    assert run_probe(["pwd"], tmp_path, timeout=5).output == str(tmp_path.resolve())
    run = run_probe(["cat"], tmp_path, timeout=5)  # would wait forever on a terminal
    assert run.outcome == COMPLETED and run.output == ""


def test_a_missing_program_is_not_runnable(tmp_path):
    run = run_probe(["baton-no-such-program"], tmp_path, timeout=5)
    assert run.outcome == NOT_RUNNABLE and "command not found" in run.reason


def test_output_is_normalised_and_shown_within_limits():
    assert normalise_output("a  \r\nb\r\n\n\n") == "a\nb"
    text = "\n".join(str(n) for n in range(10))
    assert shown_output(text, lines=3) == "0\n1\n2\n… 7 more lines"
    assert shown_output(text, tail=True, lines=2) == "… 8 more lines\n8\n9"


def test_a_program_planted_under_an_absolute_path_entry_inside_the_worktree_never_runs(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo", None)
    planted = repo / ".venv" / "bin"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-git-ran"
    (planted / "git").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (planted / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted}{os.pathsep}{os.environ['PATH']}")
    run = run_probe(GIT_STATE_PROBES["Branch"], repo, timeout=10)
    assert run.exit_status == 0 and run.output == "main"
    assert not marker.exists(), "the branch's own .venv/bin/git is never the git a probe runs"
    monkeypatch.setenv("PATH", f"{tmp_path / 'elsewhere'}{os.pathsep}{planted}{os.pathsep}{os.environ['PATH']}")
    run_probe(["env"], repo, timeout=10)
    assert not marker.exists()


def test_the_git_probes_never_run_a_configured_fsmonitor(tmp_path):
    repo = make_repo(tmp_path / "repo", None)
    marker = tmp_path / "fsmonitor-ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; echo")
    (repo / "a.txt").write_text("a\n")
    for argv in GIT_STATE_PROBES.values():
        assert run_probe(argv, repo, timeout=10).exit_status == 0
    assert not marker.exists(), "a command in .git/config is not run by re-verification"
    git(repo, "status")
    assert marker.exists(), "git itself does run it, so the check above could fail"


def test_processes_a_probe_left_behind_are_killed_when_it_ends(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = run_probe(["sh", "-c", f"sleep 77 >/dev/null 2>&1 & echo $! > {pid_file}; echo hi; exit 3"], tmp_path,
                    timeout=10)
    assert run.outcome == COMPLETED and run.exit_status == 3 and run.output == "hi"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "a background child of a finished probe is killed with its group"
