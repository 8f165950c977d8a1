"""The projector counts an event as applied only once every store took it: a graph whose
transaction timed out (here, waiting for a lock another Bolt session holds) is written
again until it takes the batch, and no offset passes it meanwhile. `baton doctor --repair`
puts back what a store lost behind Baton's back."""

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from tests.stores import use_servers
from tests.timing import wait_for
from tests.workspace import ROOT, run_process


@pytest.fixture
def servers_home(request, home, monkeypatch, tmp_path):
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    # What is tested is what the projector and the repair do, not the budget: on a busy
    # machine a command's imports and connections alone outlasted conftest's 2 s.
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "10")
    return home


def baton(cwd, *args, env=None):
    result = run_process(cwd, *args, env=env)
    assert result.returncode in (0, 3), result.stderr
    return result


def graph_files(neo4j_server, ticket: str) -> set[str]:
    """The paths the graph holds as touched by the ticket (its id qualified by its project)."""
    import neo4j

    with neo4j.GraphDatabase.driver(neo4j_server.address, auth=neo4j_server.auth) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (t:Task)-[:TOUCHES]->(f:File) WHERE t.task_id ENDS WITH $ticket RETURN f.path AS path",
            ticket=f"\x1f{ticket}")
    return {r["path"] for r in records}


def test_a_graph_transaction_that_times_out_is_applied_again(servers_home, worktrees, neo4j_server, tmp_path):
    import neo4j

    main, second = worktrees
    one, two = f"LOCK-{uuid.uuid4().hex[:6]}", f"LOCK-{uuid.uuid4().hex[:6]}"
    baton(main, "bind", one)
    baton(second, "bind", two)
    wait_for(lambda: baton(main, "projector", "--once").returncode == 0, timeout=120, what="the binds applied")
    paths = [f"src/locked{n}.py" for n in range(5)]
    for path in paths:
        baton(main, "touch", path)
        baton(second, "touch", path)

    log = tmp_path / "projector.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BATON_STORE_TIMEOUT": "1"}
    with neo4j.GraphDatabase.driver(neo4j_server.address, auth=neo4j_server.auth) as driver, \
            driver.session() as holder:
        # A write lock on both tickets' nodes, held past the projector's transaction timeout.
        locker = holder.begin_transaction()
        locked = locker.run("MATCH (t:Task) WHERE t.task_id ENDS WITH $one OR t.task_id ENDS WITH $two "
                            "SET t.held = true RETURN count(t) AS n", one=f"\x1f{one}", two=f"\x1f{two}").single()
        assert locked["n"] == 2
        with log.open("w") as stderr:
            daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector",
                                       "--idle", "0.1"], cwd=main, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        try:
            wait_for(lambda: "conflict graph unavailable" in log.read_text(), timeout=60,
                     what="the projector's graph write timing out on the lock")
            locker.rollback()
            wait_for(lambda: graph_files(neo4j_server, one) == set(paths) == graph_files(neo4j_server, two),
                     timeout=60, what="every acknowledged touch in the graph")
            # The overlap was signalled once the graph took the touches; a read that found Kafka
            # busy (exit 3, the signal log unavailable) is asked again.
            def signalled() -> bool:
                read = baton(main, "signals", "--task", one, "--json")
                return read.returncode == 0 and any(s["signal_type"] == "conflict_detected"
                                                    for s in json.loads(read.stdout))

            wait_for(signalled, timeout=60, what="the conflict signal")
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    assert "conflict graph is back" in log.read_text()


