"""`baton list` and a fresh `baton resume` as the sessions grow, on the embedded default.

For each size (1,000, 10,000 and 100,000 sessions by default) and each way of drawing files,
a data home is seeded where --active sessions (1,000) are active and the rest have ended,
every session having touched 20 files:
  - realistic: files drawn from a pool that grows with the sessions (20 per session), so
    a file has the same expected number of sharers at every size;
  - fixed pool: files drawn from 20,000 paths whatever the size (the worst case: at
    100,000 sessions each file was touched by 100 tickets, most of them ended).
Then times, each as a fresh process, `baton list --json` and `baton resume T-0 --json`
(T-0 is active and shares files), with the peak resident memory of each process, beside
the floors measured in the same run: `python -c pass` and a raw SQLite primary-key read of
one session. Also prints the conflict counts of the list (in process), so that a change
to the overlap shows in the output. Target: list at 100,000 sessions <= 1 s, bounded
memory, flat from 1,000 to 100,000. Prints medians with p10-p90 spread.

    .venv/bin/python -m bench.scale [--sizes 1000 10000 100000] [--active 1000] [--repeat 7]
                                    [--pools realistic "fixed pool"]

--active N with N up to the size makes more sessions active: the list then reads, and
prints, every one of them (the registry's read of each active session dominates).

Seeding writes the active sessions through the registry's own batch path and the ended
ones, and every ticket's touches, straight into the stores' tables in one transaction each
(the ended sessions are copies of one ended session's row under other ids), with the
conflict counts the graph keeps as its writes would have left them.

--servers does the same on the production backends, PostgreSQL and the Bolt server (Neo4j,
started afresh for each data set, as tests/servers starts them), with every session
active: the registry through its batch path, the graph's nodes and edges straight into
Neo4j with the counts it keeps. The floor is then a PostgreSQL primary-key read. The list
also runs through the resident, as users run it: the client's memory in the table, and
printed above it the resident's own and the most a served list held of its own (sampled in
runs of their own). The overview is timed twice: as a fresh `baton serve` builds its first
page, and as the running dashboard rebuilds it for later ones. The
commands run with a store budget of 60 s: on a busy machine the default 2 s, which also
pays for importing the servers' clients, can run out, and what a list takes is the figure.

    .venv/bin/python -m bench.scale --servers --sizes 100000 --pools realistic
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.files import FileRef
from bench.common import BATON, CLI, ROOT, scratch_worktree, spread, start_resident
from bench.run import FILES_PER_SESSION, PATH_POOL

if TYPE_CHECKING:
    from tests.servers.neo4j import Neo4jServer

REPO = "github.com/acme/shop"
POOLS = {"realistic": lambda sessions: sessions * FILES_PER_SESSION, "fixed pool": lambda sessions: PATH_POOL}


def seed(home: Path, sessions: int, active: int, pool: int) -> None:
    """T-0 .. T-{active-1} active, the rest ended; each with FILES_PER_SESSION files of the pool."""
    from baton.graph.sqlite import SqliteConflictGraph
    from baton.projects import qualified
    from baton.registry.model import Bound, Ended, FilesTouched, Status
    from baton.registry.sqlite import SqliteSessionStore

    rng = random.Random(sessions * 31 + pool)
    now = clock.now()
    files = [[f"src/m{rng.randrange(pool)}.py" for _ in range(FILES_PER_SESSION)] for _ in range(sessions)]
    registry = SqliteSessionStore(home / "registry.db", timeout=30, project=REPO)
    batch = []
    for n in range(min(active, sessions)):
        common = {"task_id": f"T-{n}", "session_id": "bench", "at": now - timedelta(minutes=rng.randint(1, 600))}
        batch += [Bound(event_id=uuid.uuid4(), repo=REPO, worktree_path=f"/w/T-{n}", **common),
                  FilesTouched(event_id=uuid.uuid4(), files=[FileRef(REPO, p) for p in files[n]], **common)]
    ended = {"task_id": "ENDED", "session_id": "bench", "at": now - timedelta(days=3)}
    batch += [Bound(event_id=uuid.uuid4(), repo=REPO, worktree_path="/w/ENDED", **ended),
              FilesTouched(event_id=uuid.uuid4(), files=[FileRef(REPO, p) for p in files[-1]], **ended)]
    ended["at"] += timedelta(hours=1)  # after the bind, or the end does not take
    batch.append(Ended(event_id=uuid.uuid4(), status=Status.completed, **ended))
    for start in range(0, len(batch), 500):
        registry.append(batch[start:start + 500])
    registry.get("ENDED")  # applies what waits
    registry.close()
    with sqlite3.connect(home / "registry.db", isolation_level=None) as conn:
        status, last, body = conn.execute("SELECT status, last_activity, body FROM sessions "
                                          "WHERE project = ? AND task_id = 'ENDED'", (REPO,)).fetchone()
        assert status == "completed", status
        conn.execute("BEGIN")
        conn.execute("DELETE FROM sessions WHERE project = ? AND task_id = 'ENDED'", (REPO,))
        template = json.loads(body)
        rows = []
        for n in range(active, sessions):
            template["task_id"] = f"T-{n}"
            rows.append((REPO, f"T-{n}", status, last, json.dumps(template)))
        conn.executemany("INSERT INTO sessions (project, task_id, status, last_activity, body) "
                         "VALUES (?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")

    graph = SqliteConflictGraph(home / "graph.db", timeout=30)
    graph.describe()  # creates the file with its schema
    graph.close()
    stamp = clock.to_text(now)
    with sqlite3.connect(home / "graph.db", isolation_level=None) as conn:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO tasks (task_id, status) VALUES (?, ?)",
                         ((qualified(REPO, f"T-{n}"), "active" if n < active else "completed")
                          for n in range(sessions)))
        conn.executemany("INSERT OR IGNORE INTO touches (task_id, repo, path, last_at, active) VALUES (?, ?, ?, ?, ?)",
                         ((qualified(REPO, f"T-{n}"), REPO, path, stamp, int(n < active))
                          for n in range(sessions) for path in files[n]))
        conn.executemany("UPDATE tasks SET shared_files = ?, sharers = ? WHERE task_id = ?",
                         ((files, tickets, qualified(REPO, f"T-{n}"))
                          for n, (files, tickets) in enumerate(kept_counts(files[:min(active, sessions)]))))
        conn.execute("COMMIT")


def kept_counts(files: list[list[str]]) -> list[tuple[int, int]]:
    """The conflict counts the graph keeps for each of these active tickets (the files each
    touched), as its writes would have left them: (files shared, tickets shared with)."""
    touchers: dict[str, list[int]] = {}
    for n, touched in enumerate(files):
        for path in set(touched):
            touchers.setdefault(path, []).append(n)
    counts = []
    for n, touched in enumerate(files):
        shared = [path for path in set(touched) if len(touchers[path]) > 1]
        partners = {other for path in shared for other in touchers[path]} - {n}
        counts.append((len(shared), len(partners)))
    return counts


def seed_servers(database_url: str, neo4j: Neo4jServer, sessions: int, pool: int) -> None:
    """T-0 .. T-{sessions-1}, all active, each with FILES_PER_SESSION files of the pool: in
    PostgreSQL through the registry's batch path; in Neo4j straight into its nodes and
    edges, with the kept conflict counts as the graph's writes would have left them (its
    own writes move them ticket by ticket, some 30 sessions a second here)."""
    import neo4j as driver_module

    from baton.graph.bolt import BoltConflictGraph
    from baton.projects import qualified
    from baton.registry.model import Bound, FilesTouched
    from baton.registry.postgres import PostgresSessionStore

    rng = random.Random(sessions * 31 + pool)
    now = clock.now()
    files = [[f"src/m{rng.randrange(pool)}.py" for _ in range(FILES_PER_SESSION)] for _ in range(sessions)]
    registry = PostgresSessionStore(database_url, timeout=120, project=REPO)
    try:
        for start in range(0, sessions, 500):
            events = []
            for n in range(start, min(start + 500, sessions)):
                at = now - timedelta(minutes=rng.randint(1, 600))
                common = {"task_id": f"T-{n}", "session_id": "bench", "at": at}
                events += [Bound(event_id=uuid.uuid4(), repo=REPO, worktree_path=f"/w/T-{n}", **common),
                           FilesTouched(event_id=uuid.uuid4(), files=[FileRef(REPO, p) for p in files[n]], **common)]
            registry.append(events)
    finally:
        registry.close()

    graph = BoltConflictGraph(neo4j.uri, timeout=120)
    graph.describe()  # its schema and indexes
    graph.close()
    stamp = clock.to_text(now)
    counts = kept_counts(files)
    with driver_module.GraphDatabase.driver(neo4j.address, auth=neo4j.auth) as driver:
        for start in range(0, sessions, 10_000):
            driver.execute_query(
                "UNWIND $rows AS r CREATE (:Task {task_id: r[0], status: 'active', shared_files: r[1], sharers: r[2]})",
                rows=[[qualified(REPO, f"T-{n}"), *counts[n]] for n in range(start, min(start + 10_000, sessions))])
        keys = sorted({FileRef(REPO, path).key for touched in files for path in touched})
        for start in range(0, len(keys), 20_000):
            driver.execute_query("UNWIND $keys AS key "
                                 "CREATE (:File {key: key, repo: $repo, path: substring(key, size($repo) + 1)})",
                                 keys=keys[start:start + 20_000], repo=REPO)
        pairs = [[qualified(REPO, f"T-{n}"), FileRef(REPO, path).key]
                 for n in range(sessions) for path in set(files[n])]
        for start in range(0, len(pairs), 20_000):
            driver.execute_query("UNWIND $pairs AS p MATCH (t:Task {task_id: p[0]}) MATCH (f:File {key: p[1]}) "
                                 "CREATE (t)-[:TOUCHES {last_at: $at}]->(f)", pairs=pairs[start:start + 20_000],
                                 at=stamp)
        driver.execute_query("MERGE (:BatonCounts {kept: true})")


# Runs each command for the bench and reports its time and peak memory. A child's peak
# counts the memory of the process that forked it, so the bench, which grows while it
# seeds, forks none of the measured commands itself: this small process does.
LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    started = time.perf_counter()
    child = subprocess.Popen(job["command"], cwd=job["cwd"], env=job["env"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    error = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    print(json.dumps({"ms": elapsed, "rss_mb": usage.ru_maxrss / 1024, "code": os.waitstatus_to_exitcode(status),
                      "error": error[-400:]}), flush=True)
"""


