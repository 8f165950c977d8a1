"""A local outbox in front of a Kafka topic: keep first, produce, forget once acknowledged.

Messages are kept in a SQLite file in the data home, then produced by librdkafka's
idempotent producer (acks=all) and deleted when Kafka acknowledged them: the broker drops
the producer's own retries, so a retry after a lost acknowledgement within one process
writes nothing twice. While Kafka is down messages wait and a later delivery sends them; a
message sent again by another process carries the same id, which every reader deduplicates
on, and the registry's projection does not depend on order.

The idempotent producer's id handshake delays a process's first produce; hooks never pay
it, since a touch only keeps its event and a background delivery (skills.relay) sends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from baton.errors import StoreUnavailable
from baton.sqlite import SqliteFile, guarded, write_transaction

PARTITIONS = 3

MIGRATIONS = [
    """
    CREATE TABLE outbox (
        message_id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE kept (
        message_id TEXT PRIMARY KEY
    ) WITHOUT ROWID;
    CREATE TABLE topics (
        name TEXT PRIMARY KEY
    ) WITHOUT ROWID;
    """,
]


def client_config(bootstrap: str, timeout: float) -> dict:
    # log_level 0: librdkafka's own connection errors reach the caller as Unavailable.
    return {"bootstrap.servers": bootstrap, "socket.timeout.ms": max(int(timeout * 1000), 10), "log_level": 0}


class KafkaOutbox:
    def __init__(self, bootstrap: str, topic: str, path: Path, *, timeout: float, store: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.path = path
        self.timeout = timeout
        self.store = store
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)
        self._producer = None
        self._topic_ready = False

    def unavailable(self, reason: str) -> StoreUnavailable:
        return StoreUnavailable(self.store, f"Kafka at {self.bootstrap}: {reason}")

    def ensure_topic(self) -> None:
        """Create the topic unless this data home already saw it (saves an admin round trip
        in every new process)."""
        if self._topic_ready:
            return
        with guarded(self.store, self.path):
            if self._db.conn().execute("SELECT 1 FROM topics WHERE name = ?", (self.topic,)).fetchone():
                self._topic_ready = True
                return
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(client_config(self.bootstrap, self.timeout))
        try:
            if self.topic not in admin.list_topics(timeout=self.timeout).topics:
                futures = admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)], operation_timeout=self.timeout)
                try:
                    futures[self.topic].result(timeout=self.timeout)
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
        except KafkaException as exc:
            raise self.unavailable(str(exc)) from exc
        with guarded(self.store, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.execute("INSERT OR IGNORE INTO topics (name) VALUES (?)", (self.topic,))
        self._topic_ready = True

    def keep(self, messages: Sequence[tuple[str, str, str]]) -> list[bool]:
        """Keep (message id, key, body) triples; True for each id never kept before."""
        fresh = []
        with guarded(self.store, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                for message_id, key, body in messages:
                    new = conn.execute("INSERT OR IGNORE INTO kept (message_id) VALUES (?)", (message_id,)).rowcount == 1
                    if new:
                        conn.execute("INSERT OR IGNORE INTO outbox (message_id, key, body) VALUES (?, ?, ?)",
                                     (message_id, key, body))
                    fresh.append(new)
        return fresh

    def known(self, message_ids: Sequence[str]) -> set[str]:
        if not message_ids:
            return set()
        marks = ",".join("?" * len(message_ids))
        with guarded(self.store, self.path):
            rows = self._db.conn().execute(f"SELECT message_id FROM kept WHERE message_id IN ({marks})", list(message_ids))
            return {message_id for (message_id,) in rows}

    def waiting(self) -> int:
        with guarded(self.store, self.path):
            return self._db.conn().execute("SELECT count(*) FROM outbox").fetchone()[0]

    def deliver(self) -> None:
        """Produce everything waiting; drop what Kafka acknowledged, raise if some still waits."""
        with guarded(self.store, self.path):
            pending = self._db.conn().execute("SELECT message_id, key, body FROM outbox").fetchall()
        if not pending:
            return
        kept = f"{len(pending)} messages kept in {self.path}"
        try:
            self.ensure_topic()
        except StoreUnavailable as exc:
            raise StoreUnavailable(self.store, f"{exc.reason}; {kept}") from exc
        producer = self._get_producer()
        acknowledged: list[str] = []
        failures: list[str] = []

        def on_delivery(message_id: str, error) -> None:
            (failures.append(str(error)) if error is not None else acknowledged.append(message_id))

        for message_id, key, body in pending:
            producer.produce(self.topic, key=key.encode(), value=body.encode(),
                             on_delivery=lambda error, _message, message_id=message_id: on_delivery(message_id, error))
        producer.flush(self.timeout)
        if acknowledged:
            with guarded(self.store, self.path):
                conn = self._db.conn()
                with write_transaction(conn):
                    conn.executemany("DELETE FROM outbox WHERE message_id = ?", [(m,) for m in acknowledged])
        if len(acknowledged) < len(pending):
            reason = failures[0] if failures else f"no acknowledgement within {self.timeout:g}s"
            raise self.unavailable(f"{reason}; {len(pending) - len(acknowledged)} messages kept in {self.path}")

    def _get_producer(self):
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer({**client_config(self.bootstrap, self.timeout), "enable.idempotence": True,
                                       "acks": "all", "message.timeout.ms": int(self.timeout * 1000), "linger.ms": 0})
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            # Whatever Kafka did not acknowledge is still in the outbox: drop it here
            # instead of letting the producer hold the process open retrying it.
            self._producer.purge()
            self._producer.flush(0)
            self._producer = None
        self._db.close()
