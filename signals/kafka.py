"""The production signal bus: topic `baton.coordination-signals.v1` on Apache Kafka.

Publishing goes through a local outbox (SQLite in the data home): a signal is first kept
there, then produced with an idempotent producer (acks=all) and removed once Kafka
acknowledged it. While Kafka is down signals wait in the outbox and the next publish or
read delivers them, so nothing is lost; a signal delivered twice (an acknowledgement lost
in a crash) has the same deterministic id and readers keep one copy.

Reading never joins a consumer group: each partition is assigned directly, starting at
the offset of the requested time (offsets_for_times), and read up to its high watermark
within the store timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import StoreUnavailable
from baton.outcome import Found, Unavailable
from baton.sqlite import SqliteFile, guarded, write_transaction
from signals.base import SignalBus

if TYPE_CHECKING:
    from signals.model import Signal

STORE = "signal log"
SIGNALS_TOPIC = "coordination-signals.v1"
PARTITIONS = 3

OUTBOX_MIGRATIONS = [
    """
    CREATE TABLE outbox (
        signal_id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE sent (
        signal_id TEXT PRIMARY KEY
    ) WITHOUT ROWID;
    """,
]


class KafkaSignalBus(SignalBus):
    def __init__(self, bootstrap: str, outbox: Path, *, timeout: float, topic: str = f"baton.{SIGNALS_TOPIC}") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout = timeout
        self.outbox_path = outbox
        self._outbox = SqliteFile(outbox, OUTBOX_MIGRATIONS, timeout=timeout)
        self._producer = None
        self._topic_ready = False

    def _config(self) -> dict:
        millis = int(self.timeout * 1000)
        # log_level 0: librdkafka's own connection errors reach the caller as Unavailable.
        return {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": max(millis, 10),
                "log_level": 0}

    def _ensure_topic(self) -> None:
        if self._topic_ready:
            return
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self._config())
        try:
            if self.topic not in admin.list_topics(timeout=self.timeout).topics:
                futures = admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)], operation_timeout=self.timeout)
                try:
                    futures[self.topic].result(timeout=self.timeout)
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
        except KafkaException as exc:
            raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: {exc}") from exc
        self._topic_ready = True

    def _get_producer(self):
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer({**self._config(), "enable.idempotence": True, "acks": "all",
                                       "message.timeout.ms": int(self.timeout * 1000), "linger.ms": 0})
        return self._producer

    def _deliver_outbox(self) -> None:
        """Produce every signal waiting in the outbox; drop the ones Kafka acknowledged."""
        with guarded(STORE, self.outbox_path):
            pending = self._outbox.conn().execute("SELECT signal_id, task_id, body FROM outbox").fetchall()
        if not pending:
            return
        try:
            self._ensure_topic()
        except StoreUnavailable as exc:
            raise StoreUnavailable(STORE, f"{exc.reason}; {len(pending)} signals kept in {self.outbox_path}") from exc
        producer = self._get_producer()
        acknowledged: list[str] = []
        failures: list[str] = []

        def on_delivery(signal_id: str, error) -> None:
            if error is None:
                acknowledged.append(signal_id)
            else:
                failures.append(str(error))

        for signal_id, task_id, body in pending:
            producer.produce(self.topic, key=task_id.encode(), value=body.encode(),
                             on_delivery=lambda error, _message, signal_id=signal_id: on_delivery(signal_id, error))
        producer.flush(self.timeout)
        if acknowledged:
            with guarded(STORE, self.outbox_path):
                conn = self._outbox.conn()
                with write_transaction(conn):
                    conn.executemany("DELETE FROM outbox WHERE signal_id = ?", [(s,) for s in acknowledged])
        if len(acknowledged) < len(pending):
            reason = failures[0] if failures else f"no acknowledgement within {self.timeout:g}s"
            raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: {reason}; "
                                          f"{len(pending) - len(acknowledged)} signals kept in {self.outbox_path}")

    def publish(self, signals: Sequence[Signal]) -> list[bool]:
        fresh = []
        with guarded(STORE, self.outbox_path):
            conn = self._outbox.conn()
            with write_transaction(conn):
                for signal in signals:
                    signal_id = str(signal.signal_id)
                    new = conn.execute("INSERT OR IGNORE INTO sent (signal_id) VALUES (?)", (signal_id,)).rowcount == 1
                    if new:
                        conn.execute("INSERT OR IGNORE INTO outbox (signal_id, task_id, body) VALUES (?, ?, ?)",
                                     (signal_id, signal.task_id, signal.model_dump_json()))
                    fresh.append(new)
        self._deliver_outbox()
        return fresh

    def known(self, signal_ids: Sequence[str]) -> set[str]:
        if not signal_ids:
            return set()
        marks = ",".join("?" * len(signal_ids))
        with guarded(STORE, self.outbox_path):
            rows = self._outbox.conn().execute(f"SELECT signal_id FROM sent WHERE signal_id IN ({marks})", list(signal_ids))
            return {signal_id for (signal_id,) in rows}

    def _scan(self, after: datetime | None, keep) -> list[Signal]:
        """Every signal on the topic emitted after `after` that keep() accepts, oldest first."""
        from confluent_kafka import (
            OFFSET_END,
            Consumer,
            KafkaError,
            KafkaException,
            TopicPartition,
        )

        from signals.model import Signal

        self._ensure_topic()
        consumer = Consumer({**self._config(), "group.id": f"baton-reader-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "enable.partition.eof": True})
        try:
            partitions = consumer.list_topics(self.topic, timeout=self.timeout).topics[self.topic].partitions
            since_ms = int(after.timestamp() * 1000) if after else 0
            starts = consumer.offsets_for_times(
                [TopicPartition(self.topic, p, since_ms) for p in partitions], timeout=self.timeout)
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=self.timeout)[1]
                    for p in partitions}
            todo = [tp for tp in starts if tp.offset != OFFSET_END and tp.offset >= 0 and tp.offset < ends[tp.partition]]
            consumer.assign(todo)
            remaining = {tp.partition for tp in todo}
            found: dict[str, Signal] = {}
            deadline = clock.now().timestamp() + self.timeout
            while remaining:
                if clock.now().timestamp() > deadline:
                    raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: topic not read within {self.timeout:g}s")
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        remaining.discard(message.partition())
                        continue
                    raise KafkaException(message.error())
                if message.offset() + 1 >= ends[message.partition()]:
                    remaining.discard(message.partition())
                signal = Signal.model_validate_json(message.value())
                if (after is None or signal.emitted_at > after) and keep(signal):
                    found.setdefault(str(signal.signal_id), signal)
            return sorted(found.values(), key=lambda s: (s.emitted_at, str(s.signal_id)))
        except KafkaException as exc:
            raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: {exc}") from exc
        finally:
            consumer.close()

    def _read(self, after: datetime | None, keep, limit: int) -> Found[list[Signal]] | Unavailable:
        try:
            self._deliver_outbox()
            return Found(self._scan(after, keep)[-limit:])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def concerning(self, subjects: Sequence[str], *, after: datetime | None, limit: int) -> Found[list[Signal]] | Unavailable:
        wanted = set(subjects)
        if not wanted:
            return Found([])
        return self._read(after, lambda signal: not wanted.isdisjoint(signal.subjects()), limit)

    def recent(self, *, task_id: str | None, after: datetime | None, limit: int) -> Found[list[Signal]] | Unavailable:
        subject = f"task:{task_id}" if task_id else None
        return self._read(after, lambda signal: subject is None or subject in signal.subjects(), limit)

    def describe(self) -> dict[str, str]:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        try:
            metadata = AdminClient(self._config()).list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise StoreUnavailable(STORE, f"Kafka at {self.bootstrap}: {exc}") from exc
        with guarded(STORE, self.outbox_path):
            waiting = self._outbox.conn().execute("SELECT count(*) FROM outbox").fetchone()[0]
        return {"backend": "kafka", "location": f"{self.bootstrap} topic {self.topic}",
                "version": f"cluster {metadata.cluster_id}, {len(metadata.brokers)} broker(s)",
                "size": f"{waiting} signals waiting in the outbox"}

    def close(self) -> None:
        if self._producer is not None:
            # Whatever Kafka did not acknowledge is still in the outbox: drop it here
            # instead of letting the producer hold the process open retrying it.
            self._producer.purge()
            self._producer.flush(0)
            self._producer = None
        self._outbox.close()