# The dashboard's overview as a fresh `baton serve` builds it for its first page: the
# snapshot (the listing's rows, lease conflicts, the feed) and its JSON. Given a count, it
# is then built that many times more, as the running dashboard rebuilds it for later pages
# (with a server every few seconds, its modules loaded and its first snapshot built), and
# the script prints those builds' milliseconds and the process's peak resident memory.
OVERVIEW = """
import json, sys, time
from baton.skills.frontends.web.overview import build_snapshot
from baton.skills.runtime.settings import Settings
settings = Settings.from_env()
later = int(sys.argv[1]) if len(sys.argv) > 1 else 0
times = []
for version in range(later + 1):
    started = time.perf_counter()
    snapshot = build_snapshot(settings, version + 1)
    assert snapshot.registry == "ok", snapshot.registry
    json.dumps({"sessions": snapshot.rows, "warnings": snapshot.warnings, "signals": snapshot.signals})
    times.append((time.perf_counter() - started) * 1000)
if later:
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    print(json.dumps({"ms": times[1:], "rss_mb": int(status["VmHWM"].split()[0]) / 1024}))
"""


def warm_overviews(cwd: Path, env: dict, repeat: int) -> tuple[list[float], list[float]]:
    """Milliseconds of each later snapshot in one dashboard process, and its peak MB: its
    own high-water mark, since getrusage's would count the bench's (the launcher's note)."""
    done = subprocess.run([sys.executable, "-c", OVERVIEW, str(repeat)], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True)
    answer = json.loads(done.stdout)
    return answer["ms"], [answer["rss_mb"]]


