"""Each kept message reaches its Kafka topic once, even when a delivery gave up on an
acknowledgement that the broker, stalled, sent late (the second copy of a signal the
soak found): in the same process the message is not produced again while its producer
still holds it, and a process after it waits for the request to settle and looks the
message up on the topic first."""

import json
import time
import uuid
from datetime import UTC, datetime

import pytest

from baton.errors import StoreUnavailable
from baton.kafka_outbox import SETTLE_MS
from baton.signals.model import Signal, SignalPayload
from tests.timing import wait_for


def conflict(task: str) -> Signal:
    return Signal(signal_id=uuid.uuid4(), signal_type="conflict_detected", task_id=task, session_id="s", repo="r",
                  emitted_at=datetime.now(UTC), payload=SignalPayload(related_task_id="OTHER-1"))


def copies(kafka_server, topic: str, signal_id: str) -> int:
    """How many messages of the topic carry the signal, read from its start to its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({**kafka_server.client_config(), "group.id": f"count-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        remaining, found = set(partitions), 0
        while remaining:
            message = consumer.poll(10)
            assert message is not None, "the topic was not read to its end"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                remaining.discard(message.partition())
                continue
            found += json.loads(message.value())["signal_id"] == signal_id
        return found
    finally:
        consumer.close()


def stalled_delivery(kafka_server, bus, signal: Signal) -> None:
    """Deliver the signal while the broker is stalled: the delivery gives up, and the broker
    writes the message once it goes on."""
    bus.publish([conflict("WARM-1")])
    bus.deliver()  # the producer connected, its id handshake done: the next produce is sent
    bus.publish([signal])
    kafka_server.pause()
    try:
        with pytest.raises(StoreUnavailable, match="kept in"):
            bus.deliver()
    finally:
        kafka_server.resume()


def test_a_late_acknowledgement_in_the_same_process_sends_nothing_twice(tmp_path, kafka_server, kafka_topic):
    from baton.signals.kafka import KafkaSignalBus

    bus = KafkaSignalBus(kafka_server.bootstrap, tmp_path / "outbox.db", timeout=2, topic=kafka_topic, project="r")
    try:
        signal = conflict("LATE-1")
        stalled_delivery(kafka_server, bus, signal)
        wait_for(lambda: copies(kafka_server, kafka_topic, str(signal.signal_id)) >= 1, timeout=60,
                 what="the stalled broker writing the message")
        wait_for(lambda: _delivered(bus), timeout=60, what="a delivery that succeeds")
        assert bus.waiting() == 0
    finally:
        bus.close()
    assert copies(kafka_server, kafka_topic, str(signal.signal_id)) == 1


def test_the_next_process_looks_a_message_up_before_producing_it_again(tmp_path, kafka_server, kafka_topic):
    """The first process gave up and ended (its producer purged) with the message written
    after all; the next one finds it on the topic and forgets it."""
    from baton.signals.kafka import KafkaSignalBus

    first = KafkaSignalBus(kafka_server.bootstrap, tmp_path / "outbox.db", timeout=2, topic=kafka_topic, project="r")
    signal = conflict("KILLED-1")
    try:
        produced = time.monotonic()
        stalled_delivery(kafka_server, first, signal)
    finally:
        first.close()
    wait_for(lambda: copies(kafka_server, kafka_topic, str(signal.signal_id)) >= 1, timeout=60,
             what="the stalled broker writing the message")
    second = KafkaSignalBus(kafka_server.bootstrap, tmp_path / "outbox.db", timeout=5, topic=kafka_topic, project="r")
    try:
        # A request on its way may still be written: it waits SETTLE_MS after the produce.
        # On a busy machine the broker may take that long to write it: then it is settled;
        # or the first process's close heard the late acknowledgement and forgot it.
        if second.waiting() and time.monotonic() - produced < SETTLE_MS / 1000 - 2:
            with pytest.raises(StoreUnavailable, match="looked up on the topic in"):
                second.deliver()
        wait_for(lambda: _delivered(second), timeout=90, what="the message looked up once settled")
        assert second.waiting() == 0
        assert [s.signal_id for s in second.recent(task_id="KILLED-1", after=None, limit=10).value] == [
            signal.signal_id]
    finally:
        second.close()
    assert copies(kafka_server, kafka_topic, str(signal.signal_id)) == 1


def _delivered(bus) -> bool:
    try:
        bus.deliver()
    except StoreUnavailable:
        return False
    return True
