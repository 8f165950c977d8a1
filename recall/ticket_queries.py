"""Ticket queries: a vector of what each ticket is about, for finding its related decisions.

A resume searches with the stored vectors of the ticket's own decisions and with this one,
embedded from the ticket's goal, next action and files (baton.skills.core.ticket_query), so
a ticket with no decision yet, or whose decisions are about something else, still finds
what it is about. A read never embeds: the resume wants the current text here (one small
transaction) and the indexer (baton.recall.indexer) embeds it; until then the resume
searches with the vector it has, of an older text or none.

`recall/queries.db` in the data home (SQLite, WAL), beside the embedding queue, whichever
backend keeps the decisions: derived data, keyed by (project, ticket), wanted again by the
next resume when lost. A row's text waits only until it is embedded: what is kept then is
its hash and its vector.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baton.sqlite import SqliteFile, guarded
from baton.store_names import Store

STORE = Store.RECALL_QUEUE
FILE = "queries.db"

MIGRATIONS = ["""
    CREATE TABLE queries (
        project TEXT NOT NULL,
        task_id TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        text TEXT,
        vector BLOB,
        vector_hash TEXT,
        PRIMARY KEY (project, task_id)
    ) WITHOUT ROWID;
    """]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredQuery:
    current: bool  # the vector embeds the text asked about
    wanted: bool  # the text asked about is the one the ticket wants embedded (or embedded)
    vector: list[float] | None  # of the latest text embedded, None before the first


NOTHING = StoredQuery(current=False, wanted=False, vector=None)


@dataclass(frozen=True)
class WaitingQuery:
    project: str
    task_id: str
    text: str


class TicketQueries(SqliteFile):
    def __init__(self, folder: Path, *, timeout: float) -> None:
        super().__init__(folder / FILE, MIGRATIONS, timeout=timeout)

    def stored(self, project: str, task_id: str, text: str) -> StoredQuery:
        """The ticket's stored vector, and whether it embeds text. Raises StoreUnavailable."""
        if not self.path.exists():
            return NOTHING
        with guarded(STORE, self.path):
            row = self.conn().execute(
                "SELECT text_hash, vector, vector_hash FROM queries WHERE project = ? AND task_id = ?",
                (project, task_id)).fetchone()
        if row is None:
            return NOTHING
        asked = text_hash(text)
        return StoredQuery(current=row[2] == asked, wanted=row[0] == asked,
                           vector=None if row[1] is None else list(struct.unpack(f"<{len(row[1]) // 4}f", row[1])))

    def want(self, project: str, task_id: str, text: str) -> None:
        """Ask the indexer to embed text for the ticket; its older vector is kept meanwhile. A
        text whose vector is stored already (the ticket went back to it) is not kept."""
        with self.writing(STORE) as conn:
            conn.execute("INSERT INTO queries (project, task_id, text_hash, text) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (project, task_id) DO UPDATE SET text_hash = excluded.text_hash, "
                         "text = CASE WHEN excluded.text_hash = queries.vector_hash THEN NULL ELSE excluded.text END",
                         (project, task_id, text_hash(text), text))

    def waiting(self, limit: int) -> list[WaitingQuery]:
        """Up to limit texts wanted and not embedded yet."""
        if not self.path.exists():
            return []
        rows = self.read(STORE, "SELECT project, task_id, text FROM queries "
                                    "WHERE vector_hash IS NOT text_hash AND text IS NOT NULL LIMIT ?", (limit,))
        return [WaitingQuery(*row) for row in rows]

    def keep(self, queries: Sequence[WaitingQuery], vectors: Sequence[Sequence[float]]) -> None:
        """Store each query's vector, and forget its text; a query whose ticket wants another
        text by now stays waiting."""
        with self.writing(STORE) as conn:
            for query, vector in zip(queries, vectors, strict=True):
                conn.execute("UPDATE queries SET vector = ?, vector_hash = text_hash, text = NULL "
                             "WHERE project = ? AND task_id = ? AND text_hash = ?",
                             (struct.pack(f"<{len(vector)}f", *vector), query.project, query.task_id,
                              text_hash(query.text)))

    def waiting_count(self) -> int:
        return self.counted(STORE, "SELECT count(*) FROM queries WHERE vector_hash IS NOT text_hash "
                                   "AND text IS NOT NULL")

    def drop_tasks(self, project: str, task_ids: Sequence[str]) -> None:
        """Forget those tickets' queries (pruned, or their text redacted)."""
        if self.path.exists():
            self.write_each(STORE, "DELETE FROM queries WHERE project = ? AND task_id = ?",
                            [(project, task_id) for task_id in task_ids])
