"""A server that is down costs one bounded wait per command.

Each server (PostgreSQL, the Bolt server, Qdrant over http, Kafka) is taken away behind a
loopback port (tests/servers/outage.py) in both ways a client meets: refused, and stalled
(a socket that accepts and never answers). The commands an agent runs (resume, list,
decide, the session-start and post-tool-use hooks), each a fresh process, answer within
the budget with the right exit status and one line per failing store; the health record
makes the next commands skip the server at once; and once the server is back, what was
kept during the outage arrives exactly once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from tests import timing
from tests.servers.common import free_port
from tests.servers.outage import FORWARD, REFUSE, STALL, Outage
from tests.timing import wait_for
from tests.workspace import ROOT, run_process

BUDGET = 2.0  # BATON_STORE_TIMEOUT, as conftest sets it
SESSION_START_BUDGET = 0.8  # baton.skills.frontends.hooks
FIXTURES = Path(__file__).parent / "fixtures" / "claude_hooks"
STORE_OF = {"postgres": "session registry", "bolt": "conflict graph", "qdrant": "recall index", "kafka": "signal log"}
PART_OF = {"postgres": "registry", "bolt": "graph", "qdrant": "recall", "kafka": "signals"}


def process(cwd: Path, *args: str, stdin: str | None = None) -> Callable[[], subprocess.CompletedProcess]:
    code = "import sys\nfrom baton.skills.frontends.cli import main\nsys.exit(main(sys.argv[1:]))"
    return lambda: subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                                  timeout=60, input=stdin, env=dict(os.environ))


def timed(cwd: Path, *args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess, float]:
    return timing.timed(process(cwd, *args, stdin=stdin))


def client_import(cwd: Path, module: str) -> float:
    """What importing a server's client adds to a fresh interpreter, here and now."""
    def run(code: str) -> Callable[[], subprocess.CompletedProcess]:
        return lambda: subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, timeout=120)

    return max(0.0, timing.floor(run(f"import {module}")) - timing.floor(run("pass")))


def hook_payload(name: str, cwd: Path, file: Path | None = None) -> str:
    event = json.loads((FIXTURES / f"{name}.json").read_text())
    event["cwd"], event["session_id"] = str(cwd), f"outage-{uuid.uuid4().hex[:8]}"
    if file is not None:
        event["tool_input"]["file_path"] = event["tool_response"]["filePath"] = str(file)
    return json.dumps(event)


def lines_naming(stderr: str, store: str) -> list[str]:
    return [line for line in stderr.splitlines() if store in line]


def assert_told_once_per_store(stderr: str) -> None:
    """No store's failure is told twice, and each is told on one line."""
    told = [line.split(" unavailable: ")[0].removeprefix("baton: warning: ").removeprefix("baton: ")
            for line in stderr.splitlines() if " unavailable: " in line]
    assert len(told) == len(set(told)), stderr


