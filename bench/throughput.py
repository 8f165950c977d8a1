"""Throughput on the servers, each beside a floor measured in the same run (bench/servers.py
prints them): delivery of the event outbox into Kafka against a raw confluent-kafka
producer sending the same bytes, and the projector into PostgreSQL, the Bolt server and the
recall queue against a raw executemany insert of the same events into PostgreSQL. Runs of
Baton and of its floor alternate, so a busy machine slows both alike.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.skills.services.projector import ProjectorReport
    from tests.servers.kafka import KafkaServer
    from tests.servers.neo4j import Neo4jServer
    from tests.servers.postgres import PostgresServer

TICKETS = 100  # tickets a load's events belong to, as many agents editing at once
OWN_FILES = 50  # paths each ticket's touches are drawn from
SHARED_FILES = 20  # paths every ticket may touch (one touch in fifty): some tickets overlap and are signalled


@dataclass
class Rate:
    """Events per second of Baton and of its floor, run by run; for the projector, also the
    seconds of each run's start-up repair, which its rate leaves out."""

    baton: list[float]
    floor: list[float]
    repair: list[float] = field(default_factory=list)

    def line(self, name: str, floor: str, count: int) -> str:
        ours, raw = statistics.median(self.baton), statistics.median(self.floor)
        repair = (f"; its start-up repair, left out of its rate: {statistics.median(self.repair):.2f} s "
                  f"(runs {min(self.repair):.2f}-{max(self.repair):.2f} s)" if self.repair else "")
        return (f"{name}: {ours:,.0f} events/s (median of {len(self.baton)} runs of {count:,} events; "
                f"runs {min(self.baton):,.0f}-{max(self.baton):,.0f}); {floor}: {raw:,.0f} events/s; "
                f"ratio {raw / ours:.2f}x{repair}")


def load_events(run: str, count: int, repo: str | None = None) -> list[tuple[str, str, str]]:
    """(event id, ticket, JSON) of `count` registry events as agents' hooks keep them: each
    ticket's bind, then touches of three files, one event in twenty a decision and one in
    twenty a next action. Tickets and (unless given) their repository are new in each run
    (`run` names them), so runs do not overlap each other."""
    from baton import clock
    from baton.registry.wire import event_body, files_touched_body

    rng = random.Random(run)
    started = clock.now() - timedelta(hours=1)
    events = []
    repo = repo or f"github.com/acme/load-{run}"
    for n in range(count):
        task, at, event_id = f"LOAD-{run}-{n % TICKETS}", started + timedelta(milliseconds=n), str(uuid.uuid4())
        if n < TICKETS:
            body = event_body("bound", event_id=event_id, task_id=task, session_id="bench", at=at, agent="bench",
                              repo=repo, worktree_path=f"/w/{task}", branch=task, reopens=False)
        elif n % 20 == 0:
            body = event_body("decision_recorded", event_id=event_id, task_id=task, session_id="bench", at=at,
                              text=f"decision {n} of {run}: keep carts in PostgreSQL, with one row per cart",
                              context="", repo=repo, inherited_from=None, replaces=[])
        elif n % 20 == 1:
            body = event_body("next_action_set", event_id=event_id, task_id=task, session_id="bench", at=at,
                              text=f"step {n}")
        else:
            from baton.files import FileRef

            paths = [f"src/{task}/m{rng.randrange(OWN_FILES)}.py" for _ in range(3)]
            if rng.randrange(50) == 0:
                paths[0] = f"src/shared/m{rng.randrange(SHARED_FILES)}.py"
            body = files_touched_body(event_id, task, "bench", at, [FileRef(repo, path) for path in paths])
        events.append((event_id, task, body))
    return events


def _kept(path: Path, events: list[tuple[str, str, str]]) -> None:
    from baton.outbox import Outbox

    outbox = Outbox(path, earlier="kafka", timeout=30, store="bench outbox")
    outbox.keep(events)
    outbox.close()


def delivery_rates(root: Path, bootstrap: str, count: int, runs: int) -> Rate:
    """Baton's delivery of an outbox of `count` events into Kafka (a new KafkaEventLog each
    run: its producer and the idempotent producer's handshake included) against a raw
    idempotent producer sending the same keys and bodies."""
    from confluent_kafka import Producer

    from baton.registry.kafka import KafkaEventLog

    topic = "bench-delivery.session-events.v1"
    rate = Rate([], [])
    for run in range(runs + 1):  # the first creates the topic and warms both
        events = load_events(f"d{run}-{uuid.uuid4().hex[:6]}", count)
        path = root / f"delivery-{run}.db"
        _kept(path, events)
        log = KafkaEventLog(bootstrap, path, timeout=60, topic=topic)
        started = time.perf_counter()
        log.deliver()
        baton_seconds = time.perf_counter() - started
        assert log.waiting() == 0
        log.close()

        started = time.perf_counter()
        producer = Producer({"bootstrap.servers": bootstrap, **RAW_PRODUCER})
        for _, key, body in events:
            while True:
                try:
                    producer.produce(topic, key=key.encode(), value=body.encode())
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(60) == 0
        raw_seconds = time.perf_counter() - started
        if run:
            rate.baton.append(count / baton_seconds)
            rate.floor.append(count / raw_seconds)
    return rate


