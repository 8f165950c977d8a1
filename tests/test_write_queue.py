"""On the embedded default a write never fails because another process holds the registry's
write lock: it is queued in the data home (baton.write_queue) and applied, once and in its
order, by the next process that takes the lock or by the background delivery; a read sees
the queued writes of its own ticket meanwhile. A writer killed in the middle of queueing
leaves the queue readable, with every write it acknowledged."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.stores import record_touch
from tests.test_full_disk import fill, small_disk  # noqa: F401 -- a fixture
from tests.timing import wait_for
from tests.workspace import ROOT, run_process

ON = {"BATON_BACKGROUND_DELIVERY": "on"}
TICKETS = ["Q-0", "Q-1", "Q-2", "Q-3"]
TOUCHES = 4

# Holds the registry's write lock (an open BEGIN IMMEDIATE) until a line arrives on stdin.
LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""

# Queues numbered writes in a loop, saying each one once it is acknowledged.
QUEUE_WRITER = """
import sys
from pathlib import Path
from baton.write_queue import WriteQueue
queue = WriteQueue(Path(sys.argv[1]))
n = 0
while True:
    queue.append([{"n": n, "body": "x" * 200_000}])
    print(n, flush=True)
    n += 1
"""



def stored_events(home: Path) -> list[tuple[str, str, str]]:
    """(ticket, type, body) of every stored event in the order stored, read without writing."""
    with sqlite3.connect(f"file:{home / 'registry.db'}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT task_id, type, body FROM events ORDER BY rowid").fetchall()


def queued(home: Path) -> int:
    from baton.write_queue import WriteQueue

    return len(WriteQueue(home / "registry-queue").names())


def writes_of(ticket: str) -> list[tuple[str, ...]]:
    """One agent's commands, in order: touches, a decision, an update (a full commit)."""
    commands = [("touch", "--task", ticket, f"src/{ticket}-{i}.py") for i in range(TOUCHES)]
    commands.insert(2, ("decide", "--task", ticket, f"decision of {ticket}"))
    commands.append(("update", "--task", ticket, "--done", f"step of {ticket}"))
    return commands