@pytest.fixture
def servers_home(request, home, monkeypatch, worktrees, cli):
    """(server, mode, proxy, main worktree, floor, budget): OMN-1 with a history, its one server
    configured behind an Outage proxy that still forwards; every other store embedded. The
    floor is what a resume costs here and now with the server healthy (tests/timing.py)."""
    server, mode = request.param
    main, _ = worktrees
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    if server == "qdrant":  # no Qdrant server here: the history is built on the embedded index
        proxy = Outage(None, mode=REFUSE)
    else:
        target = {"postgres": "postgres_server", "bolt": "neo4j_server", "kafka": "kafka_server"}[server]
        running = request.getfixturevalue(target)
        proxy = Outage(("127.0.0.1", running.port))
        if server == "postgres":
            url = request.getfixturevalue("postgres_url").replace(f":{running.port}/", f":{proxy.port}/")
            monkeypatch.setenv("BATON_DATABASE_URL", url)
        elif server == "bolt":
            request.getfixturevalue("bolt_uri")
            monkeypatch.setenv("BATON_GRAPH_URL", f"bolt://{proxy.address}")
            monkeypatch.setenv("BATON_GRAPH_USER", running.user)  # the test Neo4j runs with authentication on
            monkeypatch.setenv("BATON_GRAPH_PASSWORD", running.password)
        else:
            monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", proxy.address)
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "touch", "src/db.py")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL")[0] == 0
    assert cli(main, "list")[0] == 0  # delivers what the writes kept
    healthy = timing.floor(process(main, "resume", "OMN-1", "--json"))
    if server == "qdrant":
        # The history is on the embedded index, so the floor never imported qdrant-client,
        # which a resume asking Qdrant does first (about 0.6 s on a quiet machine).
        healthy += client_import(main, "qdrant_client")
    budget = timing.store_budget(healthy, BUDGET)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", f"{budget:g}")
    if server == "qdrant":
        monkeypatch.setenv("BATON_QDRANT_URL", f"http://{proxy.address}")
    yield server, mode, proxy, main, healthy, budget
    proxy.close()


CASES = [(server, mode) for server in ("postgres", "bolt", "qdrant", "kafka") for mode in (REFUSE, STALL)]


@pytest.mark.parametrize("servers_home", CASES, indirect=True, ids=[f"{s}-{m}" for s, m in CASES])
def test_a_server_down_costs_one_bounded_wait_and_loses_nothing(servers_home, cli, home, worktrees):
    server, mode, proxy, main, healthy, budget = servers_home
    proxy.switch(mode)
    registry_down = server == "postgres"
    # A refused connection fails at once; a stalled server costs the budget, once; a server
    # the record knows is down, and a write kept locally, cost nothing on top of the floor.
    bound = timing.bound(healthy, 0 if mode == REFUSE else budget)
    fast = timing.bound(healthy)

    result, elapsed = timed(main, "resume", "OMN-1", "--json")
    answer = json.loads(result.stdout)
    assert result.returncode == (3 if registry_down else 0), result.stderr
    assert answer["stores"][PART_OF[server]].startswith("unavailable: "), answer["stores"]
    assert elapsed < bound, f"resume took {elapsed:.1f}s with {server} {mode} (floor {healthy:.2f}s)"
    assert_told_once_per_store(result.stderr)

    # The health record remembers: the next commands skip the server without connecting.
    result, elapsed = timed(main, "resume", "OMN-1", "--json")
    assert " down since " in json.loads(result.stdout)["stores"][PART_OF[server]]
    assert elapsed < fast, f"a resume that knows {server} is down took {elapsed:.1f}s (floor {healthy:.2f}s)"

    result, elapsed = timed(main, "list", "--json")
    assert result.returncode == (3 if registry_down else 0), result.stderr
    assert elapsed < fast
    assert_told_once_per_store(result.stderr)

    for args in (("decide", "Decided while a server was down"), ("touch", "src/during.py")):
        result, elapsed = timed(main, *args)
        assert (result.returncode, result.stderr) == (0, ""), result.stderr
        assert elapsed < fast, f"{args[0]} took {elapsed:.1f}s with {server} {mode} (floor {healthy:.2f}s)"

    result, elapsed = timed(main, "hook", "session-start", stdin=hook_payload("session_start_startup", main))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "unavailable" in context.lower()
    assert elapsed < fast

    result, elapsed = timed(main, "hook", "post-tool-use",
                            stdin=hook_payload("post_tool_use_edit", main, main / "src" / "hooked.py"))
    assert (result.returncode, result.stderr) == (0, "")
    assert elapsed < fast

    if server != "qdrant":
        proxy.switch(FORWARD)
        assert run_process(main, "doctor").returncode in (0, 3)  # clears the record; the embedded model aside
    # What was kept arrives once (with only Qdrant down, the registry took it all along),
    # the graph included: another ticket touching a file touched during the outage overlaps.
    second = worktrees[1]
    assert cli(second, "bind", "OMN-2")[0] == 0
    assert cli(second, "touch", "src/during.py")[0] == 0
    cli(main, "deliver")
    answer = json.loads(cli(main, "resume", "OMN-1", "--json")[1])
    session = answer["session"]
    assert [d["text"] for d in session["decisions"]].count("Decided while a server was down") == 1
    assert {"src/during.py", "src/hooked.py", "src/db.py"} <= set(session["files_touched"])
    assert [(c["other_task_id"], c["shared_files"]) for c in answer["conflicts"]] == [("OMN-2", ["src/during.py"])]
    again = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]
    assert again["decisions"] == session["decisions"]
    signals = json.loads(cli(main, "signals", "--task", "OMN-1", "--json")[1])
    assert [s["signal_type"] for s in signals].count("decision_recorded") == 2


