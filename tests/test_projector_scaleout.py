"""Several `baton projector` processes in one consumer group share the event log: each
ticket's events are keyed by the ticket, so they sit in one partition and are applied in
order by whichever projector holds it. Agents write across many tickets while projectors
are killed with SIGKILL at random points (mid-batch, mid-repair, mid-rebalance) and others
start; once the group has committed the whole topic, every acknowledged write is in every
store exactly once and each ticket reads as one projector applying the same events into
the embedded stores makes it read."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from tests.soak import kafka_duplicates, make_worktrees, read_topic, unapplied
from tests.stores import use_servers
from tests.timing import wait_for
from tests.workspace import ROOT, run_process

PROJECTORS = 3
KILLS = 4  # while the agents write; one more while the group works through the rest
PARTITIONS = 6  # more than the projectors: a rebalance moves several partitions at a time
SHARED = [f"src/shared/s{n}.py" for n in range(4)]  # every ticket touches one: conflicts happen
CLI = [sys.executable, "-m", "baton.skills.frontends.cli"]


class Projectors:
    """`baton projector` processes of one group; killed with SIGKILL, replaced by new ones."""

    def __init__(self, cwd: Path, log: Path) -> None:
        self.cwd, self.log = cwd, log
        self.running: list[subprocess.Popen] = []
        self.killed = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.log.open("a") as out:
            process = subprocess.Popen([*CLI, "projector", "--idle", "0.1"], cwd=self.cwd, stdout=out, stderr=out,
                                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        with self.lock:
            self.running.append(process)

    def kill(self, rng: random.Random) -> None:
        with self.lock:
            alive = [p for p in self.running if p.poll() is None]
            victims = rng.sample(alive, k=min(len(alive), rng.choice((1, 1, 2))))
        for process in victims:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            self.killed += 1
        for _ in victims:
            self.start()

    def stop(self) -> None:
        with self.lock:
            for process in self.running:
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                    process.wait(30)


def baton(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    result = run_process(cwd, *args, timeout=120)
    assert result.returncode == 0, f"baton {' '.join(args)}: {result.stderr}"
    return result


def agent(n: int, worktree: Path, tickets: int, ledger: dict, rng: random.Random) -> None:
    """Bind tickets one after another; each touches two files (one shared) and records a decision."""
    for k in range(tickets):
        ticket = f"SCALE-{n}-{k}"
        baton(worktree, "bind", ticket)
        files = [f"src/agent{n}/t{k}.py", rng.choice(SHARED)]
        baton(worktree, "touch", *files)
        text = f"ticket {ticket} keeps its totals in {uuid.uuid4().hex[:8]}"
        baton(worktree, "decide", text)
        ledger[ticket] = {"files": sorted(files), "decisions": [text]}


def delivered(cwd: Path) -> bool:
    return run_process(cwd, "deliver").returncode == 0


def rows(cwd: Path, env: dict | None = None) -> dict[str, dict]:
    """`baton list --all --json` by ticket, without what this machine's heartbeats decide."""
    if env is None:
        out = baton(cwd, "list", "--all", "--json").stdout
    else:
        out = subprocess.run([*CLI, "list", "--all", "--json"], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=120, check=True).stdout
    return {row["task_id"]: {k: v for k, v in row.items() if k != "interrupted"} for row in json.loads(out)}


@pytest.mark.servers
def test_projectors_killed_mid_batch_lose_and_double_nothing(request, home, monkeypatch, tmp_path):
    scale_out(request, monkeypatch, tmp_path, agents=3, tickets=2, seed=46)


@pytest.mark.slow
@pytest.mark.servers
def test_more_agents_and_more_kills(request, home, monkeypatch, tmp_path):
    scale_out(request, monkeypatch, tmp_path, agents=6, tickets=4, seed=47)