def test_a_projector_rides_out_a_bolt_server_that_stops_answering(servers_home, worktrees, neo4j_server, tmp_path):
    """Paused after the projector wrote to it (a JVM pause, a frozen host), the Bolt server
    costs the projector its budget: it says the graph is unavailable instead of waiting on
    the driver's socket for ever, and once the server goes on, the touch kept meanwhile
    reaches it."""
    main, _ = worktrees
    ticket = f"STALL-{uuid.uuid4().hex[:6]}"
    baton(main, "bind", ticket)
    baton(main, "touch", "src/before.py")
    log = tmp_path / "projector.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BATON_STORE_TIMEOUT": "2"}
    with log.open("w") as stderr:
        daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.1"],
                                  cwd=main, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        wait_for(lambda: graph_files(neo4j_server, ticket) == {"src/before.py"}, timeout=120,
                 what="the first touch in the graph")
        neo4j_server.pause()
        try:
            # As users run it: the touch's own background delivery takes it to Kafka (the
            # tests switch that off, and the projector delivers kept writes only after a
            # batch, so the touch would wait in the outbox whenever its first batch was done).
            baton(main, "touch", "src/during.py", env={"BATON_BACKGROUND_DELIVERY": "on"})
            try:
                wait_for(lambda: "conflict graph unavailable" in log.read_text(), timeout=60,
                         what="the projector saying the paused graph is unavailable")
            except TimeoutError as exc:
                raise AssertionError(f"{exc}; the projector logged:\n{log.read_text()}") from None
        finally:
            neo4j_server.resume()
        wait_for(lambda: graph_files(neo4j_server, ticket) == {"src/before.py", "src/during.py"}, timeout=120,
                 what="the touch kept during the pause in the graph")
        assert daemon.poll() is None, log.read_text()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)


