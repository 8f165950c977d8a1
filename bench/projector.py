"""The projector alone, on fresh servers: events per second applied to PostgreSQL, the Bolt
server (Neo4j) and the recall queue, beside the floor measured in the same run (a raw
executemany insert of the same events into PostgreSQL), and the seconds of its start-up
repair, which the rate leaves out (bench.throughput.projector_run); then where one more
run spends its time, its repair included (cProfile, the top functions by their own time:
`acquire` of a lock is the wait for the Bolt server's answers, since each transaction runs
on a thread of its own, `wait` in psycopg's connection.py PostgreSQL's, and `flush` of a
Producer Kafka's acknowledgement of the signals; by cumulative time, `_repair` is the
start-up repair). With --statements, --statement-runs more runs then time each Bolt
statement by the name graph/bolt.py gives it, from its start until its records are in.

With --scale, instead: `baton projector` processes in one consumer group, one against two
in turns on topics of --partitions partitions: each run starts its processes, waits for the
group to give every one its partitions, delivers --events new events and times them until
the group has committed the last; the events per second, and the CPU per event of the
projectors and of the servers (their process groups' user and system time over the same
span, from /proc), each run's new topic and group the same for one process and for two.

Fresh servers, as a new team deployment starts: Neo4j plans each read on the graph it
has when the read first runs, so a bench on a server that already holds a large graph
can miss a plan that goes bad as the graph grows. bench/servers.py prints the same rate
among its other figures, after building its data set.

    .venv/bin/python -m bench.projector [--events 5000] [--runs 5] [--top 12] [--sort cumulative]
        [--statements] [--statement-runs 4]
    .venv/bin/python -m bench.projector --scale [--events 5000] [--runs 5] [--partitions 6]
    .venv/bin/python -m bench.projector --memory [--events 20000] [--runs 3]
    .venv/bin/python -m bench.projector --repair [--runs 3] [--window-tickets 0 200 600 2000]
    .venv/bin/python -m bench.projector --history [--tickets 16] [--each 500] [--rounds 5]

With --memory, instead: the peak resident memory of `baton projector --once` (its
VmHWM in /proc as it ends) and its events per second over the whole command,
its start included, as it catches up with a backlog of --events events, its Kafka
consumer's prefetch as librdkafka's defaults leave it against a bounded one, in turns, and
what its start-up repair adds as the stores grow (see memory()).

With --repair, instead: the seconds and peak resident memory of the start-up repair (a
process of its own that runs skills.services.repair.repair) as --window-tickets tickets of
one project are in its window, a tenth of them sharing each of their shared files (so most
are in conflict, every conflict already signalled on Kafka), the repair as it is against
the repair reading its chunk's signals from the topic once a chunk, as it did before, in turns.

With --history, instead: the peak resident memory and the rate of `baton projector --once`
as its tickets' histories grow, round by round, as the product runs it (each ticket of a
batch read as its batch view, the repair a few sessions at a time) against reading every
ticket whole and the repair's window at once, as it was before, in turns (see history()).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.throughput import TICKETS, _kept, fresh_servers, load_events, projector_rates, projector_run

if TYPE_CHECKING:
    from baton.skills.services.projector import ProjectorReport

T = TypeVar("T")


def top_costs(work: Callable[[], T], top: int, order: str = "tottime") -> tuple[T, str]:
    """Run work under cProfile; its result, and its `top` functions by `order` (pstats' key:
    their own time by default, "cumulative" to see which callers the time went through)."""
    profile = cProfile.Profile()
    result = profile.runcall(work)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).strip_dirs().sort_stats(order).print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(n for n, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    return result, "\n".join(lines[start:start + top + 1])


def timing_statements(work: Callable[[], T], seconds: dict[str, list[float]]) -> T:
    """Run work with each Bolt statement timed from its start until its records are all in,
    its seconds added to `seconds` under the name graph/bolt.py gives it."""
    import neo4j

    from baton.graph import bolt

    names = {text: name for name, text in vars(bolt).items() if name.isupper() and isinstance(text, str)}
    original = neo4j.Transaction.run

    def timed(self: neo4j.Transaction, query: Any, parameters: Any = None, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = original(self, query, parameters, **kwargs)
        result._buffer_all()  # what the caller reads, read now: the driver keeps it for the caller
        name = names.get(query, " ".join(str(query).split())[:28]) if isinstance(query, str) else str(query)
        seconds.setdefault(name, []).append(time.perf_counter() - started)
        return result

    setattr(neo4j.Transaction, "run", timed)  # noqa: B010 (a method replaced for the run's length)
    try:
        return work()
    finally:
        setattr(neo4j.Transaction, "run", original)  # noqa: B010


def group_cpu(groups: list[int]) -> float:
    """Seconds of CPU (user and system) used so far by the live processes of these process groups."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) in groups:  # after the name: state, ppid, pgrp, ... utime (12), stime (13)
                used += int(fields[11]) + int(fields[12])
    return used / ticks


