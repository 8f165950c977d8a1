"""The outbox: writes kept in a SQLite file of the data home until a server took them.

One outbox serves every write kept on this machine: the registry's events and the signals
waiting for Kafka (baton.kafka_outbox produces them), and the events waiting for a server
registry or graph without Kafka (the pending writes, applied by baton.skills.runtime.sink).
A message is kept once per id (an id kept earlier, even one delivered since, is not kept
again), waits oldest first, may be marked taken (the registry took it, the graph not yet)
or sent (a delivery produced it, with no answer yet), and is dropped once delivered. One
process delivers an outbox at a time: `delivering` holds the lock file beside it, waiting
for another delivery at most what the caller's budget has left, so a message is sent once
per delivery, not once per process.

Files of earlier versions keep their names and are converted in place when first opened:
their migration histories differ (`EARLIER`), and both end in the one schema below, so the
writes they kept are delivered like any other.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from baton.locks import held
from baton.sqlite import SqliteFile

_SCHEMA = """
    CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        key TEXT NOT NULL,
        body TEXT NOT NULL,
        taken INTEGER NOT NULL DEFAULT 0
    );
"""

# When a delivery last produced a message (milliseconds since the epoch), whose outcome a
# later delivery checks on the topic before it produces the message again (baton.kafka_outbox).
_SENT_AT = "ALTER TABLE outbox ADD COLUMN sent_at INTEGER;"

# The registry's events Kafka took that the registry may not hold yet: reads fold them in
# (baton.registry.own_writes) until the registry shows them, or for a day at most.
_DELIVERED = """
    CREATE TABLE delivered (
        message_id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        body TEXT NOT NULL,
        at INTEGER NOT NULL DEFAULT (strftime('%s', 'now'))
    ) WITHOUT ROWID;