@pytest.fixture
def two_stalled(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL")[0] == 0
    healthy = timing.floor(process(main, "resume", "OMN-1", "--json"))
    graph, recall = Outage(None, mode=STALL), Outage(None, mode=STALL)
    monkeypatch.setenv("BATON_GRAPH_URL", f"bolt://{graph.address}")
    monkeypatch.setenv("BATON_QDRANT_URL", f"http://{recall.address}")
    yield main, healthy
    graph.close()
    recall.close()


@pytest.mark.slow
def test_resume_asks_the_other_stores_side_by_side(two_stalled):
    """With the graph and recall both stalled, each waits out the same budget at the same
    time: both report their own timeout, not a budget already spent by the other."""
    main, healthy = two_stalled
    result, elapsed = timed(main, "resume", "OMN-1", "--json")
    stores = json.loads(result.stdout)["stores"]
    assert result.returncode == 0 and stores["registry"] == "ok" and stores["signals"] == "ok"
    for part in ("graph", "recall"):
        assert stores[part].startswith("unavailable: ") and "no time left" not in stores[part], stores
    assert elapsed < timing.bound(healthy, BUDGET), f"{elapsed:.1f}s (floor {healthy:.2f}s)"


STALLED_OR_REFUSED = [(server, mode, seconds) for server in ("postgres", "bolt", "qdrant")
                      for mode, seconds in ((STALL, "2"), (STALL, "1.5"), (REFUSE, "2"))]


@pytest.mark.parametrize("server, mode, seconds", STALLED_OR_REFUSED,
                         ids=[f"{s}-{m}-{t}" for s, m, t in STALLED_OR_REFUSED])
def test_a_slow_server_is_told_apart_from_a_down_one(home, worktrees, cli, monkeypatch, server, mode, seconds):
    """A stalled port says which limit ran out, with its configured value; a refusing one says
    refused. The server's credentials stay out of both."""
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "touch", "src/db.py")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL")[0] == 0
    port = Outage(None, mode=mode)
    try:
        monkeypatch.setenv("BATON_STORE_TIMEOUT", seconds)
        monkeypatch.setenv({"postgres": "BATON_DATABASE_URL", "bolt": "BATON_GRAPH_URL",
                            "qdrant": "BATON_QDRANT_URL"}[server],
                           {"postgres": f"postgresql://baton:hunter2secret@{port.address}/baton",
                            "bolt": f"bolt://{port.address}", "qdrant": f"http://{port.address}"}[server])
        if server == "bolt":
            monkeypatch.setenv("BATON_GRAPH_PASSWORD", "hunter2secret")
        result, _ = timed(main, "resume", "OMN-1", "--json")
    finally:
        port.close()
    said = json.loads(result.stdout)["stores"][PART_OF[server]]
    if mode == STALL:
        assert said.endswith(f": no answer within the {seconds} s budget (BATON_STORE_TIMEOUT)"), said
    else:
        assert said.endswith(": connection refused") and "no answer" not in said, said
    assert said.startswith("unavailable: ") and "hunter2secret" not in said + result.stderr