def scaled_run(root: Path, env: dict[str, str], servers: list[int], count: int, processes: int,
               partitions: int) -> tuple[float, float, float]:
    """One run of `processes` projectors in a group of their own: (events/s, projector CPU ms
    per event, server CPU ms per event)."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka.admin import AdminClient

    from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog
    from baton.skills.services.projector import default_group
    from tests.soak import unapplied
    from tests.timing import wait_for

    prefix = f"bench-scale{processes}-{uuid.uuid4().hex[:8]}."
    topic, group = f"{prefix}{EVENTS_TOPIC}", default_group(prefix)
    env = {**env, "BATON_KAFKA_TOPIC_PREFIX": prefix, "BATON_KAFKA_PARTITIONS": str(partitions)}
    with (root / "projectors.log").open("a") as log:
        running = [subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.1"],
                                    cwd=root, env=env, stdout=log, stderr=log, start_new_session=True)
                   for _ in range(processes)]
    admin = AdminClient({"bootstrap.servers": env["BATON_KAFKA_BOOTSTRAP"]})
    reader = Consumer({"bootstrap.servers": env["BATON_KAFKA_BOOTSTRAP"], "group.id": group})

    def assigned() -> bool:
        try:
            described = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
        except (KafkaException, TimeoutError):  # no coordinator yet, or a busy broker: ask again
            return False
        return (len(described.members) == processes
                and all(m.assignment.topic_partitions for m in described.members))

    try:
        wait_for(assigned, timeout=300, what=f"{processes} projectors given their partitions")
        path = root / f"{prefix}db"
        _kept(path, load_events(prefix.rstrip("."), count))
        event_log = KafkaEventLog(env["BATON_KAFKA_BOOTSTRAP"], path, timeout=60, topic=topic)
        groups = [p.pid for p in running]
        cpu, server_cpu, started = group_cpu(groups), group_cpu(servers), time.perf_counter()
        event_log.deliver()
        event_log.close()
        wait_for(lambda: unapplied(reader, topic) == 0, timeout=600, what="the group committing every event")
        seconds = time.perf_counter() - started
        cpu, server_cpu = group_cpu(groups) - cpu, group_cpu(servers) - server_cpu
    finally:
        reader.close()
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            process.wait(60)
    return count / seconds, 1000 * cpu / count, 1000 * server_cpu / count


def scale(root: Path, env: dict[str, str], servers: list[int], count: int, runs: int, partitions: int) -> None:
    """One projector against two, in turns (the first run of each warms the servers and is left out)."""
    results: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    for run in range(runs + 1):
        for processes in (1, 2) if run % 2 else (2, 1):
            result = scaled_run(root, env, servers, count, processes, partitions)
            if run:
                results[processes].append(result)
    for processes, figures in results.items():
        rates = [rate for rate, _, _ in figures]
        print(f"{processes} projector{'s' if processes > 1 else ''}: {statistics.median(rates):,.0f} events/s "
              f"(median of {runs} runs of {count:,} events on {partitions} partitions; runs {min(rates):,.0f}-"
              f"{max(rates):,.0f}); CPU per event: projectors {statistics.median(f[1] for f in figures):.2f} ms, "
              f"servers {statistics.median(f[2] for f in figures):.2f} ms")
    one, two = (statistics.median(rate for rate, _, _ in results[n]) for n in (1, 2))
    print(f"two projectors against one: {two / one:.2f}x the rate, on {os.cpu_count()} cores")


# Each set overrides the product's own consumer config, so the figures do not depend on it.
PREFETCH = {"librdkafka's default prefetch": {"queued.min.messages": 100000, "queued.max.messages.kbytes": 65536},
            "bounded prefetch": {"queued.min.messages": 2000, "queued.max.messages.kbytes": 8192}}
# `baton projector --once` with extra consumer settings (argv[1], JSON) over the product's,
# and its repair's pages and entries at a time (argv[2]; 0: the product's).
_PROJECTOR_WITH = ("import json, sys, confluent_kafka; made = confluent_kafka.Consumer; "
                   "confluent_kafka.Consumer = lambda config: made({**config, **json.loads(sys.argv[1])}); "
                   "import baton.skills.services.repair as repair; repair.CHUNK = int(sys.argv[2]) or repair.CHUNK; "
                   "repair.ENTRIES = int(sys.argv[2]) or repair.ENTRIES; "
                   "from baton.skills.frontends.cli import main; code = main(['projector', '--once']); "
                   "print(*(line for line in open('/proc/self/status') if line.startswith('VmHWM')), file=sys.stderr); "
                   "sys.exit(code)")


def memory_run(root: Path, env: dict[str, str], count: int, name: str, prefetch: dict[str, int],
               chunk: int = 0) -> tuple[float, float]:
    """One `baton projector --once` over a new topic holding `count` events of one project:
    (peak RSS in MiB, events per second over the whole command)."""
    import json

    from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog

    prefix = f"bench-memory-{name}-{uuid.uuid4().hex[:6]}."
    path = root / f"memory-{name}.db"
    _kept(path, load_events(prefix.rstrip("."), count, repo="github.com/acme/load-memory"))
    event_log = KafkaEventLog(env["BATON_KAFKA_BOOTSTRAP"], path, timeout=60, topic=f"{prefix}{EVENTS_TOPIC}")
    event_log.deliver()
    event_log.close()
    started = time.perf_counter()
    with (root / "memory.log").open("a") as log:
        process = subprocess.Popen([sys.executable, "-c", _PROJECTOR_WITH, json.dumps(prefetch), str(chunk)], cwd=root,
                                   env={**env, "BATON_KAFKA_TOPIC_PREFIX": prefix}, stdout=log,
                                   stderr=subprocess.PIPE, text=True)
        # Its own VmHWM as it ends: wait4's ru_maxrss would count this process's memory too,
        # which the child's address space held until its exec.
        _, peak = process.communicate()
    seconds = time.perf_counter() - started
    assert process.returncode == 0, f"the projector exited {process.returncode}: {peak[-2000:]}"
    return int(peak.split()[-2]) / 1024, count / seconds


def memory(root: Path, env: dict[str, str], count: int, runs: int) -> None:
    """Each prefetch in turns, with a repair window that holds no ticket (the load's events
    are an hour old), so that the start-up repair, which reads its window's tickets in full,
    does not set the peak; each round begins with two runs over an empty topic, one with a
    window of a second (the start alone) and, in turns, two with the default window (the start
    and its repair of all the runs so far): the repair a chunk at a time, and of every ticket
    at once (as it was before its chunks)."""
    from baton.skills.services.repair import ENTRIES

    unrepaired = {**env, "BATON_REPAIR_WINDOW": "1s"}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in PREFETCH}
    starts, repairs, at_once = [], [], []
    for run in range(runs + 1):
        starts.append(memory_run(root, unrepaired, 0, f"{run}-start", {})[0])
        for peaks, chunk in [(repairs, 0), (at_once, 10**9)][::1 if run % 2 else -1]:
            peaks.append(memory_run(root, env, 0, f"{run}-repair{chunk}", {}, chunk)[0])
        print(f"  round {run}, over an empty topic: {starts[-1]:.1f} MiB, with the default repair window "
              f"{repairs[-1]:.1f} MiB ({at_once[-1]:.1f} MiB repairing every ticket at once)", flush=True)
        for name in list(PREFETCH)[::1 if run % 2 else -1]:
            peak, rate = memory_run(root, unrepaired, count, f"{run}{name[0]}", PREFETCH[name])
            if run:
                results[name].append((peak - starts[-1], rate))
            print(f"  round {run}, {name}: {peak:.1f} MiB, {rate:,.0f} events/s", flush=True)
    medians = {}
    for name, figures in results.items():
        above, rate = (statistics.median(values) for values in zip(*figures, strict=True))
        medians[name] = above, rate
        print(f"{name} {PREFETCH[name]}: peak RSS {above:+.1f} MiB above the empty run's, {rate:,.0f} events/s "
              f"(medians of {runs} runs of {count:,} events, round 0 left out)")
    (base_above, base_rate), (above, rate) = medians.values()
    print(f"bounded against default: {above - base_above:+.1f} MiB peak RSS, {rate / base_rate:.2f}x the rate; "
          f"over an empty topic {min(starts):.1f}-{max(starts):.1f} MiB, with the default repair window "
          f"{' -> '.join(f'{peak:.1f}' for peak in repairs)} MiB about {ENTRIES:,} entries at a time, "
          f"{' -> '.join(f'{peak:.1f}' for peak in at_once)} MiB every ticket at once, "
          f"as the stores grew by {2 * count:,} events and {2 * TICKETS} tickets of one project a round")


# One repair over every project (argv[1]: "per chunk" reads the chunk's signals, as the
# repair did before it read the pairs once), printing its seconds and its VmHWM.
_REPAIR_WITH = ("import sys, time; from bench.projector import repair_as; seconds = repair_as(sys.argv[1]); "
                "print(seconds, *(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))")


def repair_as(variant: str) -> float:
    """The seconds of one repair of every project, as the product does it or ("per chunk")
    reading each chunk's signals from the log, as it did before."""
    from baton import clock
    from baton.outcome import Found
    from baton.signals.wire import SignalType
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services import repair

    stores = Stores(Settings.from_env(), projection=apply_events)
    if variant == "per chunk":
        since, each = clock.now() - stores.settings.repair_window, repair._repair_signals
        done: set[frozenset[str | None]] = set()

        def per_chunk(scoped: Stores, sessions: list, report: repair.RepairReport, **_: Any) -> None:
            seen = scoped.signals.concerning([f"task:{s.task_id}" for s in sessions], after=since, limit=100_000)
            pairs = done | {frozenset((s.task_id, s.payload.related_task_id)) for s in seen.unwrap("signals")
                            if s.signal_type is SignalType.conflict_detected}
            each(scoped, sessions, report, signalled=lambda: Found(pairs))
            done.update(pairs)

        repair._repair_signals = per_chunk  # type: ignore[assignment]
    started = time.perf_counter()
    report = repair.repair(stores)
    seconds = time.perf_counter() - started
    stores.close()
    assert not report.warnings and not report.signals, report.summary()
    return seconds


