"""A soak of Baton as a team runs it, for a bounded time (`python -m bench.soak` prints its
figures; tests/test_soak.py asserts its checks): agent processes running random CLI commands
and hooks, some killed with SIGKILL mid-flight, and on the servers a projector, each server
and the projector killed once; or, for a long soak, every cycle: the projector and the resident
killed and one server restarted in turn, the memory of the resident and the projector sampled.
soak() returns what was acknowledged, how long the stores took to heal and what did not hold;
report() prints it, with each command's p99 and each process's memory per part of the run."""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from tests.workspace import ROOT, git, live_processes, make_repo

CLI = [sys.executable, "-m", "baton.skills.frontends.cli"]
ENTRY = [sys.executable, "-c", "from baton.skills.frontends.entry import run; run()"]  # as the `baton` script
SHARED_FILES = 12  # a pool every agent touches now and then: conflicts happen
COMMAND_TIMEOUT = 60.0  # a command that takes this long counts as hung
WRITES = {"bind", "decide", "update", "hook post-tool-use"}  # the commands that write (the others read first)


@dataclass
class Outcome:
    command: str
    seconds: float
    code: int | None  # None: killed on purpose
    at: float = 0.0  # when it started, in seconds from the start of the run
    refused: bool = False  # exited with an error, or a hook said it could not record
    locked: bool = False  # said "database is locked" (an error or a warning)
    said: str = ""  # its last line on stderr, when refused


