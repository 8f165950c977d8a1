"""Writes kept on this machine until a server takes them.

With any store on a server and no Kafka, every write (a hook's touch included) is kept in
`pending-writes.db` in the data home and never waits for a server; with Kafka, writes wait
in the Kafka outboxes instead. The background delivery (baton.skills.services.delivery) takes them to the
servers, and every read command first delivers what waits (oldest first, within its
budget), so it sees the writes made before it. One process delivers at a time: a delivery
that finds another one running waits for it within its budget instead of sending the same
writes again. Events keep their ids, so a delivery retried after a lost acknowledgement
doubles nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from baton.errors import StoreUnavailable
from baton.locks import held
from baton.sqlite import SqliteFile, guarded, write_transaction
from baton.skills.runtime.stores import EVENTS_OUTBOX, SIGNALS_OUTBOX
from baton.store_names import Store

STORE = Store.PENDING_WRITES
GRAPH = Store.CONFLICT_GRAPH
FILE = "pending-writes.db"
LOCK = "pending-writes.lock"


MIGRATIONS = [
    """
    CREATE TABLE pending (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        body TEXT NOT NULL
    );
    """,
    # A write the registry took while the graph could not: it waits for the graph alone.
    """
    ALTER TABLE pending ADD COLUMN registry_took INTEGER NOT NULL DEFAULT 0;
    """,
]


class PendingWrites:
    def __init__(self, home: Path, *, timeout: float) -> None:
        self.path = home / FILE
        self.kept = 0  # writes this process kept: its stores start a delivery when closed
        self._db = SqliteFile(self.path, MIGRATIONS, timeout=timeout)

    def keep(self, bodies: Sequence[str]) -> None:
        """Keep event JSON bodies for later delivery."""
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("INSERT INTO pending (body) VALUES (?)", [(b,) for b in bodies])
        self.kept += len(bodies)

    @contextmanager
    def delivering(self, within: float) -> Iterator[list[tuple[int, str, bool]]]:
        """The writes waiting, held for this process's delivery; [] when another process
        delivered them, or still delivers them after `within` seconds."""
        with held(self.path.with_name(LOCK), within=within) as ours:
            yield self.waiting() if ours else []

    def count(self) -> int:
        if not self.path.exists():
            return 0
        with guarded(STORE, self.path):
            return self._db.conn().execute("SELECT count(*) FROM pending").fetchone()[0]

    def waiting(self) -> list[tuple[int, str, bool]]:
        """(seq, body, whether the registry already took it), oldest first."""
        if not self.path.exists():
            return []
        with guarded(STORE, self.path):
            rows = self._db.conn().execute("SELECT seq, body, registry_took FROM pending ORDER BY seq").fetchall()
            return [(seq, body, bool(took)) for seq, body, took in rows]

    def drop(self, seqs: Sequence[int]) -> None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("DELETE FROM pending WHERE seq = ?", [(s,) for s in seqs])

    def registry_took(self, seqs: Sequence[int]) -> None:
        """Mark writes the registry took: they wait for the graph alone."""
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("UPDATE pending SET registry_took = 1 WHERE seq = ?", [(s,) for s in seqs])

    def close(self) -> None:
        self._db.close()


def _kafka_outbox_exists(stores, name: str) -> bool:
    return bool(stores.settings.kafka_bootstrap) and (stores.settings.home / name).exists()


def waiting_writes(stores) -> int:
    """How many writes (events and signals) are kept on this machine, waiting for a server."""
    events = stores.event_log.waiting() if _kafka_outbox_exists(stores, EVENTS_OUTBOX) else 0
    signals = stores.signals.waiting() if _kafka_outbox_exists(stores, SIGNALS_OUTBOX) else 0
    return events + signals + (stores.pending.count() if (stores.settings.home / FILE).exists() else 0)


def deliver(stores) -> list[str]:
    """Deliver the kept writes, if any, within the command's budget; returns a warning for
    each store that could not take them (they still wait)."""
    warnings = []
    for name, store in ((EVENTS_OUTBOX, "event_log"), (SIGNALS_OUTBOX, "signals")):
        if _kafka_outbox_exists(stores, name):
            try:
                getattr(stores, store).deliver()  # returns at once when nothing waits
            except StoreUnavailable as exc:
                warnings.append(str(exc))
    if not (stores.settings.home / FILE).exists() or not stores.pending.count():
        return warnings
    return warnings + _apply_pending(stores)


def _apply_pending(stores) -> list[str]:
    """Apply the pending writes to the stores. While the graph's server cannot be reached
    they stay until it took them too (it has no other way to learn their touches; recall
    heals by itself, as a resume queues the decisions the index lacks), and those the
    registry already took are left alone meanwhile, so reads do not apply them again and
    again. A graph that answered with an error only warns, as it may refuse them forever."""
    budget = stores.budget
    try:
        if stores.settings.database_url:  # known down: no waiting for another delivery either
            from baton.budget import postgres_server

            budget.gate(postgres_server(stores.settings.database_url)).refuse_known(Store.SESSION_REGISTRY)
        graph_down = _graph_known_down(stores)
        with budget.waiting(), stores.pending.delivering(max(budget.remaining(), 0.0)) as waiting:
            due = [(seq, body) for seq, body, took in waiting if not (took and graph_down)]
            warnings = [f"{graph_down}; {len(waiting)} writes wait for it in {stores.pending.path}"] if graph_down else []
            if not due:
                return warnings
            from baton.registry.wire import event_adapter
            from baton.skills.core.projection import project

            adapter = event_adapter()
            _, found = project(stores, [adapter.validate_json(body) for _, body in due])
            if stores.graph_unreachable():
                stores.pending.registry_took([seq for seq, _ in due])
            else:
                stores.pending.drop([seq for seq, _ in due])
            return warnings + found
    except StoreUnavailable as exc:
        return [f"{exc}; {stores.pending.count()} earlier writes still wait in {stores.pending.path}"]


def _graph_known_down(stores) -> str | None:
    """The graph's failure when its server is known to be down (this command, or the
    health record), else None."""
    if not stores.settings.graph_url:
        return None
    from baton.budget import bolt_server

    try:
        stores.budget.gate(bolt_server(stores.settings.graph_url)).refuse_known(GRAPH)
    except StoreUnavailable as exc:
        return str(exc)
    return None
