"""Baton's figures on the production servers: PostgreSQL, the Bolt server (Neo4j), Kafka.

Starts each server natively (tests/servers), builds 1,000 active sessions of 20 files in
PostgreSQL and the graph and 100,000 decisions in the recall index, then prints medians
and spreads of:
  - a hook's write (`baton touch`, fresh process) with Kafka up: median and p99,
  - events per second kept by the hook path, delivered into Kafka (floor: a raw
    confluent-kafka producer sending the same bytes) and applied by the projector to the
    registry, the graph and the recall queue (floor: a raw executemany insert of the same
    events into PostgreSQL), from bench/throughput.py,
  - resume_session in-process, warm, whole and in parts: its reads of the stores (target: at
    most 25 ms; floor: a raw PostgreSQL primary-key read) and its live checks (beside the
    toolchains' `--version` alone), and each part's own cost; and `baton resume` as a fresh
    process, through the resident process as an agent runs it (target: at most 400 ms) and
    without it (floor: `python -c pass`).
No Qdrant server can be installed here: recall runs on the embedded index in this bench.

    .venv/bin/python -m bench.servers [--sessions 1000] [--decisions 100000] [--repeat 30]
        [--events 5000] [--runs 5]
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.common import BATON, CLI, ROOT, fresh_runs, scratch_worktree, spread
from bench.run import (
    BENCH_DECISIONS,
    BENCH_TASK,
    PROJECT,
    bench_arguments,
    build_decisions,
    time_lookups,
    warm_resume_costs,
    warm_resume_rows,
)
from bench.throughput import delivery_rates, fresh_servers, projector_rates


def build_server_sessions(sessions: int) -> None:
    """Sessions through the projection step, as the projector would write them."""
    import random
    from datetime import timedelta

    from baton import clock
    from baton.files import FileRef
    from baton.registry.model import Bound, FilesTouched
    from baton.skills.core.commit import apply_events
    from baton.skills.core.projection import project
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    rng = random.Random(sessions)
    # The bench worktree's project, not this directory's.
    stores = Stores(Settings.from_env(), project=PROJECT, projection=apply_events)
    now = clock.now()
    try:
        for n in range(sessions):
            task = f"T-{n}"
            at = now - timedelta(minutes=rng.randint(1, 60 * 48))
            files = [FileRef(PROJECT, f"src/m{rng.randrange(20_000)}.py") for _ in range(20)]
            common = {"task_id": task, "session_id": "bench", "at": at}
            stores.budget.renew()  # each session is a command's worth of server time
            project(stores,
                    [Bound(event_id=uuid.uuid4(), repo=PROJECT, worktree_path=f"/w/{task}", **common),
                             FilesTouched(event_id=uuid.uuid4(), files=files, **common)])
    finally:
        stores.close()


def produce_touches(worktree: Path, count: int) -> tuple[int, float]:
    """The CLI's touch path, called in one process: records each touch and produces its event."""
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import ActiveTask
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.touch import touch

    # The bench worktree's project, not this directory's.

    stores = Stores(Settings.from_env(), project=PROJECT, projection=apply_events)
    locator = WorktreeLocator()
    tasks = [ActiveTask(f"LOAD-{n}", "bench", "bench") for n in range(100)]  # 20 files each, as in the data set
    touch(stores, tasks[0], ["src/warm-up.py"], worktree, locator)
    started = time.perf_counter()
    for n in range(count):
        touch(stores, tasks[n % len(tasks)], [f"src/load/{n}.py"], worktree, locator)
    seconds = time.perf_counter() - started
    stores.close()
    return count, seconds


def waiting_in_outbox(home: Path) -> int:
    """Events kept for Kafka, read without delivering them."""
    with sqlite3.connect(f"file:{home / 'kafka-events-outbox.db'}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM outbox").fetchone()[0]


def wait_for_idle_delivery(home: Path, timeout: float = 60) -> None:
    """Until the background delivery a touch started has drained the outbox and exited."""
    from baton.skills.runtime.delivery import delivery_running

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not delivery_running(home) and waiting_in_outbox(home) == 0:
            return
        time.sleep(0.01)
    raise RuntimeError(f"the background delivery did not finish within {timeout} s")