URL_OF = {"postgres": ("BATON_DATABASE_URL", "postgresql://baton@{}/baton"), "bolt": ("BATON_GRAPH_URL", "bolt://{}"),
          "qdrant": ("BATON_QDRANT_URL", "http://{}"), "kafka": ("BATON_KAFKA_BOOTSTRAP", "{}")}
KNOWN_DOWN_OVER = 0.030  # seconds a server known to be down may add to a command (issue 46)
STALLED_OVER = 0.3  # seconds a stalled server may add to a resume beyond BATON_STORE_TIMEOUT (issue 46)


def in_turns(main: Path, down: dict[str, str], before: Callable[[], object], runs: int,
             measure: Callable[[Callable[[], subprocess.CompletedProcess]], tuple[subprocess.CompletedProcess, float]],
             *, within: float | None = None, most: int = 0) -> tuple[float, float, subprocess.CompletedProcess]:
    """(the median over turns of what `baton resume OMN-1 --json` with the server configured
    as `down` costs over the same resume with it not configured, the least of the latter, the
    last answer with it configured). Each turn runs both back to back, so the load of the
    moment weighs on the pair alike, and the median of the pairs' differences is not moved by
    a few turns that load stretched (the least of each side was: under CI's load the two
    least values drifted apart by more than a bound of 30 ms with no cost between them).
    before() runs ahead of each, untimed. While the median exceeds `within`, more turns up to
    `most` in all."""
    with_server, without = [], []
    turns = 0

    def excess() -> float:
        return statistics.median(a - b for a, b in zip(with_server, without, strict=True))

    while turns < runs or (within is not None and turns < most and excess() > within):
        turns += 1
        for env, samples in ((down, with_server), ({}, without)):
            before()
            result, seconds = measure(partial(as_users_run, main, "resume", "OMN-1", "--json", env=env))
            assert result.returncode in (0, 3), result.stderr
            samples.append(seconds)
            if env:
                answered = result
    return excess(), min(without), answered