# The floor's producer: Baton's guarantees (idempotent, acknowledged by every replica), batched.
RAW_PRODUCER = {"enable.idempotence": True, "acks": "all", "linger.ms": 5}

_FLOOR_TABLE = """
    CREATE TABLE IF NOT EXISTS bench_floor_events (
        event_id uuid PRIMARY KEY, task_id text NOT NULL, at timestamptz NOT NULL, type text NOT NULL,
        body jsonb NOT NULL)
"""


def _project(stores, *, warm_up: bool) -> ProjectorReport:
    """A catch-up run of the projector; returns its report. The warm-up run starts again
    after a failure (a new broker's group coordinator not ready yet, a store past its
    budget on a busy machine) from the offsets committed so far, so its count holds only
    its last attempt's events."""
    from baton.errors import StoreUnavailable
    from baton.skills.services.projector import run_projector

    deadline = time.monotonic() + 60
    while True:
        try:
            return run_projector(stores, once=True, log=lambda _message: None)
        except StoreUnavailable:
            if not warm_up or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def projector_run(root: Path, settings, count: int, name: str, *, warm_up: bool = False,
                  around: Callable[[Callable[[], ProjectorReport]], ProjectorReport] | None = None
                  ) -> tuple[list[tuple[str, str, str]], float, float]:
    """The events of one run, delivered to a topic of their own, the seconds the projector
    took to apply them in process (a new Stores: its connections and its consumer's join
    included) but for its start-up repair, and that repair's seconds. The repair compares
    the stores with the registry over the repair window once per start, as many tickets
    as the window holds (the earlier runs' too), whatever the events: a cost of the start,
    not of the events. around: runs the projector (a profiler, say) and returns what it returns."""
    from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.stores import Stores

    prefix = f"bench-{name}-{uuid.uuid4().hex[:6]}."
    events = load_events(prefix.rstrip("."), count)
    path = root / f"projector-{name}.db"
    _kept(path, events)
    log = KafkaEventLog(settings.kafka_bootstrap, path, timeout=60, topic=f"{prefix}{EVENTS_TOPIC}")
    log.deliver()
    log.close()

    stores = Stores(settings._replace(kafka_topic_prefix=prefix, background_indexing=False), skip_known_down=False,
                    projection=apply_events)
    stores.deliver_on_close = False
    started = time.perf_counter()
    report = (around or (lambda work: work()))(lambda: _project(stores, warm_up=warm_up))
    seconds = time.perf_counter() - started
    assert warm_up or report.events == count, f"{report.events} of {count} events applied"
    stores.close()
    return events, seconds - report.repair_seconds, report.repair_seconds


def projector_rates(root: Path, settings, count: int, runs: int) -> Rate:
    """The projector applying `count` new events (delivered to a topic of their own before
    it starts) to PostgreSQL, the Bolt server and the recall queue, in process (a new
    Stores each run: its connections included; its start-up repair timed on its own, see
    projector_run), against a raw executemany insert of the same events into a table
    shaped as the registry's event table. The decisions it queues are embedded by the
    indexer, in a process of its own: not timed here."""
    import json

    import psycopg

    rate = Rate([], [])
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        conn.execute(_FLOOR_TABLE)
    for run in range(runs + 1):  # the first warms the servers' caches
        events, baton_seconds, repair_seconds = projector_run(root, settings, count, f"p{run}", warm_up=run == 0)
        rows = []
        for event_id, task, body in events:
            fields = json.loads(body)
            rows.append((event_id, task, fields["at"], fields["type"], body))
        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            conn.execute("TRUNCATE bench_floor_events")
            started = time.perf_counter()
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany("INSERT INTO bench_floor_events (event_id, task_id, at, type, body) "
                                   "VALUES (%s, %s, %s, %s, %s::jsonb)", rows)
            raw_seconds = time.perf_counter() - started
        if run:
            rate.baton.append(count / baton_seconds)
            rate.floor.append(count / raw_seconds)
            rate.repair.append(repair_seconds)
    return rate


@contextmanager
def fresh_servers(name: str) -> Iterator[tuple[Path, PostgresServer, Neo4jServer, KafkaServer]]:
    """PostgreSQL, Neo4j and Kafka started afresh on loopback (the time they took printed),
    and a scratch directory: (scratch, postgres, neo4j, kafka). Every server is destroyed
    afterwards, whatever happened."""
    from tests.servers.kafka import KafkaServer
    from tests.servers.neo4j import Neo4jServer
    from tests.servers.postgres import PostgresServer

    servers = [PostgresServer(), Neo4jServer(), KafkaServer()]
    try:
        started = time.perf_counter()
        postgres, neo4j, kafka = (server.start() for server in servers)
        print(f"servers started in {time.perf_counter() - started:.1f} s")
        with tempfile.TemporaryDirectory(prefix=f"baton-bench-{name}-") as scratch:
            yield Path(scratch), postgres, neo4j, kafka
    finally:
        for server in servers:
            server.destroy()