@dataclass
class Ledger:
    """What the agents were told was recorded (acknowledged) and what may or may not be."""

    decisions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # ticket -> texts
    touches: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # ticket -> paths
    maybe_decisions: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    outcomes: list[Outcome] = field(default_factory=list)
    hung: list[str] = field(default_factory=list)
    # (at, process, its resident set, and of it the anonymous and the file-backed parts, in
    # KiB): what grows, the heap (Python's and the libraries') or what is mapped (libraries,
    # the recall index); a part the kernel does not report is None
    memory: list[tuple[float, str, int, int | None, int | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    began: float = field(default_factory=time.monotonic)

    def add(self, outcome: Outcome, started: float) -> None:
        outcome.at = started - self.began
        with self.lock:
            self.outcomes.append(outcome)


def make_worktrees(root: Path, count: int) -> list[Path]:
    main = make_repo(root / "repo", "git@github.com:acme/soak.git")
    for n in range(1, count):
        git(main, "worktree", "add", "-q", str(root / f"tree-{n}"), "-b", f"agent-{n}")
    return [main, *(root / f"tree-{n}" for n in range(1, count))]


def outcome(name: str, started: float, code: int, err: str) -> Outcome:
    refused = code != 0 or "baton: hook" in err
    return Outcome(name, time.monotonic() - started, code, refused=refused, locked="database is locked" in err,
                   said=err.strip().splitlines()[-1] if refused and err.strip() else "")


def run(cwd: Path, env: dict, args: list[str], *, stdin: str | None = None, kill_after: float | None = None,
        ledger: Ledger, name: str) -> subprocess.CompletedProcess | None:
    """Run one Baton command as a fresh process; kill_after: SIGKILL it that many seconds in."""
    started = time.monotonic()
    process = subprocess.Popen([*(ENTRY if env["BATON_RESIDENT"] == "on" else CLI), *args], cwd=cwd, env=env,
                               text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if kill_after is not None:
        try:
            _, err = process.communicate(stdin, timeout=kill_after)
            ledger.add(outcome(name, started, process.returncode, err), started)
            return None
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            ledger.add(Outcome(name, time.monotonic() - started, None), started)
            return None
    try:
        out, err = process.communicate(stdin, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        ledger.hung.append(f"{name} {' '.join(args)}")
    ledger.add(outcome(name, started, process.returncode, err), started)
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def agent(n: int, worktree: Path, env: dict, until: float, ledger: Ledger, rng: random.Random) -> None:
    ticket = f"SOAK-{n}"
    run(worktree, env, ["bind", ticket, "--agent", f"agent-{n}"], ledger=ledger, name="bind")
    session = f"agent-session-{n}"
    started = {"session_id": session, "cwd": str(worktree), "hook_event_name": "SessionStart", "source": "startup"}
    run(worktree, env, ["hook", "session-start"], stdin=json.dumps(started),
        ledger=ledger, name="hook session-start")
    k = 0
    while time.monotonic() < until:
        k += 1
        roll = rng.random()
        kill_after = rng.uniform(0.01, 0.4) if rng.random() < 0.06 else None
        if roll < 0.35:
            path = f"src/shared/s{rng.randrange(SHARED_FILES)}.py" if rng.random() < 0.3 else f"src/agent{n}/f{k}.py"
            payload = {"session_id": session, "cwd": str(worktree), "hook_event_name": "PostToolUse",
                       "tool_name": "Edit", "tool_input": {"file_path": str(worktree / path)}, "tool_response": {}}
            done = run(worktree, env, ["hook", "post-tool-use"], stdin=json.dumps(payload), kill_after=kill_after,
                       ledger=ledger, name="hook post-tool-use")
            if done is not None and done.returncode == 0 and "baton: hook" not in done.stderr:
                with ledger.lock:
                    ledger.touches[ticket].add(path)
        elif roll < 0.55:
            text = f"soak decision {n}.{k} {uuid.uuid4().hex[:8]} about caching the cart totals"
            with ledger.lock:
                ledger.maybe_decisions[ticket].add(text)
            done = run(worktree, env, ["decide", text], kill_after=kill_after, ledger=ledger, name="decide")
            if done is not None and done.returncode == 0:
                with ledger.lock:
                    ledger.decisions[ticket].add(text)
        elif roll < 0.65:
            run(worktree, env, ["update", "--done", f"step {k}"], kill_after=kill_after, ledger=ledger, name="update")
        elif roll < 0.8:
            run(worktree, env, ["resume", ticket, "--json"], kill_after=kill_after, ledger=ledger, name="resume")
        elif roll < 0.88:
            run(worktree, env, ["list", "--json"], kill_after=kill_after, ledger=ledger, name="list")
        else:
            payload = {"session_id": session, "cwd": str(worktree), "hook_event_name": "UserPromptSubmit",
                       "prompt": "go on"}
            run(worktree, env, ["hook", "user-prompt-submit"], stdin=json.dumps(payload), kill_after=kill_after,
                ledger=ledger, name="hook user-prompt-submit")


class Servers:
    """PostgreSQL, Neo4j and Kafka from tests/servers, and a running `baton projector`."""

    def __init__(self, running: tuple | None = None) -> None:
        """running: (postgres, neo4j, kafka) servers already started (tests pass theirs)."""
        from tests.servers.kafka import KafkaServer
        from tests.servers.neo4j import Neo4jServer
        from tests.servers.postgres import PostgresServer

        self.owned = running is None
        self.postgres, self.neo4j, self.kafka = running or (PostgresServer().start(), Neo4jServer().start(),
                                                            KafkaServer().start())
        self.projector: subprocess.Popen | None = None

    def environment(self) -> dict:
        import psycopg

        name = f"soak_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # a generated identifier, not input
        return {"BATON_DATABASE_URL": self.postgres.url_for(name), "BATON_GRAPH_URL": self.neo4j.uri,
                "BATON_KAFKA_BOOTSTRAP": self.kafka.bootstrap,
                "BATON_KAFKA_TOPIC_PREFIX": f"soak-{uuid.uuid4().hex[:8]}."}

    def start_projector(self, env: dict, log: Path) -> None:
        with log.open("a") as out:
            self.projector = subprocess.Popen([*CLI, "projector"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True)

    def kill_projector(self) -> None:
        if self.projector is not None and self.projector.poll() is None:
            os.killpg(self.projector.pid, signal.SIGKILL)
            self.projector.wait(10)

    def destroy(self) -> None:
        self.kill_projector()
        for server in (self.kafka, self.neo4j, self.postgres):
            if self.owned:
                server.destroy()
            else:
                server.start()  # leave the caller's servers running


def chaos(servers: Servers | None, env: dict, seconds: float, log: Path, heals: dict[str, float],
          worktree: Path, cycle: float | None = None) -> None:
    """Kill the projector and each server once, spread over the run, or (cycle) every cycle
    seconds the projector and the resident, and one server in turn; measure how long each
    server takes to answer again once restarted."""
    if cycle is None:
        plan = [] if servers is None else [(name, at * seconds) for name, at in (
            ("projector", 0.2), ("postgres", 0.35), ("neo4j", 0.55), ("kafka", 0.75))]
    else:
        turns = ["postgres", "neo4j", "kafka"]
        plan = [(name, (n + at) * cycle) for n in range(int(seconds // cycle)) for name, at in (
            ("projector", 0.2), ("resident", 0.45), (turns[n % 3], 0.7))
            if name == "resident" or servers is not None]
    began = time.monotonic()
    for name, at in plan:
        time.sleep(max(0.0, began + at - time.monotonic()))
        if name == "resident":
            for pid in resident_pids(env["BATON_HOME"]):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # the next command starts another
            continue
        assert servers is not None
        if name == "projector":
            servers.kill_projector()
            time.sleep(1)
            servers.start_projector(env, log)
            continue
        server = getattr(servers, name)
        server.kill()
        time.sleep(2)
        server.start()
        restarted = time.monotonic()
        store = {"postgres": "registry", "neo4j": "graph", "kafka": "signals"}[name]
        while time.monotonic() - restarted < 120:
            answer = subprocess.run([*CLI, "resume", "SOAK-0", "--json"], cwd=worktree, env=env, capture_output=True,
                                    text=True)
            try:
                if json.loads(answer.stdout)["stores"].get(store) == "ok":
                    break
            except (ValueError, KeyError):
                pass
            time.sleep(0.2)
        heals[name if name not in heals else f"{name} at {at:.0f} s"] = time.monotonic() - restarted


def resident_pids(home: str) -> list[int]:
    """The resident process of a data home (not the children it forks for each command)."""
    found = {pid for pid, cmdline in live_processes(f"BATON_HOME={home}").items()
             if "baton.skills.frontends.resident" in cmdline}
    return [pid for pid in found if _status(pid, "PPid") not in found]


def _status(pid: int, field: str) -> int | None:
    """A number of a process's /proc status (PPid; VmRSS, in KiB), None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith(f"{field}:")), None)


def sample_memory(servers: Servers | None, home: str, until: float, ledger: Ledger, every: float = 5.0) -> None:
    """The resident set of the resident and the projector every few seconds until the run ends."""
    while time.monotonic() < until:
        processes = [("resident", pid) for pid in resident_pids(home)]
        if servers is not None and servers.projector is not None:
            processes.append(("projector", servers.projector.pid))
        for name, pid in processes:
            size, anon, mapped = (_status(pid, key) for key in ("VmRSS", "RssAnon", "RssFile"))
            if size is not None:
                with ledger.lock:
                    ledger.memory.append((time.monotonic() - ledger.began, name, size, anon, mapped))
        time.sleep(every)


def baton_processes(home: Path) -> list[str]:
    """Baton processes of this data home still running (their environment names it)."""
    return [f"{pid}: {cmdline}" for pid, cmdline in live_processes(f"BATON_HOME={home}").items()
            if "baton.skills.frontends.cli" in cmdline or "baton.skills.frontends.entry" in cmdline]


def verify(env: dict, ledger: Ledger, home: Path, worktree: Path, counts: dict | None = None) -> list[str]:
    """What does not hold: each acknowledged write present exactly once, each acknowledged
    touch in the conflict graph too, each decision searchable (read in the worktree's
    project, as its agents wrote). counts: filled with the missing graph files."""
    problems = []
    missing_in_graph = 0
    saved, here = dict(os.environ), os.getcwd()
    os.chdir(worktree)
    os.environ.update(env)
    try:
        from baton.outcome import Found
        from baton.recall.wire import decision_point_id
        from baton.skills.core.commit import apply_events
        from baton.skills.runtime.settings import Settings
        from baton.skills.runtime.stores import Stores

        stores = Stores(Settings.from_env(), projection=apply_events)
        try:
            index = stores.recall().index
            for ticket in sorted(set(ledger.decisions) | set(ledger.touches)):
                found = stores.registry.get(ticket)
                if not isinstance(found, Found):
                    problems.append(f"{ticket}: {found}")
                    continue
                session = found.value
                texts = [d.text for d in session.decisions]
                for text in ledger.decisions[ticket]:
                    if texts.count(text) != 1:
                        problems.append(f"{ticket}: decision {text!r} present {texts.count(text)} times")
                unexpected = set(texts) - ledger.maybe_decisions[ticket]
                if unexpected:
                    problems.append(f"{ticket}: decisions nobody made: {sorted(unexpected)[:3]}")
                paths = {t.path for t in session.files.values()}
                missing = ledger.touches[ticket] - paths
                if missing:
                    problems.append(f"{ticket}: {len(missing)} acknowledged touches missing, "
                                    f"e.g. {sorted(missing)[:3]}")
                held = stores.graph.held([ticket])
                if isinstance(held, Found):
                    graphed = held.value.get(ticket, ("", set()))[1]
                    lacking = {t.path for key, t in session.files.items()
                               if t.path in ledger.touches[ticket] and key not in graphed}
                    missing_in_graph += len(lacking)
                    if lacking:
                        problems.append(f"{ticket}: {len(lacking)} acknowledged touches missing from the graph, "
                                        f"e.g. {sorted(lacking)[:3]}")
                else:
                    problems.append(f"{ticket}: graph: {held}")
                ids = [decision_point_id(stores.project, ticket, text) for text in texts]
                vectors = index.vectors_of(ids)
                if len(vectors) != len(ids):
                    # Queued: the indexer has yet to embed them; not queued: the projector has
                    # yet to apply them (see heal), or nothing will.
                    queued = stores.embedding_queue.queued([p for p in ids if p not in vectors])
                    problems.append(f"{ticket}: {len(ids) - len(vectors)} of {len(ids)} decisions not indexed "
                                    f"({len(queued)} of them queued for the indexer)")
                for point_id, vector in list(vectors.items())[:5]:
                    hits = index.search([vector], project=stores.project, limit=1, exclude_task_id=None)
                    if not hits or hits[0].record.point_id != point_id:
                        problems.append(f"{ticket}: decision {point_id} is not found by its own vector")
        finally:
            stores.close()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(here)
    if counts is not None:
        counts["missing graph files"] = missing_in_graph
    return problems


def kafka_duplicates(env: dict, examples: list[str] | None = None) -> dict[str, int]:
    """Messages on the run's signal and event topics beyond one per id, read from each
    topic's start to its end as any reader reads them. examples: filled with where each
    copy of the first few duplicated ids is (partition, offset, producer's timestamp)."""
    from baton.registry.kafka import EVENTS_TOPIC
    from baton.signals.kafka import SIGNALS_TOPIC

    prefix = env["BATON_KAFKA_TOPIC_PREFIX"]
    found = {}
    for name, topic, id_field in (("duplicate signals", SIGNALS_TOPIC, "signal_id"),
                               ("duplicate events", EVENTS_TOPIC, "event_id")):
        messages = read_topic(env["BATON_KAFKA_BOOTSTRAP"], prefix + topic)
        ids = defaultdict(list)
        for message in messages:
            ids[json.loads(message.value())[id_field]].append(
                f"p{message.partition()}@{message.offset()} t={message.timestamp()[1]}")
        found[name] = len(messages) - len(ids)
        if examples is not None:
            examples += [f"{name[10:-1]} {key}: {', '.join(copies)}"
                         for key, copies in ids.items() if len(copies) > 1][:5]
    return found


def read_topic(bootstrap: str, topic: str) -> list:
    """Every message of the topic, from each partition's start to its end, each partition in order."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        remaining, messages = set(partitions), []
        deadline = time.monotonic() + 120
        while remaining and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    remaining.discard(message.partition())
                continue
            messages.append(message)
        return messages
    finally:
        consumer.close()


def unapplied(consumer, topic: str) -> int:
    """Events of the topic that the consumer's group has not committed (every event, before
    its first commit): 0 once the group's projectors applied the whole topic."""
    from confluent_kafka import TopicPartition

    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    behind = 0
    for tp in consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30):
        low, high = consumer.get_watermark_offsets(tp, timeout=30)
        behind += high - (tp.offset if tp.offset >= 0 else low)
    return behind


def heal(env: dict, worktree: Path, ledger: Ledger, home: Path, limit: float = 180.0,
         counts: dict | None = None) -> tuple[float, list[str]]:
    """Deliver, index and check until everything holds; returns (seconds, what still fails)."""
    started = time.monotonic()
    problems: list[str] = ["not checked"]
    while time.monotonic() - started < limit:
        subprocess.run([*CLI, "deliver"], cwd=worktree, env=env, capture_output=True)
        subprocess.run([*CLI, "index"], cwd=worktree, env=env, capture_output=True)
        problems = verify(env, ledger, home, worktree, counts)
        if not problems:
            break
        time.sleep(1)
    if problems and env.get("BATON_KAFKA_BOOTSTRAP"):
        # A read folds this home's writes the registry lacks: tell late from lost.
        problems.append(f"{projector_behind(env)} events on Kafka not yet applied by the projector")
    return time.monotonic() - started, problems


def projector_behind(env: dict) -> int:
    """Events of the run's topic that the projector's group has not committed."""
    from confluent_kafka import Consumer

    from baton.registry.kafka import EVENTS_TOPIC
    from baton.skills.services.projector import default_group

    prefix = env["BATON_KAFKA_TOPIC_PREFIX"]
    reader = Consumer({"bootstrap.servers": env["BATON_KAFKA_BOOTSTRAP"], "group.id": default_group(prefix)})
    try:
        return unapplied(reader, prefix + EVENTS_TOPIC)
    finally:
        reader.close()


# A CPU burner, and a loop that writes and flushes a small file, each until a time (the run's
# end): the load of other work on the machine.
BURNER = "import time, sys\nuntil = float(sys.argv[1])\nwhile time.time() < until:\n    sum(range(10000))\n"
FSYNCER = """
import os, sys, time
until, path = float(sys.argv[1]), sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
while time.time() < until:
    os.pwrite(fd, os.urandom(4096), 0)
    os.fsync(fd)
os.close(fd)
"""


def start_load(scratch: Path, seconds: float) -> list[subprocess.Popen]:
    """A CPU burner per core and an fsync loop, each ending by itself after seconds."""
    until = str(time.time() + seconds)
    burners = [subprocess.Popen([sys.executable, "-c", BURNER, until]) for _ in range(os.cpu_count() or 2)]
    return [*burners, subprocess.Popen([sys.executable, "-c", FSYNCER, until, str(scratch / "fsync-load")])]


def stop_load(load: list[subprocess.Popen]) -> None:
    for process in load:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def soak(mode: str, seconds: float, agents: int, seed: int = 1, running: tuple | None = None,
         load: bool = False, resident: bool = False, cycle: float | None = None) -> dict:
    """One soak run; returns its figures and what did not hold. running: servers to use;
    load: keep the cores and the disk busy while the agents run (start_load); resident: the
    commands go through the resident process; cycle: kill and restart every cycle seconds
    (chaos) instead of once each."""
    servers = Servers(running) if mode == "servers" else None
    with tempfile.TemporaryDirectory(prefix=f"baton-soak-{mode}-") as scratch:
        root = Path(scratch)
        home = root / "home"
        env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "on" if resident else "off",
               "PYTHONPATH": str(ROOT),
               "BATON_STORE_TIMEOUT": "2"}
        for name in ("BATON_BACKGROUND_DELIVERY", "BATON_BACKGROUND_INDEXING", "BATON_CONFIG", "BATON_TASK_ID"):
            env.pop(name, None)
        try:
            if servers is not None:
                env.update(servers.environment())
                servers.start_projector(env, root / "projector.log")
            trees = make_worktrees(root, agents)
            ledger, heals = Ledger(), {}
            until = time.monotonic() + seconds
            rng = random.Random(seed)
            loading = start_load(root, seconds) if load else []
            threads = [threading.Thread(target=agent,
                                        args=(n, trees[n], env, until, ledger, random.Random(rng.random())))
                       for n in range(agents)]
            threads.append(threading.Thread(target=chaos, args=(servers, env, seconds, root / "projector.log", heals,
                                                               trees[0], cycle)))
            threads.append(threading.Thread(target=sample_memory, args=(servers, str(home), until, ledger)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            stop_load(loading)
            counts: dict[str, int] = {}
            healed_in, problems = heal(env, trees[0], ledger, home, counts=counts)
            if servers is not None:
                servers.kill_projector()
                examples: list[str] = []
                counts.update(kafka_duplicates(env, examples))
                problems += [f"{counts[name]} {name} on Kafka" for name in ("duplicate signals", "duplicate events")
                             if counts[name]]
                problems += [f"  copies of {example}" for example in examples]
            settle = time.monotonic() + 30
            while baton_processes(home) and time.monotonic() < settle:
                time.sleep(0.2)
            left = baton_processes(home)
            if left:
                problems.append(f"{len(left)} Baton processes still running: {left[:3]}")
            for pid in resident_pids(str(home)):  # it would outlive the data home by its idle time
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            problems += [f"hung: {command}" for command in ledger.hung]
            if seconds >= LONG:
                problems += [f"{name} memory grew {growth:.0%} after the first {settled(seconds):.0f} s"
                             for name, growth in memory_growth(ledger.memory, seconds).items() if growth > 0.10]
            return {"mode": mode, "seconds": seconds, "agents": agents, "load": load, "resident": resident,
                    "cycle": cycle, "memory": ledger.memory, "outcomes": ledger.outcomes,
                    "acknowledged": sum(len(v) for v in ledger.decisions.values())
                    + sum(len(v) for v in ledger.touches.values()),
                    "healed_in": healed_in, "heals": heals, "counts": counts, "problems": problems}
        finally:
            if servers is not None:
                servers.destroy()


LONG = 1800.0  # a run this long is cut in parts of ten minutes and held to flat memory


def settled(seconds: float) -> float:
    """When a run's processes have warmed up: ten minutes, or a third of a shorter run."""
    return min(600.0, seconds / 3)


def parts(seconds: float) -> list[tuple[float, float]]:
    """The run cut in parts for the tables over time: ten minutes each on a long run, else quarters."""
    size = 600.0 if seconds >= LONG else seconds / 4
    return [(start, min(start + size, seconds)) for start in (n * size for n in range(int(-(-seconds // size))))]


def memory_growth(memory: list[tuple[float, str, int, int | None, int | None]], seconds: float) -> dict[str, float]:
    """Per process, the largest resident set of the run's last stretch (as long as the warm-up)
    over the largest of the second half of the warm-up, less one."""
    warm = settled(seconds)
    growth = {}
    for name in sorted({name for _, name, *_ in memory}):
        before = [size for at, n, size, *_ in memory if n == name and warm / 2 <= at < warm]
        after = [size for at, n, size, *_ in memory if n == name and at >= seconds - warm]
        if before and after:
            growth[name] = max(after) / max(before) - 1
    return growth


def over_time(result: dict) -> list[str]:
    """Each command's p99 and each process's largest resident set, per part of the run."""
    cuts = parts(result["seconds"])
    lines = [f"{'p99 ms per part of the run':26} " + " ".join(f"{f'{a:.0f}-{b:.0f} s':>11}" for a, b in cuts)]
    for command in sorted({o.command for o in result["outcomes"]}):
        cells = []
        for a, b in cuts:
            times = sorted(o.seconds * 1000 for o in result["outcomes"]
                           if o.command == command and o.code is not None and a <= o.at < b)
            cells.append(f"{times[min(len(times) - 1, int(0.99 * len(times)))]:11.0f}" if times else f"{'-':>11}")
        lines.append(f"{command:26} " + " ".join(cells))
    for name in sorted({name for _, name, *_ in result["memory"]}):
        for column, label in ((2, f"{name} largest RSS"), (3, f"  {name} anonymous"), (4, f"  {name} file-backed")):
            cells = [max((row[column] for row in result["memory"]
                          if row[1] == name and a <= row[0] < b and row[column] is not None), default=None)
                     for a, b in cuts]
            lines.append(f"{label + ', MiB':26} " + " ".join(
                f"{size / 1024:11.1f}" if size else f"{'-':>11}" for size in cells))
    growth = memory_growth(result["memory"], result["seconds"])
    if growth:
        lines.append(f"memory growth after the first {settled(result['seconds']):.0f} s: " + ", ".join(
            f"{name} {change:+.1%}" for name, change in growth.items()))
    return lines


def report(result: dict) -> str:
    by_command: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in result["outcomes"]:
        by_command[outcome.command].append(outcome)
    refused = sum(1 for o in result["outcomes"] if o.refused and o.command in WRITES)
    unanswered = sum(1 for o in result["outcomes"] if o.refused and o.command not in WRITES)
    lost = sum(int(p.split(": ")[1].split()[0]) if "acknowledged touches missing" in p else 1
               for p in result["problems"] if "acknowledged touches missing" in p or "present 0 times" in p)
    killed = "the projector and the resident killed and a server restarted" if result["mode"] == "servers" \
        else "the resident killed"
    cycle = f", every {result['cycle']:g} s {killed}" if result.get("cycle") else ""
    lines = [(f"soak on {result['mode']}{' through the resident' if result.get('resident') else ''}"
              f"{' under load' if result.get('load') else ''}{cycle}: {result['agents']} agents "
              f"for {result['seconds']:g} s, {len(result['outcomes'])} operations, {result['acknowledged']} "
              f"acknowledged writes checked; {refused} writes refused, {lost} lost; {unanswered} reads "
              f"unanswered"),
             f"{'command':26} {'ops':>6} {'refused':>8} {'locked':>7} {'killed':>7} {'p50 ms':>9} {'p99 ms':>9}"]
    for command, outcomes in sorted(by_command.items()):
        times = sorted(o.seconds * 1000 for o in outcomes if o.code is not None)
        refusals = sum(1 for o in outcomes if o.refused)
        locked = sum(1 for o in outcomes if o.locked)
        killed = sum(1 for o in outcomes if o.code is None)
        p50 = statistics.median(times) if times else float("nan")
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else float("nan")
        lines.append(f"{command:26} {len(outcomes):6} {refusals:8} {locked:7} {killed:7} {p50:9.1f} {p99:9.1f}")
    for said in sorted({o.said for o in result["outcomes"] if o.said})[:5]:
        lines.append(f"  refused: {said[:200]}")
    lines += over_time(result)
    lines.append(f"time to heal after the run (delivered, indexed, every check holding): {result['healed_in']:.1f} s")
    for name, seconds in result["heals"].items():
        lines.append(f"  {name} restarted: answering again after {seconds:.1f} s")
    if result["counts"]:
        lines.append(", ".join(f"{count} {name}" for name, count in result["counts"].items()))
    lines.append("every check holds" if not result["problems"] else
                 "FAILED:\n" + "\n".join(f"  - {p}" for p in result["problems"]))
    return "\n".join(lines)
