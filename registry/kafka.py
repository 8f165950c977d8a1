"""The registry's event log on Kafka: topic `baton.session-events.v1`, keyed by ticket.

With Kafka configured, writes do not touch the registry: their events are kept in a local
outbox, sent to this topic by the next delivery (baton.skills.runtime.delivery, or a read command), and
`baton projector` applies them to the registry, the graph and the recall index. A write
therefore never waits for Kafka, nor for the projector.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import StoreUnavailable
from baton.kafka_outbox import PARTITIONS, KafkaOutbox, client_config, kafka_failure
from baton.store_names import Store

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from baton.budget import AnyGate

STORE = Store.EVENT_LOG
EVENTS_TOPIC = "session-events.v1"


class KafkaEventLog(KafkaOutbox):
    """The registry's events kept in an outbox for a later delivery, without touching Kafka
    (keep, deliver, waiting, unconfirmed and forget_delivered, as KafkaOutbox does), and
    read back by `baton projector` (batches)."""

    def __init__(self, bootstrap: str, outbox: Path, *, timeout: float, topic: str = f"baton.{EVENTS_TOPIC}",
                 gate: AnyGate | None = None, partitions: int = PARTITIONS) -> None:
        """gate: the Kafka server's gate in the command's budget (baton.budget); without
        one, each call may wait `timeout` seconds. partitions: the topic's when Baton
        creates it (BATON_KAFKA_PARTITIONS); a topic made before keeps its own."""
        super().__init__(bootstrap, topic, outbox, timeout=timeout, store=STORE, gate=gate, partitions=partitions,
                         remember=True)
        self._consumer: Consumer | None = None

    def describe(self) -> dict[str, str]:
        with self.gate.call(STORE):
            partitions = self.topic_partitions()
        # A topic made before keeps its count: more projectors than partitions leave some idle.
        kept = "" if partitions == self.partitions else f" (BATON_KAFKA_PARTITIONS {self.partitions})"
        return {"backend": "kafka", "location": f"{self.bootstrap} topic {self.topic}, {partitions} partitions{kept}",
                "version": "event log for `baton projector`",
                "size": f"{self.waiting()} events waiting in the outbox"}

    def batches(self, group: str, *, size: int, idle: float, until_caught_up: bool) -> Iterator[list]:
        """Batches of messages for a consumer group, oldest first per partition.

        The caller commits a batch (commit(batch)) only after the stores took it, so a
        crash before that sends the batch again to the group's next consumer. With
        until_caught_up, reads each partition from the group's committed offset to its high
        watermark and stops (run it while no projector of the group is running); else
        joins the group and polls every `idle` seconds until interrupted, yielding an empty
        batch when nothing came (the projector's periodic work runs then).
        """
        from confluent_kafka import (
            OFFSET_BEGINNING,
            Consumer,
            KafkaError,
            KafkaException,
            TopicPartition,
        )

        with self.gate.call(STORE):
            self.ensure_topic()
        self._consumer = consumer = Consumer({**client_config(self.bootstrap, self.timeout), "group.id": group,
                                              "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                              "enable.partition.eof": until_caught_up,
                                              # librdkafka's default prefetch queues a backlog of
                                              # up to 64 MiB: 50,000 events cost 17 MiB more
                                              # than this (bench.projector --memory).
                                              "queued.min.messages": 2 * size, "queued.max.messages.kbytes": 8192,
                                              # The broker holds an empty fetch this long: a
                                              # catch-up run wants the end of a partition at once.
                                              "fetch.wait.max.ms": 10 if until_caught_up else 500,
                                              # A crashed projector's partitions move to another
                                              # member after this long (the broker's minimum).
                                              "session.timeout.ms": 6000})
        try:
            if until_caught_up:
                # A catch-up run takes every partition itself from the group's committed
                # offsets instead of joining the group: no rebalance to wait for.
                partitions = consumer.list_topics(self.topic, timeout=self.timeout).topics[self.topic].partitions
                committed = consumer.committed([TopicPartition(self.topic, p) for p in partitions],
                                               timeout=self.timeout)
                consumer.assign([TopicPartition(self.topic, tp.partition,
                                                tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                                 for tp in committed])
            else:
                consumer.subscribe([self.topic])
            at_end: set[int | None] = set()
            stalled_after = time.monotonic() + max(10 * self.timeout, 10.0)
            while True:
                # consume() waits its whole timeout unless `size` messages arrive: a catch-up
                # run polls briefly and stops on end-of-partition events instead.
                received = consumer.consume(num_messages=size, timeout=0.05 if until_caught_up else idle)
                messages = []
                for message in received:  # in order: a partition is at its end after its last message
                    error = message.error()
                    if not error:
                        messages.append(message)
                        at_end.discard(message.partition())
                    elif error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                    else:
                        raise KafkaException(error)
                if messages:
                    stalled_after = time.monotonic() + max(10 * self.timeout, 10.0)
                if messages or not until_caught_up:
                    yield messages  # a running projector hears every `idle` seconds, events or not
                if until_caught_up and len(at_end) == len(consumer.assignment()):
                    return
                if until_caught_up and time.monotonic() > stalled_after:
                    raise KafkaException(f"the end of {self.topic} was not reached; "
                                         f"partitions at their end: {sorted(p for p in at_end if p is not None)}")
        except KafkaException as exc:
            raise kafka_failure(STORE, self.bootstrap, exc) from exc
        finally:
            consumer.close()

    def commit(self, batch: list) -> None:
        from confluent_kafka import KafkaException

        try:
            assert self._consumer is not None, "a batch comes from batches(), which made the consumer"
            self._consumer.commit(asynchronous=False, offsets=_next_offsets(batch))
        except KafkaException as exc:
            # A catch-up run cannot commit while the group has a member: a projector that
            # runs, or one that died less than its session timeout ago.
            raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: cannot commit the group's offsets ({exc}); "
                                          "is another projector of the group running?") from exc


def _next_offsets(batch: list) -> list:
    from confluent_kafka import TopicPartition

    last = {(message.topic(), message.partition()): message.offset() for message in batch}  # the last one wins
    return [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in last.items()]
