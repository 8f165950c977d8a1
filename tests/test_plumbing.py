"""The kernel's one home for each piece of plumbing, as its callers rely on it: the bounded
process runner, the lock and the lingering worker, the backoff, the `.git` reader and the
choice of the current handoff."""

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from baton.files import WorktreeLocator, git_dirs
from baton.locks import held, linger, taken
from baton.processes import process_alive, run_bounded
from baton.retry import Backoff
from baton.skills.frontends.hooks import handoff_of
from baton.skills.handoff.files import MAX_DOCUMENT_BYTES, choose_current
from tests.workspace import git, make_repo


def test_a_child_and_what_it_started_end_at_the_wait(tmp_path):
    """The group is killed at the limit, a background grandchild with it; the status says
    it did not end, and what it wrote by then is kept."""
    pid_file = tmp_path / "pid"
    script = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); print('started', flush=True); p.wait()")
    started = time.monotonic()
    ran = run_bounded([sys.executable, "-c", script], wait=2.0)
    assert time.monotonic() - started < 10
    assert ran.returncode is None and ran.stdout == b"started\n"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while process_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(grandchild)


def test_output_past_the_cap_is_read_and_dropped_and_the_status_still_comes(tmp_path):
    ran = run_bounded([sys.executable, "-c", "import sys; sys.stdout.write('x' * 1_000_000); sys.exit(3)"],
                      wait=30, output_cap=1000, merged=True)
    assert (ran.returncode, len(ran.stdout), ran.truncated) == (3, 1000, True)


def test_input_is_written_and_both_streams_are_kept_apart():
    script = "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(data[::-1]); sys.stderr.write('e')"
    payload = os.urandom(300_000)  # more than a pipe holds: written while the output is read
    ran = run_bounded([sys.executable, "-c", script], wait=30, input=payload)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, payload[::-1], b"e")


def test_a_server_that_answers_and_stays_is_asked_until_enough():
    script = "import sys, time; print(sys.stdin.readline().upper(), flush=True); time.sleep(60)"
    started = time.monotonic()
    ran = run_bounded([sys.executable, "-c", script], wait=30, input=b"hello\n", enough=lambda said: b"\n" in said)
    assert time.monotonic() - started < 10 and ran.stdout.startswith(b"HELLO") and ran.returncode is None


def test_a_program_that_cannot_start_raises():
    with pytest.raises(FileNotFoundError):
        run_bounded(["/nonexistent/program"], wait=1)


def test_backoff_grows_to_its_most_with_jitter_and_gives_up(monkeypatch):
    retry = Backoff(0.1, most=0.5, jitter=0.1)
    delays = [retry.failed() for _ in range(6)]
    for delay, base in zip(delays, [0.1, 0.2, 0.4, 0.5, 0.5, 0.5], strict=True):
        assert delay is not None and base <= delay <= base * 1.1
    retry.reset()
    assert retry.failed() is not None and retry.failed() <= 0.2 * 1.1
    giving_up = Backoff(0.01, give_up_after=0.05)
    assert giving_up.wait()
    time.sleep(0.06)
    assert not giving_up.wait() and giving_up.failed() is None
    giving_up.reset()
    assert giving_up.failed() is not None


def test_a_lock_is_waited_for_within_its_bound(tmp_path):
    path = tmp_path / "home" / "x.lock"
    fd = taken(path)
    assert fd is not None and taken(path) is None
    started = time.monotonic()
    with held(path, within=0.2) as got:
        assert not got and time.monotonic() - started >= 0.2
    threading.Timer(0.1, os.close, [fd]).start()
    with held(path, within=5) as got:
        assert got


def test_linger_waits_for_more_work_and_stops_when_none_comes(tmp_path):
    """Work queued during the linger is done under the same hold; a worker holding the
    lock keeps a second one out."""
    queue = [1]
    done: list[int] = []

    def work() -> bool:
        done.extend(queue)
        queue.clear()
        if len(done) == 1:
            threading.Timer(0.1, queue.append, [2]).start()
        return True

    started = time.monotonic()
    linger(tmp_path / "w.lock", work, lambda: bool(queue), idle=0.5)
    assert done == [1, 2] and time.monotonic() - started >= 0.5
    fd = taken(tmp_path / "w.lock")
    linger(tmp_path / "w.lock", lambda: pytest.fail("the lock is held"), lambda: True, idle=0.1)
    os.close(fd)
    assert not queue


@pytest.mark.parametrize("text, found", [("gitdir: {}\n", True), ("gitdir:{}\n", False)])
def test_a_dot_git_file_is_read_as_git_reads_it(tmp_path, text, found):
    """`gitdir: ` with its space names the git directory (relative to the worktree's root);
    git refuses `gitdir:` without it, and so does Baton."""
    main = make_repo(tmp_path / "main", None)
    git(main, "worktree", "add", "-q", str(tmp_path / "linked"), "-b", "linked")
    linked = tmp_path / "linked"
    target = Path(os.path.relpath(main / ".git" / "worktrees" / "linked", linked))
    (linked / ".git").write_text(text.format(target))
    dirs = git_dirs(linked)
    assert (dirs is not None) == found
    if found:
        assert dirs == ((main / ".git" / "worktrees" / "linked").resolve(), (main / ".git").resolve())
        assert WorktreeLocator().locate(linked).root == linked.resolve()


def test_the_hook_and_resume_stop_at_an_unreadable_current_handoff(tmp_path):
    """An unreadable LATEST.md is the current handoff for both: the older readable one is
    history, never shown as current."""
    handoffs = tmp_path / "docs" / "handoffs"
    handoffs.mkdir(parents=True)
    (handoffs / "2026-01-01-T-1.md").write_text("# Handoff\n\nTicket: T-1\n")
    (handoffs / "LATEST.md").write_bytes(b"x" * (MAX_DOCUMENT_BYTES + 1))
    path, parsed, note, _ = choose_current(tmp_path, "T-1")
    assert path == handoffs / "LATEST.md" and parsed is None and "larger than" in note
    assert handoff_of(tmp_path, "T-1") == "docs/handoffs/LATEST.md"