def as_users_run(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command through the `baton` console entry, as users run it: handed to the resident
    in lane `on`, run in a process of its own, ended as that entry ends it, in lane `off`."""
    from tests import lanes

    if lanes.current is not None:
        return lanes.current.run(cwd, args, env=env)
    code = "import sys\nsys.argv[0] = 'baton'\nfrom baton.skills.frontends.entry import run\nrun()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def cpu_or_wall(run: Callable[[], subprocess.CompletedProcess]) -> tuple[subprocess.CompletedProcess, float]:
    """What one command costs: the CPU time of the process it ran in when that is a child of
    this one (load stretches it far less than its wall time), else (a resident ran it) its
    wall time."""
    from tests import lanes

    return timing.timed(run) if lanes.current is not None else timing.cpu_timed(run)


@pytest.mark.parametrize("server", list(URL_OF))
def test_a_server_known_to_be_down_costs_a_command_no_more_than_leaving_it_out(home, worktrees, cli, server):
    """A server the health record knows is down is skipped without connecting to it (its port
    stalls: a connection would cost the budget) and without its client: a resume costs at
    most 30 ms over the same resume with that server not configured."""
    from baton import budget
    from baton.health import HealthRecord

    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL")[0] == 0
    port = Outage(None, mode=STALL)
    setting, url = URL_OF[server]
    url = url.format(port.address)
    name = getattr(budget, f"{server}_server")(url).name
    record = HealthRecord(home, recheck_after=30)
    try:
        over, left_out, answered = in_turns(main, {setting: url}, lambda: record.mark_down(name, "connection refused"),
                                            5, cpu_or_wall, within=KNOWN_DOWN_OVER, most=15)
    finally:
        port.close()
    assert " down since " in json.loads(answered.stdout)["stores"][PART_OF[server]]
    assert port.accepted == 0
    assert over <= KNOWN_DOWN_OVER, f"known down {over * 1000:+.1f} ms a resume, not configured {left_out:.3f}s"


@pytest.mark.parametrize("server", list(URL_OF))
def test_a_stalled_server_costs_a_resume_at_most_its_budget_and_a_little(home, worktrees, cli, server):
    """A server that accepts and never answers costs a resume at most BATON_STORE_TIMEOUT +
    0.3 s over the same resume with that server not configured (its client's import, the
    connection, the wait, and the ending of the process included)."""
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "Keep carts in PostgreSQL")[0] == 0
    port = Outage(None, mode=STALL)
    setting, url = URL_OF[server]
    record = home / "server-health.json"
    try:
        over, left_out, answered = in_turns(main, {setting: url.format(port.address)},
                                               lambda: record.unlink(missing_ok=True), 3, timing.timed)
    finally:
        port.close()
    assert json.loads(answered.stdout)["stores"][PART_OF[server]].startswith("unavailable: ")
    assert port.accepted > 0  # it was asked, and waited for
    assert over <= BUDGET + STALLED_OVER, f"stalled {over:+.2f}s a resume, not configured {left_out:.2f}s"


def test_a_recall_index_found_down_answers_every_later_request_without_loading_its_client():
    """Qdrant refused once in a command: every request after it answers refused at once, and
    none imports qdrant-client to build its filter first (seconds on a loaded machine, which
    a resume's deadline then reported as the server's silence)."""
    code = f"""
import json, sys
from baton.budget import Budget, qdrant_server
from baton.errors import StoreUnavailable
from baton.recall.qdrant_server import QdrantServerIndex
url = "http://127.0.0.1:{free_port()}"
index = QdrantServerIndex(url, timeout=2, gate=Budget(2).gate(qdrant_server(url)))
said = []
for ask in (lambda: index.search_keywords("carts in postgres", project="p", limit=5, exclude_task_id="OMN-1"),
            lambda: index.search([[0.1] * 384], project="p", limit=5, exclude_task_id="OMN-1"),
            lambda: index.count("p"), lambda: index.delete_tasks("p", ["OMN-1"]), lambda: index.outdated(5),
            lambda: list(index.points("p"))):
    try:
        ask()
        said.append("answered")
    except StoreUnavailable as exc:
        said.append(exc.reason)
print(json.dumps([said, "qdrant_client" in sys.modules]))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    said, client_loaded = json.loads(result.stdout or "null") or ([], None)
    assert len(said) == 6 and all(reason.endswith(": connection refused") for reason in said), result
    assert client_loaded is False


def test_each_event_reaches_kafka_once_however_many_processes_deliver(home, worktrees, kafka_server, monkeypatch):
    main, _ = worktrees
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    proxy = Outage(("127.0.0.1", kafka_server.port), mode=REFUSE)
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", proxy.address)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", prefix)
    try:
        for n in range(5):
            assert run_process(main, "update", "--task", "OMN-1", "--next", f"step {n}").returncode == 0
        proxy.switch(FORWARD)
        readers = [subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "list"], cwd=main,
                                    stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
                   for _ in range(4)]
        for reader in readers:
            reader.wait(60)
        assert run_process(main, "deliver").stdout.strip() == "Nothing waits."
    finally:
        proxy.close()
    assert messages_on(kafka_server, f"{prefix}session-events.v1") == 5, "each of 5 events once"


def test_a_background_delivery_clears_the_record_once_the_server_is_back(home, worktrees, cli, postgres_server,
                                                                         postgres_url, monkeypatch):
    main, _ = worktrees
    proxy = Outage(("127.0.0.1", postgres_server.port), mode=REFUSE)
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url.replace(f":{postgres_server.port}/", f":{proxy.port}/"))
    record = home / "server-health.json"
    try:
        assert run_process(main, "resume", "OMN-1").returncode == 3
        assert f"PostgreSQL at 127.0.0.1:{proxy.port}" in json.loads(record.read_text())["servers"]
        proxy.switch(FORWARD)
        skipped = run_process(main, "list")
        assert skipped.returncode == 3 and "down since" in skipped.stderr, "within the recheck time: skipped"
        assert run_process(main, "decide", "--task", "OMN-1", "After the outage",
                           env={"BATON_BACKGROUND_DELIVERY": "on"}).returncode == 0
        wait_for(lambda: json.loads(record.read_text())["servers"] == {}, timeout=30,
                 what="the background delivery clearing the record")
        assert run_process(main, "list").returncode == 0
    finally:
        proxy.close()


