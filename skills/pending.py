"""Registry writes kept on this machine until a server takes them.

Two kinds wait in `pending-writes.db` in the data home: writes PostgreSQL could not take
(the command succeeds with a warning), and touches from agent hooks, which never wait for
a server. Every later command first delivers what waits (oldest first, within the store
timeout); events keep their ids, so a delivery that is retried after a lost
acknowledgement doubles nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from baton.errors import StoreUnavailable
from baton.sqlite import SqliteFile, guarded, write_transaction
from skills.stores import EVENTS_OUTBOX, SIGNALS_OUTBOX

STORE = "pending writes"
FILE = "pending-writes.db"


MIGRATIONS = [
    """
    CREATE TABLE pending (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        body TEXT NOT NULL
    );
    """,
]


class PendingWrites:
    def __init__(self, home: Path, *, timeout: float) -> None:
        self.path = home / FILE
        self._db = SqliteFile(self.path, MIGRATIONS, timeout=timeout)

    def keep(self, bodies: Sequence[str]) -> None:
        """Keep event JSON bodies for later delivery."""
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("INSERT INTO pending (body) VALUES (?)", [(b,) for b in bodies])

    def count(self) -> int:
        if not self.path.exists():
            return 0
        with guarded(STORE, self.path):
            return self._db.conn().execute("SELECT count(*) FROM pending").fetchone()[0]

    def waiting(self) -> list[tuple[int, str]]:
        if not self.path.exists():
            return []
        with guarded(STORE, self.path):
            return self._db.conn().execute("SELECT seq, body FROM pending ORDER BY seq").fetchall()

    def drop(self, seqs: Sequence[int]) -> None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("DELETE FROM pending WHERE seq = ?", [(s,) for s in seqs])

    def close(self) -> None:
        self._db.close()


def keep_or_raise(stores, bodies: Sequence[str], exc: StoreUnavailable) -> str:
    """Keep the bodies when the registry is a server that is down; else the failure stands."""
    if not stores.settings.database_url:
        raise exc
    stores.pending.keep(bodies)
    return f"{exc}; the write is kept in {stores.pending.path} and delivered when the server is back"


def _kafka_outbox_exists(stores, name: str) -> bool:
    return bool(stores.settings.kafka_bootstrap) and (stores.settings.home / name).exists()


def waiting_writes(stores) -> int:
    """How many writes (events and signals) are kept on this machine, waiting for a server."""
    events = stores.event_log.waiting() if _kafka_outbox_exists(stores, EVENTS_OUTBOX) else 0
    signals = stores.signals.waiting() if _kafka_outbox_exists(stores, SIGNALS_OUTBOX) else 0
    return events + signals + (stores.pending.count() if (stores.settings.home / FILE).exists() else 0)


def deliver(stores) -> list[str]:
    """Deliver the kept writes, if any; returns a warning while some still wait."""
    for name, store in ((EVENTS_OUTBOX, "event_log"), (SIGNALS_OUTBOX, "signals")):
        if _kafka_outbox_exists(stores, name):
            try:
                getattr(stores, store).deliver()  # returns at once when nothing waits
            except StoreUnavailable as exc:
                return [str(exc)]
    if not (stores.settings.home / FILE).exists():
        return []
    waiting = stores.pending.waiting()
    if not waiting:
        return []
    from registry.wire import event_adapter
    from skills.projection import project

    adapter = event_adapter()
    try:
        _, warnings = project(stores, [adapter.validate_json(body) for _, body in waiting])
    except StoreUnavailable as exc:
        return [f"{exc}; {len(waiting)} earlier writes still wait in {stores.pending.path}"]
    stores.pending.drop([seq for seq, _ in waiting])
    return warnings