def private_mb(pid: int) -> float | None:
    """What a process holds that no other does (smaps_rollup's private pages), in MB; None
    once it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = dict(line.split(":", 1) for line in rollup.splitlines()[1:])
    return sum(int(fields[name].split()[0]) for name in ("Private_Clean", "Private_Dirty")) / 1024


def served_memory(launcher: Launcher, resident: subprocess.Popen, command: list[str], cwd: Path, env: dict,
                  repeat: int) -> list[float]:
    """The private memory each served command held at its peak (sampled every 2 ms, in runs
    of their own, since sampling takes processor time): what a command adds to the
    resident, whose pages the command's process shares."""
    import threading

    peaks: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        children = Path(f"/proc/{resident.pid}/task/{resident.pid}/children")
        while not stop.is_set():
            for pid in map(int, children.read_text().split()):
                held = private_mb(pid)
                if held is not None:
                    peaks[pid] = max(held, peaks.get(pid, 0.0))
            stop.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        launcher.runs(command, cwd, env, repeat)
    finally:
        stop.set()
        sampler.join()
    return list(peaks.values())


def rss_mb(pid: int) -> float:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024


class Launcher:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def runs(self, command: list[str], cwd: Path, env: dict, repeat: int) -> tuple[list[float], list[float]]:
        """Milliseconds and peak resident MB of each run, after one run that warms the page cache."""
        times, memory = [], []
        for attempt in range(repeat + 1):
            self.process.stdin.write(json.dumps({"command": command, "cwd": str(cwd), "env": env}) + "\n")
            self.process.stdin.flush()
            done = json.loads(self.process.stdout.readline())
            if done["code"] != 0:
                raise SystemExit(f"{' '.join(command[-3:])} failed: {done['error']}")
            if attempt:
                times.append(done["ms"])
                memory.append(done["rss_mb"])
        return times, memory

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def primary_key_reads(home: Path, repeat: int) -> list[float]:
    conn = sqlite3.connect(home / "registry.db")
    samples = []
    for n in range(repeat * 20):
        started = time.perf_counter()
        conn.execute("SELECT body FROM sessions WHERE project = ? AND task_id = ?", (REPO, f"T-{n % 50}")).fetchone()
        samples.append((time.perf_counter() - started) * 1000)
    conn.close()
    return samples