def window_tickets(root: Path, env: dict[str, str], first: int, count: int) -> None:
    """Tickets first..first+count of one project bound and touching three files each (two
    their own, one shared by ten tickets), applied by `baton projector --once`, which
    signals their conflicts on Kafka."""
    from baton import clock
    from baton.files import FileRef
    from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog
    from baton.registry.wire import event_body, files_touched_body

    repo, at, events = "github.com/acme/repair", clock.now() - timedelta(hours=1), []
    for n in range(first, first + count):
        task = f"REPAIR-{n}"
        bound, touched = str(uuid.uuid4()), str(uuid.uuid4())
        events += [(bound, task, event_body("bound", event_id=bound, task_id=task, session_id="bench", at=at,
                                            agent="bench", repo=repo, worktree_path=f"/w/{task}", branch=task,
                                            reopens=False)),
                   (touched, task, files_touched_body(touched, task, "bench", at, [
                       FileRef(repo, f"src/{task}/a.py"), FileRef(repo, f"src/{task}/b.py"),
                       FileRef(repo, f"src/shared/m{n // 10}.py")]))]
    path = root / f"repair-{first}.db"
    _kept(path, events)
    log = KafkaEventLog(env["BATON_KAFKA_BOOTSTRAP"], path, timeout=60, topic=f"baton.{EVENTS_TOPIC}")
    log.deliver()
    log.close()
    # Applied without a repair of its own (its window holds no ticket), then every signal sent.
    done = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--once"], cwd=root,
                          env={**env, "BATON_REPAIR_WINDOW": "1s"}, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def repairs(root: Path, env: dict[str, str], sizes: list[int], runs: int) -> None:
    """Each size of the window in turn, the tickets added to those before; at each, `runs`
    repairs of each way in turns, after one of each left out."""
    print(f"{'tickets in the window':>22} {'way':>26} {'median s':>9} {'runs s':>13} {'peak RSS MiB':>13}")
    held = 0
    for size in sizes:
        window_tickets(root, env, held, size - held)
        held = size
        figures: dict[str, list[tuple[float, float]]] = {"once a repair": [], "per chunk": []}
        for run in range(runs + 1):
            for way in list(figures)[::1 if run % 2 else -1]:
                done = subprocess.run([sys.executable, "-c", _REPAIR_WITH, way], cwd=Path(__file__).parent.parent,
                                      env=env, capture_output=True, text=True, check=False)
                assert done.returncode == 0, done.stderr[-2000:]
                took, peak = done.stdout.split()[-2:]
                if run:
                    figures[way].append((float(took), int(peak) / 1024))
        for way, values in figures.items():
            seconds = [s for s, _ in values]
            print(f"{size:>22,} {'signals read ' + way:>26} {statistics.median(seconds):>9.2f} "
                  f"{min(seconds):>6.2f}-{max(seconds):<6.2f} {max(p for _, p in values):>13.1f}", flush=True)
        ours, before = (statistics.median(s for s, _ in figures[way]) for way in figures)
        print(f"{'':>22} {'once / per chunk':>26} {ours / before:>9.2f}x", flush=True)


