"""The embedded conflict graph: touches indexed by file in SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.files import FileRef
from baton.graph.base import ConflictGraph
from baton.sqlite import SqliteFile, guarded, write_transaction
from baton.store_names import Store

STORE = Store.CONFLICT_GRAPH

MIGRATIONS = [
    """
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        status TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_status ON tasks (status);
    CREATE TABLE touches (
        task_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        path TEXT NOT NULL,
        last_at TEXT NOT NULL,
        PRIMARY KEY (task_id, repo, path)
    ) WITHOUT ROWID;
    CREATE INDEX touches_by_file ON touches (repo, path, task_id);
    """,
]

# Starts from the ticket's own touches (primary key prefix), then follows the file index.
_SHARED = """
SELECT other.task_id, other.repo, other.path
FROM touches AS mine
JOIN touches AS other ON other.repo = mine.repo AND other.path = mine.path AND other.task_id <> mine.task_id
JOIN tasks ON tasks.task_id = other.task_id AND tasks.status = 'active'
WHERE mine.task_id = ?
ORDER BY other.task_id, other.repo, other.path
"""

# Active tickets first (a small set), then their touches through the file index.
_ACTIVE_OVERLAPS = """
WITH active_touches AS (
    SELECT touches.task_id, touches.repo, touches.path
    FROM tasks JOIN touches ON touches.task_id = tasks.task_id
    WHERE tasks.status = 'active'
)
SELECT a.task_id, b.task_id, a.repo, a.path
FROM active_touches AS a
JOIN active_touches AS b ON b.repo = a.repo AND b.path = a.path AND b.task_id <> a.task_id
ORDER BY a.task_id, b.task_id, a.repo, a.path
"""


def _add_touches(conn: sqlite3.Connection, task_id: str, files: Sequence[FileRef], stamp: str) -> None:
    conn.executemany(
        "INSERT INTO touches (task_id, repo, path, last_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO UPDATE SET last_at = max(last_at, excluded.last_at)",
        [(task_id, f.repo, f.path, stamp) for f in files])


class SqliteConflictGraph(ConflictGraph):
    def __init__(self, path: Path, *, timeout: float) -> None:
        self.path = path
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)

    def record(self, task_id: str, status: str, files: Sequence[FileRef], at: datetime, *,
               session_id: str | None = None, depends_on: Sequence[str] = ()) -> None:
        stamp = clock.to_text(at)
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.execute(
                    "INSERT INTO tasks (task_id, status) VALUES (?, ?) "
                    "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status", (task_id, status))
                _add_touches(conn, task_id, files, stamp)

    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        stamp = clock.to_text(at)
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.execute(
                    "INSERT INTO tasks (task_id, status) VALUES (?, 'active') "
                    "ON CONFLICT (task_id) DO UPDATE SET status = 'active' WHERE status = 'stalled'", (task_id,))
                _add_touches(conn, task_id, files, stamp)
                status = conn.execute("SELECT status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()[0]
        return status == "active"

    def forget(self, task_ids: Sequence[str]) -> None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.executemany("DELETE FROM touches WHERE task_id = ?", [(t,) for t in task_ids])
                conn.executemany("DELETE FROM tasks WHERE task_id = ?", [(t,) for t in task_ids])

    def _shared_rows(self, task_id: str) -> list[tuple[str, str, str]]:
        with guarded(STORE, self.path):
            return self._db.conn().execute(_SHARED, (task_id,)).fetchall()

    def _overlap_rows(self) -> list[tuple[str, str, str, str]]:
        with guarded(STORE, self.path):
            return self._db.conn().execute(_ACTIVE_OVERLAPS).fetchall()

    def describe(self) -> dict[str, str]:
        with guarded(STORE, self.path):
            return self._db.describe("touches")

    def close(self) -> None:
        self._db.close()