@pytest.mark.slow
def test_writes_while_another_process_holds_the_lock_are_queued_then_applied_once_in_order(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "Q-0")[0] == 0
    for ticket in TICKETS[1:]:
        assert cli(main, "touch", "--task", ticket, "src/first.py")[0] == 0  # each ticket exists
    before = len(stored_events(home))
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(home / "registry.db")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        held_at = time.monotonic()

        def agent(ticket: str) -> list[subprocess.CompletedProcess]:
            return [run_process(main, *command, env=ON) for command in writes_of(ticket)]

        with ThreadPoolExecutor(len(TICKETS)) as pool:
            results = [r for rs in pool.map(agent, TICKETS) for r in rs]
        for result in results:
            assert result.returncode == 0, f"{result.args}: {result.stderr}"
            assert "locked" not in result.stderr, result.stderr
        hook = {"session_id": "agent-q", "cwd": str(main), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                "tool_input": {"file_path": str(main / "src/hooked.py")}, "tool_response": {}}
        hooked = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "hook", "post-tool-use"],
                                cwd=main, input=json.dumps(hook), capture_output=True, text=True, timeout=60,
                                env={**os.environ, **ON, "PYTHONPATH": str(ROOT)})
        assert (hooked.returncode, hooked.stderr) == (0, ""), "a hook stays silent while its write is queued"

        # Nothing reached the registry; every write waits in the queue.
        assert len(stored_events(home)) == before
        assert queued(home) == len(TICKETS) * (TOUCHES + 2) + 1
        # A read during the lock sees its ticket's queued writes.
        resumed = run_process(main, "resume", "Q-0", "--json")
        assert resumed.returncode == 0, resumed.stderr
        session = json.loads(resumed.stdout)["session"]
        paths = set(session["files_touched"])
        assert {f"src/Q-0-{i}.py" for i in range(TOUCHES)} | {"src/hooked.py"} <= paths
        assert [d["text"] for d in session["decisions"]] == ["decision of Q-0"]
        listed = run_process(main, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        # Held longer than a command's whole budget for the store (BATON_STORE_TIMEOUT).
        wait_for(lambda: time.monotonic() - held_at > 2.5, 10, "the lock held past the budget")
    finally:
        holder.communicate("release\n", timeout=10)

    # The background delivery applies them once the lock is free, with no other command.
    wait_for(lambda: queued(home) == 0, 60, "the queue applied")
    events = stored_events(home)[before:]
    kinds = {"touch": "files_touched", "decide": "decision_recorded", "update": "step_completed"}
    for ticket in TICKETS:
        stored = [(kind, body["files"][0]["path"] if kind == "files_touched" else body["text"])
                  for task, kind, body in ((t, k, json.loads(b)) for t, k, b in events if t == ticket)
                  if kind in kinds.values()]
        stored = [write for write in stored if write != ("files_touched", "src/hooked.py")]
        assert stored == [(kinds[c[0]], c[-1]) for c in writes_of(ticket)], f"{ticket}: each once, in order"
    for ticket in TICKETS:
        session = json.loads(run_process(main, "resume", ticket, "--json").stdout)["session"]
        assert f"step of {ticket}" in json.dumps(session["completed_steps"])
        assert [d["text"] for d in session["decisions"]] == [f"decision of {ticket}"]


def test_a_writer_killed_while_queueing_leaves_every_acknowledged_write_readable(tmp_path):
    from baton.write_queue import UNREADABLE, WriteQueue

    directory = tmp_path / "registry-queue"
    for attempt in range(3):
        writer = subprocess.Popen([sys.executable, "-c", QUEUE_WRITER, str(directory)], stdout=subprocess.PIPE,
                                  text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        acknowledged = [int(writer.stdout.readline()) for _ in range(5 + 7 * attempt)]
        os.kill(writer.pid, signal.SIGKILL)  # most likely in the middle of the next write
        writer.wait(10)
        acknowledged += [int(line) for line in writer.stdout.read().split()]
        records = WriteQueue(directory).read()
        numbers = [entries[0]["n"] for _, entries in records]
        assert set(acknowledged) <= set(numbers), "no acknowledged write lost"
        assert all(entries[0]["body"] == "x" * 200_000 for _, entries in records)
        WriteQueue(directory).remove(name for name, _ in records)

    # A record torn some other way (a disk that lied) is set aside, never read as a write.
    queue = WriteQueue(directory)
    queue.append([{"n": "whole"}])
    queue.append([{"n": "torn"}])
    torn = directory / queue.names()[-1]
    torn.write_bytes(torn.read_bytes()[:-3])
    assert [entries for _, entries in queue.read()] == [[{"n": "whole"}]]
    assert (directory / f"{torn.name}{UNREADABLE}").exists()


def test_the_next_process_that_takes_the_lock_applies_what_waits(tmp_path):
    """No background delivery: the next write takes the queued writes first, in their order."""
    from baton import clock
    from baton.files import FileRef
    from baton.outcome import Found
    from baton.registry.sqlite import SqliteSessionStore

    ids = [str(uuid.UUID(int=n + 1)) for n in range(5)]
    path = tmp_path / "registry.db"
    writer = SqliteSessionStore(path, timeout=2, project="github.com/acme/shop")
    reader = SqliteSessionStore(path, timeout=2, project="github.com/acme/shop")
    record_touch(writer, "Q-1", "s", clock.now(), [FileRef("github.com/acme/shop", "src/first.py")], event_id=ids[0])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for n in range(1, 4):
            record_touch(writer, "Q-1", "s", clock.now(), [FileRef("github.com/acme/shop", f"src/{n}.py")],
                         event_id=ids[n])
        assert writer.kept == 3 and reader.queued() == 3
        found = reader.get("Q-1")
        assert isinstance(found, Found)
        assert sorted(t.path for t in found.value.files.values()) == ["src/1.py", "src/2.py", "src/3.py",
                                                                     "src/first.py"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    record_touch(reader, "Q-1", "s", clock.now(), [FileRef("github.com/acme/shop", "src/4.py")], event_id=ids[4])
    assert reader.queued() == 0
    with sqlite3.connect(path) as conn:
        assert [e for (e,) in conn.execute("SELECT event_id FROM events ORDER BY rowid")] == ids
    writer.close()
    reader.close()


@pytest.mark.slow
def test_a_full_disk_refuses_a_write_it_cannot_queue_and_keeps_what_was_queued(
        home, worktrees, small_disk, monkeypatch, cli):  # noqa: F811 -- the fixture imported above
    """While another process holds the lock, a touch that the full disk keeps from queueing
    exits 3 in one line and leaves nothing behind; the writes queued before stay, and are
    applied once the lock is free."""
    main, _ = worktrees
    data = small_disk(home.parent / "disk")
    monkeypatch.setenv("BATON_HOME", str(data / "home"))
    assert cli(main, "bind", "Q-0")[0] == 0
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(data / "home" / "registry.db")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run_process(main, "touch", "src/queued.py").returncode == 0
        filler = fill(data)
        refused = run_process(main, "touch", "src/refused.py")
        assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and refused.stderr.startswith("baton: "), refused.stderr
        assert all(n.endswith(".write") for n in os.listdir(data / "home" / "registry-queue")), "no temporary left"
        assert queued(data / "home") == 1
        filler.unlink()
    finally:
        holder.communicate("release\n", timeout=10)
    files = json.loads(run_process(main, "resume", "Q-0", "--json").stdout)["session"]["files_touched"]
    assert "src/queued.py" in files and "src/refused.py" not in files
    assert queued(data / "home") == 0