# `baton projector --once` (argv[1]: "batch view" as the product runs it, or "whole"), then its VmHWM.
_PROJECTOR_AS = ("import sys; from bench.projector import projector_as; code = projector_as(sys.argv[1]); "
                 "print(*(line for line in open('/proc/self/status') if line.startswith('VmHWM')), file=sys.stderr); "
                 "sys.exit(code)")


def projector_as(variant: str) -> int:
    """`baton projector --once` as the product runs it, or ("whole") as it ran before the batch
    view: every ticket of a batch read whole from the registry, and the start-up repair
    reading its window's sessions all at once."""
    if variant == "whole":
        from baton.registry.postgres import PostgresSessionStore
        from baton.skills.services import repair

        append = PostgresSessionStore.append
        PostgresSessionStore.append = lambda self, events, whole=True: append(self, events)  # type: ignore[method-assign]
        repair.CHUNK = repair.ENTRIES = 10**9
    from baton.skills.frontends.cli import main

    return main(["projector", "--once"])


def history_events(repo: str, tickets: int, each: int, round_: int) -> list[tuple[str, str, str]]:
    """One round of work on `tickets` tickets of repo, `each` events a ticket (the first round
    binds them): of every ten, four touch a new file, three record a decision, two a step
    and one the next action, each at its own recent time."""
    from baton import clock
    from baton.files import FileRef
    from baton.registry.wire import event_body, files_touched_body

    now, events = clock.now(), []
    for t in range(tickets):
        task = f"HIST-{t}"
        for k in range(each):
            n = round_ * each + k
            event_id, at, common = str(uuid.uuid4()), now - timedelta(seconds=each - k), {"session_id": "bench"}
            if n == 0:
                body = event_body("bound", event_id=event_id, task_id=task, at=at, agent="bench", repo=repo,
                                  worktree_path=f"/w/{task}", branch=task, reopens=False, **common)
            elif n % 10 < 4:
                body = files_touched_body(event_id, task, "bench", at, [FileRef(repo, f"src/{task}/f{n}.py")])
            elif n % 10 < 7:
                body = event_body("decision_recorded", event_id=event_id, task_id=task, at=at, repo=repo,
                                  text=f"decision {n} of {task}: cache the cart totals {uuid.uuid4().hex[:8]}",
                                  context="", inherited_from=None, replaces=[], **common)
            elif n % 10 < 9:
                body = event_body("step_completed", event_id=event_id, task_id=task, at=at, text=f"step {n}", **common)
            else:
                body = event_body("next_action_set", event_id=event_id, task_id=task, at=at, text=f"go on {n}",
                                  **common)
            events.append((event_id, task, body))
    return events