def touch_until_acknowledged(command: list[str], cwd: Path, env: dict, home: Path, repeat: int) -> list[float]:
    """From a hook's touch until Kafka acknowledged its event: the touch, then the delivery
    it starts in a new process (imports, connection, the idempotent producer's handshake)."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
        while waiting_in_outbox(home):
            time.sleep(0.005)
        samples.append((time.perf_counter() - started) * 1000)
        wait_for_idle_delivery(home)
    return samples


def resume_runs(command: list[str], cwd: Path, env: dict, home: Path, repeat: int) -> list[float]:
    """Fresh resumes, each timed alone: the background delivery of its bind runs after it."""
    samples = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
        samples.append((time.perf_counter() - started) * 1000)
        wait_for_idle_delivery(home)
    return samples[1:]  # the first warms the page cache


def primary_key_reads(url: str, repeat: int, task: str = BENCH_TASK) -> list[float]:
    """A session row read by its key over an open connection: the floor of a warm resume."""
    import psycopg

    samples = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT body FROM baton_sessions WHERE task_id = %s", (task,)).fetchone()
        for _ in range(repeat):
            began = time.perf_counter()
            conn.execute("SELECT body FROM baton_sessions WHERE task_id = %s", (task,)).fetchone()
            samples.append((time.perf_counter() - began) * 1000)
    return samples


def bolt_conflict_lookup(uri: str, counts: list[int], repeat: int) -> dict[int, list[float]]:
    """One ticket's conflict lookup on the Bolt server at each number of sessions; the path
    pool grows with the sessions, so a file has the same expected number of sharers."""
    import random

    import neo4j

    from baton import clock
    from baton.files import FileRef
    from baton.graph.bolt import BoltConflictGraph, _split_credentials

    results = {}
    for sessions in counts:
        address, auth = _split_credentials(uri)  # the test Neo4j runs with authentication on
        with neo4j.GraphDatabase.driver(address, auth=auth) as driver:
            driver.execute_query("MATCH (n:Task|File|Repository|Session) DETACH DELETE n")
        graph = BoltConflictGraph(uri, timeout=30)
        rng, now = random.Random(sessions), clock.now()
        for n in range(sessions):
            graph.record(f"T-{n}", "active", [FileRef(PROJECT, f"src/m{rng.randrange(sessions * 20)}.py")
                                              for _ in range(20)], now)
        results[sessions] = time_lookups(graph, repeat)
        graph.close()
    return results


def main() -> None:
    args = bench_arguments(__doc__, events=5000, runs=5)

    with fresh_servers("servers") as (root, postgres, neo4j, kafka):
        home, worktree = root / "home", scratch_worktree(root)
        settings = {"BATON_HOME": str(home), "BATON_DATABASE_URL": postgres.url, "BATON_GRAPH_URL": neo4j.uri,
                    "BATON_KAFKA_BOOTSTRAP": kafka.bootstrap, "BATON_KAFKA_TOPIC_PREFIX": "bench.",
                    "BATON_BACKGROUND_DELIVERY": "on"}
        os.environ.update(settings)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}

        started = time.perf_counter()
        build_server_sessions(args.sessions)
        subprocess.run([*CLI, "bind", BENCH_TASK], cwd=worktree, env=env, check=True, capture_output=True)
        for text in BENCH_DECISIONS:
            subprocess.run([*CLI, "decide", text], cwd=worktree, env=env, check=True, capture_output=True)
        subprocess.run([*CLI, "projector", "--once"], cwd=worktree, env=env, check=True, capture_output=True)
        build_decisions(home, args.decisions)
        print(f"data set: {args.sessions} sessions x 20 files in PostgreSQL and Neo4j, {args.decisions} decisions "
              f"(built in {time.perf_counter() - started:.1f} s)\n")

        rows = []
        touch = fresh_runs([*CLI, "touch", "src/m3.py"], worktree, args.repeat * 2, env=env)
        rows.append(("hook write: baton touch, fresh process, Kafka up", touch))
        wait_for_idle_delivery(home)
        rows.append(("hook touch until Kafka acknowledged it (cold delivery)",
                     touch_until_acknowledged([*CLI, "touch", "src/m4.py"], worktree, env, home, 10)))
        # The figures below time keeping, delivering and projecting separately.
        os.environ["BATON_BACKGROUND_DELIVERY"] = env["BATON_BACKGROUND_DELIVERY"] = "off"
        produced, produce_seconds = produce_touches(worktree, 2000)
        subprocess.run([*CLI, "deliver"], cwd=worktree, env=env, check=True, capture_output=True)
        from baton.skills.runtime.settings import Settings

        delivery = delivery_rates(root, kafka.bootstrap, args.events, args.runs)
        projector = projector_rates(root, Settings.from_env(), args.events, args.runs)
        os.environ["BATON_BACKGROUND_DELIVERY"] = env["BATON_BACKGROUND_DELIVERY"] = "on"
        fresh = max(10, args.repeat // 2)
        # As an agent runs it: the console script, which hands the command to the resident
        # process (started by the first run, left out), and beside it the same without one.
        baton = [str(BATON), "resume", BENCH_TASK, "--json"]
        rows.append(("baton resume, fresh process (target 400 ms)", resume_runs(baton, worktree, env, home, fresh)))
        rows.append(("  without the resident process (BATON_RESIDENT=off)", resume_runs(
            baton, worktree, {**env, "BATON_RESIDENT": "off"}, home, fresh)))
        rows.append(("  floor: python -c pass", fresh_runs([sys.executable, "-c", "pass"], worktree, fresh, env=env)))

        from baton.files import WorktreeLocator
        from baton.skills.core.binding import place_of
        from baton.skills.core.commit import apply_events
        from baton.skills.runtime.settings import Settings
        from baton.skills.runtime.stores import Stores
        from baton.skills.services.resume import resume_session

        # The bench worktree's project, not this directory's.

        stores = Stores(Settings.from_env(), project=PROJECT, projection=apply_events)
        place = place_of(worktree, WorktreeLocator())
        first = resume_session(stores, BENCH_TASK, place)
        assert first.status == "found" and all(v == "ok" for v in first.stores.values()), first.stores
        rows += [(f"{name} (target {target} ms)" if target else name, samples)
                 for name, samples, target in warm_resume_rows(stores, place, args.repeat * 2, reads_target=25)]
        costs = warm_resume_costs(stores, place, args.repeat)
        stores.close()
        rows.append(("  floor: PostgreSQL primary-key read", primary_key_reads(postgres.url, args.repeat * 2)))
        lookups = bolt_conflict_lookup(neo4j.uri, [100, 10_000], args.repeat * 5)
        for sessions, samples in lookups.items():
            rows.append((f"conflict lookup on Bolt, one task, {sessions} sessions", samples))

    print(f"{'figure':52} {'median ms':>10} {'p10-p90 ms':>16} {'p99 ms':>8}")
    for name, samples in rows:
        median, low, high = spread(samples)
        p99 = sorted(samples)[min(len(samples) - 1, int(0.99 * len(samples)))]
        print(f"{name:52} {median:10.2f} {f'{low:.2f}-{high:.2f}':>16} {p99:8.2f}")
    ratio = statistics.median(lookups[10_000]) / statistics.median(lookups[100])
    print(f"\nconflict lookup on Bolt at 10,000 / at 100 sessions: {ratio:.2f}x")
    print(costs)
    print(f"hook path, in one process: {produced / produce_seconds:.0f} touches/s kept for delivery "
          f"({produced} touches of 100 tickets through baton.skills.services.touch)")
    print(delivery.line("delivery into Kafka, acknowledged (target 20,000)",
                        "floor, a raw confluent-kafka producer of the same bytes", args.events))
    print(projector.line("projector into PostgreSQL, Neo4j and the recall queue (target 3,000)",
                         "floor, a raw executemany insert of the same events", args.events))


if __name__ == "__main__":
    main()