def conflict_counts(home: Path) -> tuple[float, int, int, int]:
    """The list's aggregate, in process: milliseconds, tickets in conflict, the largest
    number of tickets one conflicts with, and the (ticket, ticket, file) rows a listing of
    pairs would have built."""
    from baton.graph.sqlite import SqliteConflictGraph

    graph = SqliteConflictGraph(home / "graph.db", timeout=30)
    started = time.perf_counter()
    counts = graph.conflict_counts().value
    elapsed = (time.perf_counter() - started) * 1000
    graph.close()
    with sqlite3.connect(home / "graph.db") as conn:
        (triples,) = conn.execute("SELECT coalesce(sum(n * (n - 1)), 0) FROM ("
                                  "SELECT count(*) AS n FROM touches WHERE active GROUP BY repo, path)").fetchone()
    return elapsed, len(counts), max((tickets for _, tickets in counts.values()), default=0), triples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--active", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pools", nargs="+", choices=list(POOLS), default=list(POOLS))
    parser.add_argument("--servers", action="store_true", help="on PostgreSQL and Neo4j, every session active")
    args = parser.parse_args()
    if args.servers:
        on_servers(args)
        return

    launcher = Launcher()
    with scratch(launcher, args.repeat) as (root, worktree, env, rows):
        for label in args.pools:
            pool_of = POOLS[label]
            for sessions in args.sizes:
                home = root / f"{label.replace(' ', '-')}-{sessions}"
                started = time.perf_counter()
                seed(home, sessions, args.active, pool_of(sessions))
                built = time.perf_counter() - started
                at_home = {**env, "BATON_HOME": str(home)}
                aggregate, in_conflict, widest, triples = conflict_counts(home)
                name = f"{sessions:,} sessions, {label}"
                print(f"{name}: pool {pool_of(sessions):,} paths, seeded in {built:.1f} s; "
                      f"{in_conflict} of {min(args.active, sessions)} active tickets in conflict, "
                      f"at most with {widest} ({triples:,} ticket-ticket-file rows as pairs); "
                      f"the list's kept counts read in process in {aggregate:.1f} ms", flush=True)
                rows.append((f"baton list --json, {name}",
                             *launcher.runs([*CLI, "list", "--json"], worktree, at_home, args.repeat), 1000))
                rows.append((f"dashboard overview snapshot, fresh process, {name}",
                             *launcher.runs([sys.executable, "-c", OVERVIEW], worktree, at_home, args.repeat), 1000))
                rows.append((f"baton resume T-0 --json, {name}",
                             *launcher.runs([*CLI, "resume", "T-0", "--json"], worktree, at_home, args.repeat), None))
                rows.append((f"  floor: SQLite primary-key read, {name}",
                             primary_key_reads(home, args.repeat), [], None))
    launcher.close()
    report(rows, args.pools)


@contextmanager
def scratch(launcher: Launcher, repeat: int) -> Iterator[tuple[Path, Path, dict, list]]:
    """A scratch directory, a worktree in it, the commands' environment, and the figures'
    rows, the floor (`python -c pass`) measured first."""
    with tempfile.TemporaryDirectory(prefix="baton-scale-") as directory:
        root = Path(directory)
        worktree = scratch_worktree(root)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        floor, floor_rss = launcher.runs([sys.executable, "-c", "pass"], worktree, env, repeat)
        yield root, worktree, env, [("python -c pass (floor)", floor, floor_rss, None)]