def scale_out(request, monkeypatch, tmp_path: Path, *, agents: int, tickets: int, seed: int) -> None:
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    monkeypatch.setenv("BATON_KAFKA_PARTITIONS", str(PARTITIONS))
    prefix = os.environ["BATON_KAFKA_TOPIC_PREFIX"]
    from confluent_kafka import Consumer

    from baton.registry.kafka import EVENTS_TOPIC
    from baton.skills.services.projector import default_group

    topic, group = f"{prefix}{EVENTS_TOPIC}", default_group(prefix)
    trees = make_worktrees(tmp_path / "agents", agents)
    rng = random.Random(seed)
    projectors = Projectors(trees[0], tmp_path / "projectors.log")
    ledger: dict[str, dict] = {}
    writing = threading.Event()
    writing.set()

    def chaos() -> None:
        """Deliver what the agents kept, and kill one or two projectors at random moments."""
        while writing.is_set():
            run_process(trees[0], "deliver")
            if projectors.killed < KILLS:
                time.sleep(rng.uniform(0.2, 2.0))  # a random point to kill at, not a wait for a state
                projectors.kill(rng)

    try:
        for _ in range(PROJECTORS):
            projectors.start()
        threads = [threading.Thread(target=agent, args=(n, trees[n], tickets, ledger, random.Random(rng.random())))
                   for n in range(agents)]
        killer = threading.Thread(target=chaos)
        for thread in [*threads, killer]:
            thread.start()
        for thread in threads:
            thread.join()
        writing.clear()
        killer.join()
        wait_for(lambda: delivered(trees[0]), timeout=60, what="every kept event on Kafka")
        projectors.kill(rng)  # while the group works through what is left
        reader = Consumer({"bootstrap.servers": os.environ["BATON_KAFKA_BOOTSTRAP"], "group.id": group})
        try:
            wait_for(lambda: unapplied(reader, topic) == 0, timeout=120, what="the group committing the whole topic")
        finally:
            reader.close()
    finally:
        projectors.stop()
    # The signals of the last batches, kept for Kafka after their commit: a projector stopped
    # while sending them left them in the data home's outbox.
    wait_for(lambda: delivered(trees[0]), timeout=60, what="every kept signal on Kafka")
    assert projectors.killed >= 2 and len(ledger) == agents * tickets

    # Every store holds each acknowledged write exactly once: the registry, the graph, the
    # recall queue, the signal log; each bind is one run.
    from baton.outcome import Found
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    monkeypatch.chdir(trees[0])  # the agents' project
    stores = Stores(Settings.from_env())
    try:
        for ticket, wrote in ledger.items():
            found = stores.registry.get(ticket)
            assert isinstance(found, Found), f"{ticket}: {found}"
            assert [d.text for d in found.value.decisions] == wrote["decisions"], ticket
            assert sorted(t.path for t in found.value.files.values()) == wrote["files"], ticket
        held = stores.graph.held(sorted(ledger))
        assert isinstance(held, Found)
        assert {t: len(files) for t, (_, files) in held.value.items()} == dict.fromkeys(ledger, 2)
        assert stores.embedding_queue.count() == len(ledger), "each decision queued for recall once"
    finally:
        stores.close()
    served = rows(trees[0])
    assert {t: served[t]["runs"] for t in ledger} == dict.fromkeys(ledger, 1)
    read = json.loads(baton(trees[0], "signals", "--limit", "1000", "--json").stdout)
    assert len({s["signal_id"] for s in read}) == len(read), "a signal read twice"
    signalled = {frozenset((s["task_id"], s["payload"]["related_task_id"])) for s in read
                 if s["signal_type"] == "conflict_detected"}
    assert signalled == {frozenset((a, b)) for a in ledger for b in ledger
                         if a < b and set(ledger[a]["files"]) & set(ledger[b]["files"])}
    assert kafka_duplicates(dict(os.environ))["duplicate events"] == 0

    # Each ticket's events sit in one partition and reached the registry in their order
    # there: the PostgreSQL transaction that inserted one (xmin) never precedes an earlier one's.
    import psycopg

    placed = defaultdict(list)
    for message in read_topic(os.environ["BATON_KAFKA_BOOTSTRAP"], topic):
        placed[message.key()].append((message.partition(), message.offset(), json.loads(message.value())["event_id"]))
    with psycopg.connect(os.environ["BATON_DATABASE_URL"]) as conn:
        inserted_by = dict(conn.execute("SELECT event_id::text, xmin::text::bigint FROM baton_events").fetchall())
    assert len(placed) >= len(ledger) and sum(map(len, placed.values())) == len(inserted_by)
    for key, events in placed.items():
        assert len({partition for partition, _, _ in events}) == 1, f"{key!r}: its events in several partitions"
        order = [inserted_by[event_id] for _, _, event_id in sorted(events)]
        assert order == sorted(order), f"{key!r}: its events applied out of their order"

    # One projector, in a group of its own, applies the same events into the embedded stores:
    # each ticket reads the same there, its kept conflict counts included.
    single = {k: v for k, v in os.environ.items() if k not in ("BATON_DATABASE_URL", "BATON_GRAPH_URL")}
    single |= {"BATON_HOME": str(tmp_path / "single"), "BATON_RESIDENT": "off", "PYTHONPATH": str(ROOT)}
    once = subprocess.run([*CLI, "projector", "--once", "--group", f"single-{uuid.uuid4().hex[:8]}"], cwd=trees[0],
                          env=single, capture_output=True, text=True, timeout=120)
    assert once.returncode == 0, once.stderr
    alone = rows(trees[0], single)
    assert {t: served[t] for t in ledger} == {t: alone[t] for t in ledger}