"""
REMEMBERED = 86_400  # seconds a delivered message is remembered at most
_FORGET_OLD = "DELETE FROM delivered WHERE at < strftime('%s', 'now') - ?"

# Each file's migrations: what the earlier versions created, then the step to the one schema.
# Append a later change to both lists.
EARLIER = {
    # The Kafka outboxes (kafka-events-outbox.db, kafka-outbox.db).
    "kafka": [
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
        f"""
        ALTER TABLE outbox RENAME TO outbox_before_seq;
        {_SCHEMA}
        INSERT INTO outbox (message_id, key, body) SELECT message_id, key, body FROM outbox_before_seq;
        DROP TABLE outbox_before_seq;
        """,  # noqa: S608 -- a constant
        _SENT_AT,
        _DELIVERED,
    ],
    # The pending writes (pending-writes.db): event bodies, each with its id and ticket inside.
    "pending": [
        """
        CREATE TABLE pending (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            body TEXT NOT NULL
        );
        """,
        """
        ALTER TABLE pending ADD COLUMN registry_took INTEGER NOT NULL DEFAULT 0;
        """,
        f"""
        {_SCHEMA}
        INSERT OR IGNORE INTO outbox (seq, message_id, key, body, taken)
            SELECT seq, json_extract(body, '$.event_id'), json_extract(body, '$.task_id'), body, registry_took
            FROM pending;
        DROP TABLE pending;
        CREATE TABLE kept (
            message_id TEXT PRIMARY KEY
        ) WITHOUT ROWID;
        INSERT INTO kept (message_id) SELECT message_id FROM outbox;
        CREATE TABLE topics (
            name TEXT PRIMARY KEY
        ) WITHOUT ROWID;
        """,  # noqa: S608 -- a constant
        _SENT_AT,
        _DELIVERED,
    ],
}


class Entry(NamedTuple):
    seq: int
    message_id: str
    key: str
    body: str
    taken: bool  # the registry took it; it waits for the graph alone
    sent_at: int | None = None  # when a delivery last produced it (ms since the epoch); None: never


class Outbox:
    def __init__(self, path: Path, *, earlier: str, timeout: float, store: str, remember: bool = False) -> None:
        """earlier: which files of earlier versions this one may be ("kafka" or "pending");
        store: the name failures are reported under; remember: keep what is delivered
        until forget_delivered (the registry's events, which reads fold in)."""
        self.path = path
        self.remember = remember
        self.store = store
        self.kept = 0  # messages this process kept: its stores start a delivery when closed
        self._db = SqliteFile(path, EARLIER[earlier], timeout=timeout)

    def keep(self, messages: Sequence[tuple[str, str, str]]) -> list[bool]:
        """Keep (message id, key, body) triples; True for each id never kept before."""
        fresh = []
        with self._db.writing(self.store) as conn:
            for message_id, key, body in messages:
                new = conn.execute("INSERT OR IGNORE INTO kept (message_id) VALUES (?)",
                                   (message_id,)).rowcount == 1
                if new:
                    conn.execute("INSERT OR IGNORE INTO outbox (message_id, key, body) VALUES (?, ?, ?)",
                                 (message_id, key, body))
                fresh.append(new)
        self.kept += sum(fresh)
        return fresh

    def known(self, message_ids: Sequence[str]) -> set[str]:
        """The ids among message_ids that were ever kept here."""
        if not message_ids:
            return set()
        marks = ",".join("?" * len(message_ids))
        query = f"SELECT message_id FROM kept WHERE message_id IN ({marks})"  # noqa: S608 -- placeholders only
        return {message_id for (message_id,) in self._db.read(self.store, query, list(message_ids))}

    def waiting(self) -> int:
        """How many messages wait (0 without creating a missing file)."""
        return self._db.counted(self.store, "SELECT count(*) FROM outbox")

    def entries(self) -> list[Entry]:
        """The messages waiting, oldest first."""
        if not self.path.exists():
            return []
        rows = self._db.read(self.store, "SELECT seq, message_id, key, body, taken, sent_at FROM outbox ORDER BY seq")
        return [Entry(seq, message_id, key, body, bool(taken), sent_at)
                for seq, message_id, key, body, taken, sent_at in rows]

    def drop(self, message_ids: Sequence[str]) -> None:
        """Forget delivered messages (their ids stay known: keeping them again keeps nothing)."""
        rows = [(m,) for m in message_ids]
        with self._db.writing(self.store) as conn:
            if self.remember:
                conn.executemany("INSERT OR IGNORE INTO delivered (message_id, key, body) "
                                 "SELECT message_id, key, body FROM outbox WHERE message_id = ?", rows)
                conn.execute(_FORGET_OLD, (REMEMBERED,))
            conn.executemany("DELETE FROM outbox WHERE message_id = ?", rows)

    def unconfirmed(self) -> list[tuple[str, str, str]]:
        """(message id, key, body) of every message waiting or remembered as delivered."""
        if not self.path.exists():
            return []
        return self._db.read(self.store, "SELECT message_id, key, body FROM outbox "
                                         "UNION ALL SELECT message_id, key, body FROM delivered")

    def forget_delivered(self, message_ids: Sequence[str]) -> None:
        """Forget these delivered messages (their reader holds them), and those remembered too long."""
        with self._db.writing(self.store) as conn:
            conn.executemany("DELETE FROM delivered WHERE message_id = ?", [(m,) for m in message_ids])
            conn.execute(_FORGET_OLD, (REMEMBERED,))

    def mark_sent(self, message_ids: Sequence[str], at_ms: int) -> None:
        """Note that a delivery produces these messages now."""
        self._db.write_each(self.store, "UPDATE outbox SET sent_at = ? WHERE message_id = ?",
                            [(at_ms, m) for m in message_ids])

    def mark_unsent(self, message_ids: Sequence[str]) -> None:
        """Note that these messages were given up before they were sent."""
        self._each("UPDATE outbox SET sent_at = NULL WHERE message_id = ?", message_ids)

    def mark_taken(self, message_ids: Sequence[str]) -> None:
        """Mark messages the registry took: they wait for the graph alone."""
        self._each("UPDATE outbox SET taken = 1 WHERE message_id = ?", message_ids)

    def _each(self, statement: str, message_ids: Sequence[str]) -> None:
        self._db.write_each(self.store, statement, [(m,) for m in message_ids])

    @contextmanager
    def delivering(self, within: float) -> Iterator[bool]:
        """Hold this outbox's delivery lock; yields False when another process held it
        through `within` seconds (it delivers what waits)."""
        with held(self.path.with_name(self.path.name + ".lock"), within=within) as ours:
            yield ours

    def topic_known(self, topic: str) -> bool:
        """Whether this data home already made sure the topic exists."""
        return bool(self._db.read(self.store, "SELECT 1 FROM topics WHERE name = ?", (topic,)))

    def note_topic(self, topic: str) -> None:
        self._each("INSERT OR IGNORE INTO topics (name) VALUES (?)", [topic])

    def close(self) -> None:
        self._db.close()
