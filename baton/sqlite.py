"""SQLite connections shared by the embedded backends: WAL, bounded waits, explicit transactions.

Concurrency model: many agent processes of one user open the same files. WAL lets readers
run beside one writer; every write transaction starts with BEGIN IMMEDIATE so it takes the
write lock up front (a deferred transaction that upgrades later can fail at once with
"database is locked" instead of waiting), and busy_timeout bounds how long it waits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from baton.errors import StoreUnavailable


def connect(path: Path, *, timeout: float) -> sqlite3.Connection:
    """Open path in WAL mode; every lock wait is bounded by timeout seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a process crash; only an OS crash can lose the last commits.
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection, migrations: Sequence[str]) -> None:
    """Apply migrations[v:] where v is the file's user_version; the list is append-only."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= len(migrations):
        return
    with write_transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(migrations):
            raise sqlite3.DatabaseError(
                f"schema version {version} is newer than this Baton knows ({len(migrations)})"
            )
        for statement_block in migrations[version:]:
            for statement in statement_block.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(migrations)}")


class SqliteFile:
    """One embedded store's database file: opened and migrated on first use, closed explicitly."""

    def __init__(self, path: Path, migrations: Sequence[str], *, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._migrations = migrations
        self._connection: sqlite3.Connection | None = None

    def conn(self) -> sqlite3.Connection:
        if self._connection is None:
            conn = connect(self.path, timeout=self.timeout)
            try:
                migrate(conn, self._migrations)
            except BaseException:
                conn.close()
                raise
            self._connection = conn
        return self._connection

    def describe(self, table: str) -> dict[str, str]:
        """What `baton doctor` shows for an embedded SQLite store; table is a fixed name."""
        rows = self.conn().execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return {"backend": "sqlite", "location": str(self.path), "version": f"SQLite {sqlite3.sqlite_version}",
                "size": f"{rows} {table}"}

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@contextmanager
def guarded(store: str, path: Path) -> Iterator[None]:
    """Turn driver and file-system failures into StoreUnavailable naming the file."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreUnavailable(store, f"{path}: {exc}") from exc
    except OSError as exc:
        raise StoreUnavailable(store, f"{path}: {exc.strerror or exc}") from exc
