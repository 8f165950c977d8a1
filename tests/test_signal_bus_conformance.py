"""One conformance suite for every SignalBus backend (SQLite log, Kafka topic)."""

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from baton.outcome import Found, Unavailable
from baton.signals.model import Signal, SignalPayload
from tests.timing import wait_for

T0 = datetime.now(UTC) - timedelta(hours=1)


@pytest.fixture(params=["sqlite", "kafka"])
def bus(request, tmp_path):
    if request.param == "sqlite":
        from baton.signals.sqlite import SqliteSignalBus

        backend = SqliteSignalBus(tmp_path / "signals.db", timeout=2, project="r")
    else:
        from baton.signals.kafka import KafkaSignalBus

        server = request.getfixturevalue("kafka_server")
        backend = KafkaSignalBus(server.bootstrap, tmp_path / "outbox.db", timeout=5, project="r",
                                 topic=request.getfixturevalue("kafka_topic"))
    yield backend
    backend.close()


def signal(task: str, minutes: int, **payload) -> Signal:
    return Signal(signal_id=uuid.uuid4(), signal_type="rebase_needed", task_id=task, session_id="s", repo="r",
                  emitted_at=T0 + timedelta(minutes=minutes), payload=SignalPayload(**payload))


def test_publish_is_idempotent_and_reads_filter_by_subject_and_time(bus):
    first = signal("A-1", 1, related_task_id="B-1")
    second = signal("C-1", 2, file_paths=["src/x.py"])
    third = signal("A-1", 3)
    assert bus.publish([first, second, third]) == [True, True, True]
    assert bus.publish([first]) == [False]
    assert bus.known([str(first.signal_id), str(uuid.uuid4())]) == {str(first.signal_id)}
    about_b = bus.concerning(["task:B-1"], after=None, limit=10)
    assert isinstance(about_b, Found) and about_b.value == [first]
    assert bus.concerning(["file:r:src/x.py", "task:A-1"], after=T0 + timedelta(minutes=1), limit=10).value == [second,
                                                                                                                third]
    assert bus.concerning(["task:A-1"], after=None, limit=1).value == [third], "the newest within the limit"
    assert bus.recent(task_id=None, after=None, limit=10).value == [first, second, third]
    assert bus.recent(task_id="C-1", after=None, limit=10).value == [second]


def test_conflict_pairs_are_the_tickets_of_the_conflict_signals_after_a_time(bus):
    """What a repair reads of the log, once for its window: a pair a conflict, no other type."""
    def conflict(task: str, other: str, minutes: int) -> Signal:
        return Signal.model_validate({**signal(task, minutes, related_task_id=other).model_dump(),
                                      "signal_type": "conflict_detected"})

    bus.publish([conflict("A-1", "B-1", 1), signal("A-1", 2, related_task_id="D-1"), conflict("C-1", "A-1", 3),
                 conflict("B-1", "A-1", 4)])
    assert bus.conflict_pairs(after=None).value == {frozenset(("A-1", "B-1")), frozenset(("A-1", "C-1"))}
    assert bus.conflict_pairs(after=T0 + timedelta(minutes=1)).value == {frozenset(("A-1", "B-1")),
                                                                         frozenset(("A-1", "C-1"))}
    assert bus.conflict_pairs(after=T0 + timedelta(minutes=3)).value == {frozenset(("A-1", "B-1"))}
    assert bus.conflict_pairs(after=T0 + timedelta(minutes=4)).value == set()


def test_the_stored_form_reads_as_the_model_does(bus):
    """The prompt hook reads signals in their stored form (baton.signals.wire.WireSignal)."""
    from baton.signals.wire import WireSignal

    signals = [signal("A-1", 1, related_task_id="B-1"), signal("A-1", 2, file_paths=["src/ü.py"], pr_number=47,
                                                                  reason="merged PR #47"),
               Signal(signal_id=uuid.uuid4(), signal_type="phase_changed", task_id="A-1", session_id="s", repo="r",
                      emitted_at=T0 + timedelta(minutes=3), payload=SignalPayload(phase="reviewing"))]
    bus.publish(signals)
    models = bus.concerning(["task:A-1"], after=None, limit=10).value
    wire = bus.concerning_wire(["task:A-1"], after=None, limit=10).value
    assert models == signals and all(isinstance(w, WireSignal) for w in wire)
    assert [Signal.model_validate_json(w.to_json()) for w in wire] == models
    assert [(w.summary(), w.emitted_at, w.subjects()) for w in wire] == [(m.summary(), m.emitted_at, m.subjects())
                                                                       for m in models]
    assert bus.concerning_wire([], after=None, limit=10).value == []


