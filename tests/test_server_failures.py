"""Each server killed on its own while Baton is in use: resume answers within its timeout,
names the store that is gone, keeps the others, and everything answers again once the
server is back, without restarting anything: the health record skips a server found down
for BATON_RECHECK_AFTER seconds, and `baton doctor` clears it at once."""

import json
import time

import pytest

from tests import timing
from tests.stores import use_servers
from tests.workspace import run_process, two_agents


@pytest.fixture
def on_servers(request, home, monkeypatch, tmp_path, worktrees, cli):
    use_servers(request, monkeypatch, tmp_path, qdrant=True)
    return two_agents(worktrees, cli)


@pytest.fixture(params=["kafka", "no-kafka"])
def on_servers_maybe_kafka(request, home, monkeypatch, tmp_path, worktrees, cli):
    use_servers(request, monkeypatch, tmp_path, qdrant=True, kafka=request.param == "kafka")
    return two_agents(worktrees, cli)


def resume(cwd, timeout: str = "2"):
    started = time.monotonic()
    result = run_process(cwd, "resume", "OMN-1", "--json", env={"BATON_STORE_TIMEOUT": timeout})
    return result, json.loads(result.stdout), time.monotonic() - started


def healthy_floor(cwd) -> float:
    """What a resume costs here and now with every server answering (tests/timing.py)."""
    return timing.floor(lambda: run_process(cwd, "resume", "OMN-1", "--json"))


def back(cwd) -> None:
    """The server is up again: the doctor asks afresh and clears the health record (a
    server just back recovers its data and warms up: give it more time)."""
    run_process(cwd, "doctor", env={"BATON_STORE_TIMEOUT": "10"})


@pytest.mark.parametrize("server, store", [("neo4j_server", "graph"), ("kafka_server", "signals")])
def test_one_server_down(request, on_servers, server, store):
    process = request.getfixturevalue(server)
    healthy = healthy_floor(on_servers)
    budget = timing.store_budget(healthy)
    process.kill()
    try:
        result, answer, elapsed = resume(on_servers, timeout=f"{budget:g}")
    finally:
        process.start()
    assert result.returncode == 0 and answer["status"] == "found"
    assert answer["stores"][store].startswith("unavailable: ")
    assert all(state == "ok" for name, state in answer["stores"].items() if name != store), answer["stores"]
    assert elapsed < timing.bound(healthy, budget), f"resume took {elapsed:.1f}s, {store} down (floor {healthy:.2f}s)"
    back(on_servers)
    result, answer, _ = resume(on_servers, timeout="10")
    assert all(state == "ok" for state in answer["stores"].values()), answer["stores"]


def test_postgres_down(request, on_servers, postgres_server):
    healthy = healthy_floor(on_servers)
    budget = timing.store_budget(healthy)
    postgres_server.kill()
    try:
        result, answer, elapsed = resume(on_servers, timeout=f"{budget:g}")
    finally:
        postgres_server.start()
    assert result.returncode == 3 and answer["status"] == "unavailable" and answer["bound"] is True
    assert "PostgreSQL at 127.0.0.1" in answer["reason"]
    assert elapsed < timing.bound(healthy, budget), f"resume took {elapsed:.1f}s (floor {healthy:.2f}s)"
    back(on_servers)
    result, answer, _ = resume(on_servers, timeout="10")
    assert result.returncode == 0 and answer["status"] == "found"


def test_signals_emitted_while_kafka_is_down_arrive_once_it_is_back(on_servers, kafka_server, worktrees, cli):
    _, second = worktrees
    kafka_server.kill()
    try:
        code, _, err = cli(second, "update", "--phase", "reviewing")
        assert code == 0 and "warning" not in err, "a write keeps its signal for the delivery, without waiting"
    finally:
        kafka_server.start()
    # The next read (or publish) delivers what waited in the outbox.
    signals = json.loads(cli(second, "signals", "--task", "OMN-2", "--json")[1])
    kinds = [s["signal_type"] for s in signals]
    assert kinds.count("phase_changed") == 1


def test_writes_made_while_postgres_is_down_are_kept_and_delivered_once(on_servers_maybe_kafka, postgres_server, cli,
                                                                         monkeypatch):
    """Without Kafka, the writes wait in a local file; with Kafka they wait in the event log
    until the projector can apply them."""
    on_servers = on_servers_maybe_kafka
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "1")
    postgres_server.kill()
    try:
        for args in (("touch", "src/while-down.py"), ("decide", "Decided while PostgreSQL was down"),
                     ("update", "--next", "check the migration")):
            code, _, err = cli(on_servers, *args)
            assert code == 0, err  # kept: in the Kafka outbox or among the pending writes
    finally:
        postgres_server.start()
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "10")
    session = json.loads(cli(on_servers, "resume", "OMN-1", "--json")[1])["session"]
    assert "src/while-down.py" in session["files_touched"]
    assert [d["text"] for d in session["decisions"]].count("Decided while PostgreSQL was down") == 1
    assert session["next_action"] == "check the migration"
    again = json.loads(cli(on_servers, "resume", "OMN-1", "--json")[1])["session"]
    assert again["decisions"] == session["decisions"] and again["files_touched"] == session["files_touched"]