def test_doctor_repair_puts_back_graph_rows_deleted_behind_batons_back(servers_home, worktrees, neo4j_server):
    import neo4j

    main, second = worktrees
    one, two = f"REP-{uuid.uuid4().hex[:6]}", f"REP-{uuid.uuid4().hex[:6]}"
    baton(main, "bind", one)
    baton(main, "touch", "src/a.py", "src/b.py")
    baton(second, "bind", two)
    baton(second, "touch", "src/b.py")
    wait_for(lambda: baton(main, "projector", "--once").returncode == 0, timeout=120, what="the events applied")
    assert graph_files(neo4j_server, one) == {"src/a.py", "src/b.py"}

    with neo4j.GraphDatabase.driver(neo4j_server.address, auth=neo4j_server.auth) as driver:
        driver.execute_query("MATCH (t:Task)-[r:TOUCHES]->() WHERE t.task_id ENDS WITH $one DELETE r",
                             one=f"\x1f{one}")
        driver.execute_query("MATCH (t:Task) WHERE t.task_id ENDS WITH $two DETACH DELETE t", two=f"\x1f{two}")
    assert graph_files(neo4j_server, one) == set() == graph_files(neo4j_server, two)

    repaired = run_process(main, "doctor", "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)["repair"]
    assert report["graph"] == {"tickets": 2, "files": 3, "statuses": 0, "recounted": 0}
    assert report["signals"] == {"conflicts": 0}, "the overlap was signalled already: not again"
    assert graph_files(neo4j_server, one) == {"src/a.py", "src/b.py"} and graph_files(neo4j_server, two) == {
        "src/b.py"}
    listed = {row["task_id"]: row for row in json.loads(baton(main, "list", "--json").stdout)}
    assert listed[one]["conflicts_with"] == [two]

    again = json.loads(run_process(main, "doctor", "--repair", "--json").stdout)["repair"]
    assert again["graph"]["tickets"] == 0, "nothing left to repair"
    text = run_process(main, "doctor", "--repair", "--window", "1h").stdout
    assert "repaired over the last 1 h (2 tickets): graph 0 tickets" in text


def test_doctor_repair_on_the_embedded_graph(home, worktrees):
    """The same repair with every store embedded: touches deleted from graph.db come back."""
    import sqlite3

    main, _ = worktrees
    baton(main, "bind", "EMB-1")
    baton(main, "touch", "src/a.py", "src/b.py")
    with sqlite3.connect(home / "graph.db") as conn:
        assert conn.execute("DELETE FROM touches WHERE task_id LIKE '%EMB-1'").rowcount == 2
    repaired = run_process(main, "doctor", "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["repair"]["graph"] == {"tickets": 1, "files": 2, "statuses": 0,
                                                              "recounted": 0}
    with sqlite3.connect(home / "graph.db") as conn:
        paths = {path for (path,) in conn.execute("SELECT path FROM touches WHERE task_id LIKE '%EMB-1'")}
    assert paths == {"src/a.py", "src/b.py"}
    assert run_process(main, "doctor", "--repair", "--window", "0").returncode == 2, "a window must be positive"


def test_doctor_repair_counts_the_conflicts_of_a_graph_from_before_the_kept_counts(home, worktrees):
    """A graph whose counts are not kept (one from before them) lists as before, counting
    as it reads; `baton doctor --repair` counts it once, and the list then reads the kept counts."""
    import sqlite3

    main, other = worktrees
    for worktree, ticket in ((main, "OLD-1"), (other, "OLD-2")):
        baton(worktree, "bind", ticket)
        baton(worktree, "touch", "src/shared.py")
    with sqlite3.connect(home / "graph.db") as conn:
        conn.execute("UPDATE counts SET counted = 0")
        conn.execute("UPDATE tasks SET shared_files = 0, sharers = 0")
    rows = {row["task_id"]: row["conflicting_tickets"] for row in json.loads(baton(main, "list", "--json").stdout)}
    assert rows == {"OLD-1": 1, "OLD-2": 1}
    repaired = run_process(main, "doctor", "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["repair"]["graph"]["recounted"] == 2
    with sqlite3.connect(home / "graph.db") as conn:
        assert conn.execute("SELECT counted FROM counts").fetchone() == (1,)
        assert sorted(conn.execute("SELECT shared_files, sharers FROM tasks")) == [(1, 1), (1, 1)]
    again = run_process(main, "doctor", "--repair", "--json")
    assert json.loads(again.stdout)["repair"]["graph"]["recounted"] == 0


def test_a_repair_over_more_tickets_than_a_chunk_repairs_each_reading_a_chunk_at_a_time(any_home, monkeypatch,
                                                                                        tmp_path):
    """Seven tickets the graph, recall and the signal log never heard of, repaired three at a
    time: every ticket in the graph, every decision queued, every pair of tickets sharing a
    file signalled once by its deterministic id (pairs across chunks too, and not the pair
    signalled before the repair, on Kafka by another machine), the registry asked for three
    sessions at most at once, the signal log read once (on Kafka one pass over the topic, not
    one a chunk), and the ticket older than the window not read."""
    from datetime import timedelta
    from itertools import combinations

    from baton import clock, kafka_outbox
    from baton.files import FileRef
    from baton.graph.conflicts import conflict_signal_id
    from baton.registry.model import Bound, DecisionRecorded, FilesTouched
    from baton.signals.kafka import KafkaSignalBus
    from baton.signals.model import Signal, SignalPayload, SignalType
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services import repair as repairing

    monkeypatch.setattr(repairing, "CHUNK", 3)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "60")  # the chunks are tested, not the budget of a busy machine
    repo = f"github.com/acme/chunks-{uuid.uuid4().hex[:6]}"
    shared, now = FileRef(repo, "src/db.py"), clock.now()
    stores = Stores(Settings.from_env(), project=repo, projection=apply_events)
    try:
        for n, age in [(n, timedelta(minutes=n)) for n in range(7)] + [(7, timedelta(days=2))]:
            common = {"task_id": f"CH-{n}", "session_id": "s", "at": now - age}
            stores.registry.append([Bound(event_id=uuid.uuid4(), repo=repo, worktree_path=f"/w/{n}", **common),
                                    FilesTouched(event_id=uuid.uuid4(), files=[shared, FileRef(repo, f"src/{n}.py")],
                                                 **common),
                                    DecisionRecorded(event_id=uuid.uuid4(), text=f"keep {n} apart", repo=repo,
                                                     **common)])
        # CH-1 and CH-5 (two chunks apart) were signalled before the repair.
        before = Signal(signal_id=conflict_signal_id("CH-1", "CH-5", [shared.key]),
                        signal_type=SignalType.conflict_detected, task_id="CH-5", session_id="s", repo=repo,
                        emitted_at=now, payload=SignalPayload(file_paths=[shared.path], related_task_id="CH-1"))
        if isinstance(stores.signals, KafkaSignalBus):  # another machine's: on the topic, not in this outbox
            other = KafkaSignalBus(stores.signals.bootstrap, tmp_path / "other-outbox.db", timeout=60, project=repo,
                                   topic=stores.signals.topic)
            other.publish([before])
            other.deliver()
            other.close()
        else:
            stores.signals.publish([before])
        asked: list[int] = []
        get_many = type(stores.registry).get_many
        monkeypatch.setattr(type(stores.registry), "get_many",
                            lambda self, task_ids: asked.append(len(task_ids)) or get_many(self, task_ids))
        reads: list[str] = []

        def counting(name: str, read):
            def counted(*args, **kwargs):
                reads.append(name)
                return read(*args, **kwargs)
            return counted

        for owner, name in [(type(stores.signals), "conflict_pairs"), (type(stores.signals), "concerning"),
                            (type(stores.signals), "recent"), (kafka_outbox, "messages_since")]:
            monkeypatch.setattr(owner, name, counting(name, getattr(owner, name)))
        report = repairing.repair(stores)
        assert not report.warnings
        assert (report.tickets, report.graph_tickets, report.graph_files, report.decisions, report.signals) == (
            7, 7, 14, 7, 20)
        # Pages of three; a read takes one session, then up to twice as many while they hold few entries.
        assert asked == [1, 2, 3, 2], asked
        passes = ["messages_since"] if isinstance(stores.signals, KafkaSignalBus) else []
        assert reads == ["conflict_pairs", *passes], "the signal log read once for four chunks"
        assert stores.graph.held_counts(["CH-7"]).value == {}, "older than the window: not repaired"
        signals = stores.signals.recent(task_id=None, after=now - timedelta(hours=1), limit=100).value
        tickets = [f"CH-{n}" for n in range(7)]
        assert sorted(str(s.signal_id) for s in signals) == sorted(
            conflict_signal_id(a, b, [shared.key]) for a, b in combinations(tickets, 2))
        again = repairing.repair(stores)
        assert (again.tickets, again.repaired) == (7, 0), "nothing left to repair"
    finally:
        stores.close()


def test_a_repair_reads_sessions_with_long_histories_a_few_at_a_time(any_home, monkeypatch):
    """Its memory follows ENTRIES, not what the sessions hold: ten tickets of 1 entry and then
    ten of 12, with ENTRIES at 10. The reads double while the short ones come; once a read
    meets the long histories, every later read takes one session; every ticket is still
    repaired (the graph and recall hear of each)."""
    from datetime import timedelta

    from baton import clock
    from baton.files import FileRef
    from baton.registry.model import Bound, DecisionRecorded, FilesTouched
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services import repair as repairing

    monkeypatch.setattr(repairing, "ENTRIES", 10)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "60")
    repo, now = f"github.com/acme/long-{uuid.uuid4().hex[:6]}", clock.now()
    stores = Stores(Settings.from_env(), project=repo, projection=apply_events)
    try:
        # Newest first in the registry's order: the ten short ones, then the ten long ones.
        for n in range(20):
            common = {"task_id": f"LH-{n}", "session_id": "s", "at": now - timedelta(minutes=n)}
            files = [FileRef(repo, f"src/{n}/{k}.py") for k in range(1 if n < 10 else 11)]
            stores.registry.append([Bound(event_id=uuid.uuid4(), repo=repo, worktree_path=f"/w/{n}", **common),
                                    FilesTouched(event_id=uuid.uuid4(), files=files, **common),
                                    *([DecisionRecorded(event_id=uuid.uuid4(), text=f"long {n}", repo=repo, **common)]
                                      if n >= 10 else [])])
        asked: list[list[str]] = []
        get_many = type(stores.registry).get_many
        monkeypatch.setattr(type(stores.registry), "get_many",
                            lambda self, task_ids: asked.append(list(task_ids)) or get_many(self, task_ids))
        report = repairing.repair(stores)
        assert not report.warnings
        assert (report.tickets, report.graph_tickets, report.graph_files, report.decisions) == (20, 20, 120, 10)
        assert [len(read) for read in asked] == [1, 2, 4, 8, 1, 1, 1, 1, 1], asked
        assert sorted(t for read in asked for t in read) == sorted(f"LH-{n}" for n in range(20))
    finally:
        stores.close()