def messages_on(kafka_server, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": uuid.uuid4().hex})
    try:
        found = consumer.list_topics(topic, timeout=10).topics[topic]
        if found.error is not None:
            return 0
        return sum(high - low for low, high in (consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                                for p in found.partitions))
    finally:
        consumer.close()


def test_a_foreground_delivery_waits_for_one_running_instead_of_sending_again(home, worktrees, kafka_server,
                                                                               monkeypatch):
    """While another process holds an outbox's delivery, a read waits for it (within its
    budget) rather than sending the same messages; what remains is sent once, later."""
    from baton.locks import held

    main, _ = worktrees
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", prefix)
    healthy = timing.floor(process(main, "signals"))  # before the update: it would deliver it
    assert run_process(main, "update", "--task", "OMN-1", "--next", "one").returncode == 0
    outbox = home / "kafka-events-outbox.db"
    with held(outbox.with_name(outbox.name + ".lock"), within=1) as got:
        assert got
        result, waited = timed(main, "signals")
        # The wait took the command's budget: its own read then had none left to spend.
        assert result.returncode == 3 and "no time left" in result.stderr, result.stderr
        assert messages_on(kafka_server, f"{prefix}session-events.v1") == 0
    assert BUDGET - 0.2 < waited < timing.bound(healthy, BUDGET), "it waited for the other delivery, within its budget"
    assert run_process(main, "deliver").stdout.strip() == "Nothing waits."
    assert messages_on(kafka_server, f"{prefix}session-events.v1") == 1


def test_writes_with_kafka_down_keep_locally_without_a_warning(home, worktrees, monkeypatch):
    main, _ = worktrees
    healthy = timing.floor(process(main, "decide", "--task", "OMN-0", "Kept on the embedded default"))
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", f"127.0.0.1:{free_port()}")
    assert run_process(main, "bind", "OMN-1").returncode == 0
    for args in (("decide", "Kept"), ("update", "--phase", "implementing", "--next", "n"), ("end",)):
        result, elapsed = timed(main, *args)
        assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
        assert elapsed < timing.bound(healthy), f"{args[0]} took {elapsed:.1f}s with Kafka down (floor {healthy:.2f}s)"
    kept = run_process(main, "deliver")
    # Seven events (bind, its run and checkpoint, decision, phase, next action, end) and four signals.
    assert kept.returncode == 3 and kept.stdout.strip() == "11 writes still wait", kept.stdout


# --- the health record ---------------------------------------------------------------

def test_the_health_record_skips_within_the_recheck_time_and_is_cleared(tmp_path):
    from baton.health import HealthRecord

    now = [1000.0]
    record = HealthRecord(tmp_path, recheck_after=30, clock=lambda: now[0])
    assert record.down("PostgreSQL at h:1") is None
    record.mark_down("PostgreSQL at h:1", "PostgreSQL at h:1: connection\nrefused")
    now[0] += 12
    record.mark_down("PostgreSQL at h:1", "PostgreSQL at h:1: connection refused")
    down = record.down("PostgreSQL at h:1")
    assert down is not None and down.describe(now[0]) == "down since 12 s: PostgreSQL at h:1: connection refused"
    now[0] += 31
    assert record.down("PostgreSQL at h:1") is None, "after the recheck time the server is asked again"
    record.clear("PostgreSQL at h:1")
    assert json.loads((tmp_path / "server-health.json").read_text()) == {"servers": {}}


@pytest.mark.parametrize("garbage", [b"{not json", b"\xff\xfe", b'{"servers": {"x": {"since": "a"}}}', b"[]"])
def test_a_garbled_record_is_ignored_and_rewritten(tmp_path, garbage):
    from baton.health import HealthRecord

    path = tmp_path / "server-health.json"
    path.write_bytes(garbage)
    record = HealthRecord(tmp_path, recheck_after=30)
    assert record.down("Kafka at k:9092") is None
    assert json.loads(path.read_text()) == {"servers": {}}


def _hammer(home: str, worker: int) -> None:
    from baton.health import HealthRecord

    record = HealthRecord(Path(home), recheck_after=30)
    for n in range(60):
        server = f"server-{(worker + n) % 3}"
        record.mark_down(server, f"worker {worker} round {n}") if n % 3 else record.clear(server)
        record.down(server)


@pytest.mark.slow
def test_concurrent_processes_never_corrupt_the_record(tmp_path):
    path = tmp_path / "server-health.json"
    seen_garbled = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)["servers"]
            except (ValueError, KeyError):
                seen_garbled.append(text)

    watcher = threading.Thread(target=watch)
    watcher.start()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_hammer, args=(str(tmp_path), n)) for n in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    stop.set()
    watcher.join()
    assert all(worker.exitcode == 0 for worker in workers)
    assert seen_garbled == []
    assert set(json.loads(path.read_text())["servers"]) <= {"server-0", "server-1", "server-2"}


