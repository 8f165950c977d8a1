"""Decisions waiting to be embedded: `recall/queue.db` in the data home (SQLite, WAL).

Embedding loads a model and costs most of a second of CPU, so no write waits for it: a
decision is queued here in one small transaction, and the indexer (baton.recall.indexer, run in
the background or by the projector) embeds what waits and stores it in the decision index.
An entry is removed only after its vector is stored, so a crash at any point leaves it
queued; the indexer asks the index first and never embeds a decision twice.

One queue serves every project of the data home: each payload names its project (an entry
queued before projects names none; the indexer drops it and heals from the registry).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from baton.sqlite import SqliteFile
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.recall.base import DecisionRecord

STORE = Store.RECALL_QUEUE
FILE = "queue.db"

MIGRATIONS = [
    """
    CREATE TABLE queued (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        point_id TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL,
        queued_at REAL NOT NULL
    );
    """,
]


class EmbeddingQueue(SqliteFile):
    def __init__(self, folder: Path, *, timeout: float) -> None:
        super().__init__(folder / FILE, MIGRATIONS, timeout=timeout)

    def add(self, records: Sequence[DecisionRecord]) -> int:
        """Queue records (once per point id); returns how many were new."""
        return self.add_payloads([(r.point_id, r.model_dump_json()) for r in records])

    def add_payloads(self, payloads: Sequence[tuple[UUID, str]]) -> int:
        """Queue (point id, DecisionRecord JSON) pairs, built by baton.recall.wire on the hot path."""
        if not payloads:
            return 0
        now = time.time()
        with self.writing(STORE) as conn:
            return sum(conn.execute(
                "INSERT OR IGNORE INTO queued (point_id, payload, queued_at) VALUES (?, ?, ?)",
                (str(point_id), payload, now)).rowcount for point_id, payload in payloads)

    def oldest(self, limit: int) -> list[tuple[UUID, str]]:
        """Up to limit (point id, payload JSON) pairs, oldest first."""
        if not self.path.exists():
            return []
        rows = self.read(STORE, "SELECT point_id, payload FROM queued ORDER BY seq LIMIT ?", (limit,))
        return [(UUID(p), payload) for p, payload in rows]

    def queued(self, point_ids: Sequence[UUID]) -> set[UUID]:
        if not point_ids or not self.path.exists():
            return set()
        rows = self.read(STORE, "SELECT point_id FROM queued WHERE point_id IN (SELECT value FROM json_each(?))",
                             (json.dumps([str(p) for p in point_ids]),))
        return {UUID(p) for (p,) in rows}

    def remove(self, point_ids: Sequence[UUID]) -> None:
        self.write_each(STORE, "DELETE FROM queued WHERE point_id = ?", [(str(p),) for p in point_ids])

    def drop_tasks(self, project: str, task_ids: Sequence[str]) -> None:
        """Forget the queued decisions of those tickets of the project (their sessions were pruned)."""
        if self.path.exists():
            self.write_each(STORE, "DELETE FROM queued WHERE json_extract(payload, '$.project') = ? "
                                   "AND json_extract(payload, '$.task_id') = ?", [(project, t) for t in task_ids])

    def count(self) -> int:
        return self.counted(STORE, "SELECT count(*) FROM queued")