def test_kafka_down_keeps_signals_locally_and_delivers_them_later(tmp_path, kafka_server, kafka_topic):
    from baton.signals.kafka import KafkaSignalBus

    bus = KafkaSignalBus(kafka_server.bootstrap, tmp_path / "outbox.db", timeout=2, topic=kafka_topic, project="r")
    bus.publish([signal("A-1", 1)])
    bus.deliver()
    kafka_server.kill()
    try:
        kept = signal("A-1", 2)
        started = time.monotonic()
        bus.publish([kept])  # kept in the outbox: a publish never waits for the server
        with pytest.raises(Exception, match="kept in"):
            bus.deliver()
        assert isinstance(bus.concerning(["task:A-1"], after=None, limit=10), Unavailable)
        assert time.monotonic() - started < 10
    finally:
        kafka_server.start()
    bus.close()
    reopened = KafkaSignalBus(kafka_server.bootstrap, tmp_path / "outbox.db", timeout=10, topic=kafka_topic,
                              project="r")
    # A signal produced without an answer (the broker died under it) is looked up on the topic
    # once no producer can still hold it (baton.kafka_outbox.SETTLE_MS), and sent again only if
    # absent: a read shows it from then on.
    expected = [T0 + timedelta(minutes=1), kept.emitted_at]

    def delivered():
        answer = reopened.concerning(["task:A-1"], after=None, limit=10)
        return isinstance(answer, Found) and [s.emitted_at for s in answer.value] == expected

    wait_for(delivered, 60, "the kept signal delivered once the broker is back")
    assert reopened.describe()["size"] == "0 signals waiting in the outbox"
    reopened.close()


def test_prepare_leaves_the_first_delivery_nothing_to_open(bus, request):
    """What the projector calls when it starts: on Kafka the topic exists and the producer
    is made (it connects meanwhile) before any signal is sent; a local log has nothing to do."""
    bus.prepare()
    if request.node.callspec.params["bus"] == "kafka":
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bus.bootstrap})
        # Created and acknowledged; another client's metadata may show it a moment later.
        wait_for(lambda: bus.topic in admin.list_topics(timeout=30).topics, timeout=30, what="the topic listed")
        assert bus._producer is not None
    first = signal("A-1", 1)
    assert bus.publish([first]) == [True]
    assert bus.recent(task_id="A-1", after=None, limit=10).value == [first]


def test_prune_removes_old_signals_on_the_embedded_log(bus, request):
    old, new = signal("P-1", 1, related_task_id="P-2"), signal("P-1", 90, related_task_id="P-2")
    bus.publish([old, new])
    removed = bus.prune(T0 + timedelta(minutes=30))
    if request.node.callspec.params["bus"] == "kafka":
        assert removed == 0, "Kafka's topic retention removes old signals, not Baton"
        return
    assert removed == 1
    assert bus.recent(task_id="P-1", after=None, limit=10).value == [new]
    assert bus.concerning(["task:P-2"], after=None, limit=10).value == [new]
    assert bus.prune(T0 + timedelta(minutes=30)) == 0


def test_baton_creates_the_signals_topic_with_the_retention_setting(home, tmp_path, kafka_server, monkeypatch,
                                                                     worktrees, cli):
    """`[retention] signals` in baton.toml becomes the topic's retention.ms when Baton creates it."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from baton.signals.kafka import SIGNALS_TOPIC

    prefix = f"test-{uuid.uuid4().hex[:10]}."
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", prefix)
    home.mkdir(parents=True, exist_ok=True)
    (home / "baton.toml").write_text('[retention]\nsignals = "12d"\n')
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    assert cli(main, "deliver")[0] == 0
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"{prefix}{SIGNALS_TOPIC}")
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})  # kept: its futures need it alive
    config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert config["retention.ms"].value == str(12 * 86400 * 1000)
