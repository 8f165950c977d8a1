"""With Kafka configured, writes are events on `session-events.v1` and the projector applies
them: at least once, replay-safe, offsets committed only after the stores took them."""

import json
import signal
import subprocess
import sys
import uuid

import pytest

from tests.timing import wait_for
from tests.workspace import ROOT, run_process


@pytest.fixture
def kafka_home(home, monkeypatch, kafka_server):
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    return home


def baton(cwd, *args, env=None):
    result = run_process(cwd, *args, env=env)
    assert result.returncode in (0, 3), result.stderr
    return result


def session(cwd, task, env=None):
    """The registry's view, read without binding (list does not write)."""
    rows = json.loads(baton(cwd, "list", "--all", "--json", env=env).stdout)
    return next((row for row in rows if row["task_id"] == task), None)


def test_writes_wait_for_the_projector_and_replays_change_nothing(kafka_home, worktrees, tmp_path):
    main, second = worktrees
    baton(main, "bind", "OMN-1")
    baton(main, "touch", "src/db.py", "src/cart.py")
    baton(main, "decide", "Keep carts in PostgreSQL")
    baton(second, "bind", "OMN-2")
    baton(second, "decide", "Persist payment intents in PostgreSQL")
    assert baton(second, "touch", "src/db.py").stdout == "", "a hook's touch only keeps the event"
    other_machine = {"BATON_HOME": str(tmp_path / "other-machine")}  # this one's reads fold its own writes in
    assert session(main, "OMN-1", other_machine) is None, "nothing reaches the registry before the projector"

    applied = baton(main, "projector", "--once")
    assert applied.stdout.startswith("applied 10 events")  # each bind with its run and checkpoint
    first = session(main, "OMN-1")
    assert sorted(first["files_touched"]) == ["src/cart.py", "src/db.py"] and first["conflicts_with"] == ["OMN-2"]
    signals = json.loads(baton(main, "signals", "--task", "OMN-1", "--json").stdout)
    assert [s["signal_type"] for s in signals].count("conflict_detected") == 1, "the projector signalled the overlap"
    assert baton(main, "projector", "--once").stdout.startswith("applied 0 events"), "offsets were committed"

    replay = baton(main, "projector", "--once", "--group", "replay-from-the-start")
    assert replay.stdout.startswith("applied 10 events")
    assert session(main, "OMN-1") == first, "applying every event again changes nothing"
    assert baton(main, "index").stdout.startswith("Indexed 2 decisions")
    resumed = json.loads(baton(main, "resume", "OMN-1", "--json").stdout)
    assert [d["text"] for d in resumed["session"]["decisions"]] == ["Keep carts in PostgreSQL"]
    assert [r["task_id"] for r in resumed["related_decisions"]] == ["OMN-2"]


def test_a_killed_projector_loses_nothing_and_doubles_nothing(kafka_home, worktrees):
    main, _ = worktrees
    baton(main, "bind", "OMN-1")
    daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.1"],
                              cwd=main,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**__import__("os").environ,
                                                                                        "PYTHONPATH": str(ROOT)})
    try:
        wait_for(lambda: session(main, "OMN-1") is not None, timeout=60, what="the projector's first event")
        for n in range(5):
            baton(main, "touch", f"src/f{n}.py")
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(30)
    for n in range(5, 10):
        baton(main, "decide", f"decision {n}")
    # The group forgets the killed member after its session timeout (6 s); until then a
    # catch-up run refuses to commit, and applies again next time.
    wait_for(lambda: run_process(main, "projector", "--once").returncode == 0, timeout=60,
             what="a catch-up run after the crash")
    projected = session(main, "OMN-1")
    assert sorted(projected["files_touched"]) == sorted(f"src/f{n}.py" for n in range(5))
    decisions = json.loads(baton(main, "resume", "OMN-1", "--json").stdout)["session"]["decisions"]
    assert sorted(d["text"] for d in decisions) == sorted(f"decision {n}" for n in range(5, 10))


def test_the_projector_readies_the_signal_bus_when_it_starts(kafka_home, worktrees):
    """Its first batch's signals find the topic made and the producer connecting, even
    before there is anything to apply (a log with no events here)."""
    import os

    from confluent_kafka.admin import AdminClient

    from baton.signals.kafka import SIGNALS_TOPIC

    baton(worktrees[0], "projector", "--once")
    topics = AdminClient({"bootstrap.servers": os.environ["BATON_KAFKA_BOOTSTRAP"]}).list_topics(timeout=30).topics
    assert f"{os.environ['BATON_KAFKA_TOPIC_PREFIX']}{SIGNALS_TOPIC}" in topics


def test_the_projector_needs_kafka(home, worktrees):
    result = run_process(worktrees[0], "projector", "--once")
    assert result.returncode == 2 and "needs Kafka" in result.stderr


def test_a_running_projector_applies_retention_periodically(kafka_home, worktrees, tmp_path):
    """The projector runs `baton gc` when it starts and every [retention] gc_interval: the old
    ended ticket goes; an active ticket and the ended one it depends on stay."""
    main, second = worktrees
    kafka_home.mkdir(mode=0o700, exist_ok=True)
    (kafka_home / "baton.toml").write_text('[retention]\nended_sessions = "2s"\ngc_interval = 1\n')
    baton(main, "bind", "OLD-1")
    baton(main, "end", "--status", "completed")
    baton(main, "bind", "DEP-1")
    baton(main, "end", "--status", "completed")
    baton(second, "bind", "LIVE-1")
    baton(second, "update", "--depends-on", "DEP-1")
    baton(second, "decide", "refunds go through the ledger")
    baton(main, "projector", "--once")
    assert session(main, "OLD-1") is not None
    log = tmp_path / "projector.log"
    with log.open("w") as stderr:
        daemon = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "projector", "--idle", "0.1"],
                                  cwd=main, stdout=subprocess.DEVNULL, stderr=stderr,
                                  env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
        try:
            wait_for(lambda: session(main, "OLD-1") is None, timeout=60, what="the projector's gc of OLD-1")
            wait_for(lambda: log.read_text().count(" gc: ") >= 2, timeout=30, what="a second gc a second later")
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    runs = [line for line in log.read_text().splitlines() if " gc: " in line]
    assert "gc: removed 1 ended sessions" in runs[0] and all("gc: removed 0 ended sessions" in r for r in runs[1:])
    assert session(main, "DEP-1") is not None and session(second, "LIVE-1")["status"] == "active"


def test_a_topic_made_before_keeps_its_partitions(kafka_home, worktrees, monkeypatch):
    """BATON_KAFKA_PARTITIONS applies to an event topic Baton creates: one made before, with
    another count, is never made again; it goes on working and doctor says its count."""
    main, _ = worktrees
    monkeypatch.setenv("BATON_KAFKA_PARTITIONS", "2")
    baton(main, "bind", "OMN-1")
    assert baton(main, "projector", "--once").stdout.startswith("applied 3 events")
    monkeypatch.setenv("BATON_KAFKA_PARTITIONS", "8")
    baton(main, "touch", "src/db.py")
    assert baton(main, "projector", "--once").stdout.startswith("applied 1 events")
    assert session(main, "OMN-1")["files_touched"] == ["src/db.py"]
    reports = {r["store"]: r for r in json.loads(baton(main, "doctor", "--json").stdout)}
    assert reports["event log"]["location"].endswith(", 2 partitions (BATON_KAFKA_PARTITIONS 8)")