def on_servers(args: argparse.Namespace) -> None:
    """The same figures on PostgreSQL and a Bolt server, every session active."""
    import psycopg
    from psycopg import sql

    from bench.servers import primary_key_reads
    from tests.servers.neo4j import Neo4jServer
    from tests.servers.postgres import PostgresServer

    launcher = Launcher()
    postgres = PostgresServer().start()
    try:
        with scratch(launcher, args.repeat) as (root, worktree, env, rows):
            for label in args.pools:
                for sessions in args.sizes:
                    database = f"scale_{label.replace(' ', '_')}_{sessions}"
                    with psycopg.connect(postgres.url, autocommit=True) as conn:
                        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                    neo4j = Neo4jServer().start()
                    try:
                        started = time.perf_counter()
                        seed_servers(postgres.url_for(database), neo4j, sessions, POOLS[label](sessions))
                        name = f"{sessions:,} active sessions on servers, {label}"
                        print(f"{name}: seeded in {time.perf_counter() - started:.1f} s", flush=True)
                        # A budget that never cuts a run short: what it takes is the figure.
                        at_home = {**env, "BATON_HOME": str(root / database), "BATON_STORE_TIMEOUT": "60",
                                   "BATON_DATABASE_URL": postgres.url_for(database), "BATON_GRAPH_URL": neo4j.uri}
                        rows.append((f"baton list --json, {name}",
                                     *launcher.runs([*CLI, "list", "--json"], worktree, at_home, args.repeat), 1000))
                        rows.append((f"dashboard overview snapshot, fresh process, {name}",
                                     *launcher.runs([sys.executable, "-c", OVERVIEW], worktree, at_home, args.repeat),
                                     1000))
                        rows.append((f"dashboard overview snapshot, later pages, {name}",
                                     *warm_overviews(worktree, at_home, args.repeat), 1000))
                        # Through the resident, as users run it: the servers' clients loaded once.
                        (root / database).mkdir(mode=0o700, exist_ok=True)
                        resident = start_resident(root / database, at_home)
                        try:
                            served = {**at_home, "BATON_RESIDENT": "on"}
                            launcher.runs([str(BATON), "list", "--json"], worktree, served, 1)  # its connections
                            times, client = launcher.runs([str(BATON), "list", "--json"], worktree, served,
                                                          args.repeat)
                            rows.append((f"baton list --json through the resident, {name}", times, client, 1000))
                            held = served_memory(launcher, resident, [str(BATON), "list", "--json"], worktree,
                                                 served, min(args.repeat, 3))
                            print(f"through the resident: its own resident memory {rss_mb(resident.pid):.0f} MB; "
                                  f"each served list held at most {max(held):.0f} MB of its own "
                                  f"({len(held)} sampled); the client {max(client):.0f} MB", flush=True)
                        finally:
                            resident.terminate()
                            resident.wait(timeout=30)
                        rows.append((f"  floor: PostgreSQL primary-key read, {name}",
                                     primary_key_reads(postgres.url_for(database), args.repeat, "T-0"), [], None))
                    finally:
                        neo4j.destroy()
    finally:
        postgres.destroy()
        launcher.close()
    report(rows, args.pools)


def report(rows: list, pools: list[str]) -> None:
    """The table of figures, and the list's growth from the smallest size to the largest."""
    print(f"\n{'figure':58} {'median ms':>10} {'p10-p90 ms':>16} {'peak RSS MB':>12} {'target':>8}")
    for name, samples, memory, target in rows:
        median, low, high = spread(samples)
        rss = f"{max(memory):.0f}" if memory else ""
        shown = f"{target} ms" if target else ""
        print(f"{name:58} {median:10.2f} {f'{low:.2f}-{high:.2f}':>16} {rss:>12} {shown:>8}")
    lists = {name: statistics.median(samples) for name, samples, _, _ in rows if name.startswith("baton list")}
    for label in pools:
        at = [value for name, value in lists.items() if name.endswith(label)]
        if len(at) > 1:
            print(f"list at the largest / at the smallest size, {label}: {at[-1] / at[0]:.2f}x")


if __name__ == "__main__":
    main()