def test_the_record_holds_only_failures_to_reach_a_server(home, worktrees, cli, postgres_server, monkeypatch):
    """An answer that refuses the request (here a database that does not exist) is not an outage."""
    main, _ = worktrees
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_server.url_for("no_such_database"))
    result = run_process(main, "list")
    assert result.returncode == 3 and "no_such_database" in result.stderr
    record = home / "server-health.json"
    assert not record.exists() or json.loads(record.read_text())["servers"] == {}


# --- the wire forms the writes build without pydantic --------------------------------

def test_the_hand_built_events_and_signals_are_the_models(home, worktrees, cli, monkeypatch):
    import sqlite3

    from baton.phases import PHASES
    from baton.registry.model import Phase
    from baton.registry.wire import event_adapter
    from baton.signals.model import Signal

    assert set(PHASES) == {phase.value for phase in Phase}
    main, _ = worktrees
    monkeypatch.setenv("BATON_DATABASE_URL", f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    assert cli(main, "bind", "OMN-1", "--agent", "claude")[0] == 0
    assert cli(main, "decide", "  Keep carts  ", "--context", " restarts ")[0] == 0
    assert cli(main, "update", "--phase", "reviewing", "--next", "n", "--done", "d", "--failed", "f",
               "--depends-on", "OMN-9", "--goal", "g", "--constraint", "c", "--todo", "t", "--evidence", "e",
               "--check", f"{sys.executable} -c pass")[0] == 0
    assert cli(main, "end", "--status", "stalled")[0] == 0
    with sqlite3.connect(home / "pending-writes.db") as conn:
        bodies = [body for (body,) in conn.execute("SELECT body FROM outbox ORDER BY seq")]
    adapter = event_adapter()
    events = [adapter.validate_json(body) for body in bodies]
    assert [e.type for e in events] == [
        "bound", "checkpoint_taken", "decision_recorded", "phase_changed", "next_action_set", "step_completed",
        "failure_recorded", "dependency_added", "goal_set", "constraint_added", "work_remaining", "evidence_recorded",
        "check_recorded", "ended"]
    for body, event in zip(bodies, events, strict=True):
        assert json.loads(adapter.dump_json(event)) == {**json.loads(body),
                                                        "at": json.loads(adapter.dump_json(event))["at"]}
    assert events[2].text == "Keep carts" and events[2].context == "restarts"
    with sqlite3.connect(home / "signals.db") as conn:
        rows = conn.execute("SELECT body FROM signals ORDER BY seq")
        signals = [Signal.model_validate_json(body) for (body,) in rows]
    assert [(s.signal_type.value, s.payload.phase) for s in signals] == [
        ("ticket_claimed", None), ("decision_recorded", None), ("phase_changed", "reviewing")]


def test_a_session_id_the_model_refuses_is_bad_input_before_anything_is_kept(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("BATON_SESSION_ID", "s" * 200)
    code, _, err = cli(main, "decide", "--task", "OMN-1", "x")
    assert code == 2 and "session id" in err
    assert not (home / "kafka-events-outbox.db").exists()


# --- the projector --------------------------------------------------------------------

def test_the_consumer_group_follows_the_topic_prefix():
    from baton.skills.services.projector import default_group

    assert default_group("baton.") == "baton-projector"
    assert default_group("staging.") == "staging-projector" != default_group("prod.")


def test_the_projector_logs_a_store_failure_when_it_happens_and_when_it_is_back(home, worktrees, cli, kafka_server,
                                                                                 postgres_server, postgres_url,
                                                                                 monkeypatch):
    main, _ = worktrees
    proxy = Outage(("127.0.0.1", postgres_server.port), mode=STALL)
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url.replace(f":{postgres_server.port}/", f":{proxy.port}/"))
    assert run_process(main, "bind", "OMN-1").returncode == 0
    assert run_process(main, "deliver").returncode == 0
    daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.2"],
                              cwd=main, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    logged: list[str] = []
    reader = threading.Thread(target=lambda: logged.extend(iter(daemon.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00 baton projector: "
        wait_for(lambda: any(re.match(stamp + "session registry unavailable: ", line) for line in logged),
                 timeout=60, what="the registry's failure logged while the projector runs")
        proxy.switch(FORWARD)
        wait_for(lambda: any(re.match(stamp + "session registry is back after ", line) for line in logged),
                 timeout=60, what="the registry's return logged")
        assert daemon.poll() is None
        # The repair and gc the running projector applies at its start say so in lines of their own.
        failures = [line for line in logged if "session registry unavailable" in line
                    and "gc: not run" not in line and "repair: not run" not in line]
        assert len(failures) == 1, logged
    finally:
        daemon.terminate()
        daemon.wait(30)
        proxy.close()


def test_projectors_of_two_prefixes_do_not_block_each_other(home, worktrees, kafka_server, monkeypatch, tmp_path):
    main, _ = worktrees
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    first = f"test-{uuid.uuid4().hex[:10]}."
    # Another deployment on the same Kafka: its own prefix and data home.
    second = {"BATON_KAFKA_TOPIC_PREFIX": f"test-{uuid.uuid4().hex[:10]}.", "BATON_HOME": str(tmp_path / "other")}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BATON_KAFKA_TOPIC_PREFIX": first}
    assert run_process(main, "bind", "OMN-1", env={"BATON_KAFKA_TOPIC_PREFIX": first}).returncode == 0
    assert run_process(main, "bind", "OMN-2", env=second).returncode == 0
    with open(tmp_path / "daemon.log", "w") as log:  # the daemon writes to its own copy
        daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.2"],
                                  cwd=main, stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        # A running projector of the first prefix is a member of its group; a catch-up run
        # of the second prefix commits in a group of its own.
        wait_for(lambda: "OMN-1" in run_process(main, "list", env={"BATON_KAFKA_TOPIC_PREFIX": first}).stdout,
                 timeout=120, what="the first prefix's projector applying OMN-1")
        caught_up = run_process(main, "projector", "--once", env=second)
        assert caught_up.returncode == 0, caught_up.stderr
        assert caught_up.stdout.startswith("applied 2 events")  # the bind and the run it starts
    finally:
        daemon.terminate()
        daemon.wait(30)