def history(root: Path, env: dict[str, str], tickets: int, each: int, rounds: int) -> None:
    """Rounds of `each` new events on each of `tickets` tickets, every round applied by one
    `baton projector --once` of each variant in turns (each its own project, topic and
    group, the same events): its peak RSS and events per second over the whole command, its
    start and its repair of the window (which holds every ticket of both projects) included."""
    from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog

    variants = ["batch view", "whole"]
    peaks: dict[str, list[float]] = {v: [] for v in variants}
    print(f"{'round':>5} {'events a ticket':>16} " + " ".join(f"{v + ' MiB':>16} {v + ' ev/s':>16}" for v in variants))
    for round_ in range(rounds):
        rates = {}
        for variant in variants[::1 if round_ % 2 else -1]:
            prefix = f"bench-history-{variant.split()[0]}."
            path = root / f"history-{variant.split()[0]}-{round_}.db"
            events = history_events(f"github.com/acme/history-{variant.split()[0]}", tickets, each, round_)
            _kept(path, events)
            log = KafkaEventLog(env["BATON_KAFKA_BOOTSTRAP"], path, timeout=60, topic=f"{prefix}{EVENTS_TOPIC}")
            log.deliver()
            log.close()
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _PROJECTOR_AS, variant], cwd=Path(__file__).parent.parent,
                                  env={**env, "BATON_KAFKA_TOPIC_PREFIX": prefix}, capture_output=True, text=True,
                                  check=False)
            assert done.returncode == 0, done.stderr[-2000:]
            rates[variant] = len(events) / (time.perf_counter() - started)
            peaks[variant].append(int(done.stderr.split()[-2]) / 1024)
        print(f"{round_ + 1:>5} {(round_ + 1) * each:>16,} " + " ".join(
            f"{peaks[v][-1]:>16.1f} {rates[v]:>16,.0f}" for v in variants), flush=True)
    for variant in variants:
        print(f"{variant}: peak RSS {peaks[variant][0]:.1f} -> {peaks[variant][-1]:.1f} MiB "
              f"({peaks[variant][-1] / peaks[variant][0] - 1:+.1%}) as each of {tickets} tickets grew from "
              f"{each:,} to {rounds * each:,} events")
    print(f"batch view against whole at the last round: {peaks['batch view'][-1] - peaks['whole'][-1]:+.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="functions shown from the profiled run")
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"),
                        help="the profiled run's functions by their own time or with their callees'")
    parser.add_argument("--statements", action="store_true", help="then time each Bolt statement by its name")
    parser.add_argument("--statement-runs", type=int, default=4, help="runs of the statements' timing (default 4)")
    parser.add_argument("--scale", action="store_true", help="instead: one projector process against two")
    parser.add_argument("--partitions", type=int, default=6, help="the event topic's partitions with --scale")
    parser.add_argument("--memory", action="store_true", help="instead: peak RSS of `baton projector --once`")
    parser.add_argument("--repair", action="store_true", help="instead: the start-up repair's seconds and memory")
    parser.add_argument("--window-tickets", type=int, nargs="+", default=[0, 200, 600, 2000],
                        help="tickets in the repair's window with --repair")
    parser.add_argument("--history", action="store_true",
                        help="instead: peak RSS of `baton projector --once` as its tickets' histories grow")
    parser.add_argument("--tickets", type=int, default=16, help="tickets with --history")
    parser.add_argument("--each", type=int, default=500, help="events a ticket a round with --history")
    parser.add_argument("--rounds", type=int, default=5, help="rounds with --history")
    args = parser.parse_args()

    with fresh_servers("projector") as (root, postgres, neo4j, kafka):
        os.environ.update({"BATON_HOME": str(root / "home"), "BATON_DATABASE_URL": postgres.url,
                           "BATON_GRAPH_URL": neo4j.uri, "BATON_KAFKA_BOOTSTRAP": kafka.bootstrap,
                           "BATON_BACKGROUND_DELIVERY": "off"})
        from baton.skills.runtime.settings import Settings

        if args.scale or args.memory or args.repair or args.history:
            env = {**os.environ, "BATON_RESIDENT": "off", "BATON_BACKGROUND_INDEXING": "off",
                   "BATON_STORE_TIMEOUT": "30"}
            if args.history:
                history(root, env, args.tickets, args.each, args.rounds)
                return
            if args.repair:
                repairs(root, env, args.window_tickets, args.runs)
                return
            if args.memory:
                memory(root, env, args.events, args.runs)
                return
            # The servers' process groups: PostgreSQL's backends are in its postmaster's.
            pids = (postgres.pid(), *(server._process.pid for server in (neo4j, kafka) if server._process))
            servers = [os.getpgid(pid) for pid in pids if pid]
            scale(root, env, servers, args.events, args.runs, args.partitions)
            return
        settings = Settings.from_env()
        rate = projector_rates(root, settings, args.events, args.runs)
        print(rate.line("projector into PostgreSQL, Neo4j and the recall queue (target 3,000)",
                        "floor, a raw executemany insert of the same events", args.events))
        report: list[str] = []

        def profiled(work: Callable[[], ProjectorReport]) -> ProjectorReport:
            applied, costs = top_costs(work, args.top, args.sort)
            report.append(costs)
            return applied

        _, seconds, repair = projector_run(root, settings, args.events, "profiled", around=profiled)
        print(f"\none more run under cProfile: {args.events / seconds:,.0f} events/s, its start-up repair "
              f"{repair:.2f} s; top {args.top} functions by {'own' if args.sort == 'tottime' else 'cumulative'} "
              f"time, the repair's included:\n{report[0]}")
        if args.statements:
            seconds_by_name: dict[str, list[float]] = {}
            timed_seconds = 0.0
            for run in range(args.statement_runs):
                _, seconds, _ = projector_run(root, settings, args.events, f"statements{run}",
                                              around=partial(timing_statements, seconds=seconds_by_name))
                timed_seconds += seconds
            print(f"\n{args.statement_runs} more runs of {args.events:,} events, {timed_seconds:.2f} s in all "
                  "(start-up repairs left out, their statements counted); each Bolt statement's seconds:")
            for name, times in sorted(seconds_by_name.items(), key=lambda item: -sum(item[1])):
                print(f"  {name:28} {sum(times):7.2f} s {len(times):6} statements")


if __name__ == "__main__":
    main()
