"""The keyword leg of recall: decisions found by their words, beside the vector leg.

Words are runs of letters and digits, lower-cased. The embedded index keeps them in
`recall/keywords.db` (SQLite FTS5, ranked by BM25), a file of its own beside the vector
store: derived data that the indexer fills before it embeds (so a decision is found by its
words even while the model is missing) and that is refilled from the vector store when it
holds fewer decisions than that (deleted, or a write lost). A Qdrant server keeps the same
words as a sparse vector of each point (term_vector), weighted by Qdrant's IDF.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from baton.sqlite import SqliteFile, guarded
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.recall.base import DecisionRecord, ScoredDecision

STORE = Store.RECALL_INDEX
FILE = "keywords.db"
WORD = re.compile(r"\w+")
MAX_QUERY_WORDS = 64  # a long query's words beyond these add little and cost a scan each
# Left out of queries: words every decision has match every decision (a resume's related
# decisions would then be any decision at all while the vector leg is down).
COMMON = frozenset({"a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "do", "for", "from",
    "has", "have", "in", "into", "is", "it", "its", "no", "not", "of", "on", "or", "our", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "this", "those", "to", "was", "we", "were", "when", "which",
    "will", "with", "would", "you"})
# A query word in more decisions than this is left out of the embedded search: ranking every
# decision that has it would cost a hundred times the vector search at 100,000 decisions,
# and a word that common says little of which decision is meant (its BM25 weight is low).
COMMON_ABOVE = 1000

MIGRATIONS = [
    """
    CREATE TABLE docs (
        id INTEGER PRIMARY KEY,
        point_id TEXT NOT NULL UNIQUE,
        project TEXT NOT NULL,
        task_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX docs_by_task ON docs (project, task_id);
    CREATE VIRTUAL TABLE terms USING fts5(body, content='docs', content_rowid='id');
    """,
]


def words(text: str) -> list[str]:
    """The words of text, lower-cased, in order."""
    return WORD.findall(text.lower())


def query_words(text: str) -> list[str]:
    """The words of a query worth looking up: each once, common words left out, at most MAX_QUERY_WORDS."""
    return [word for word in dict.fromkeys(words(text)) if word not in COMMON][:MAX_QUERY_WORDS]


def term_vector(text: str, *, query: bool = False) -> tuple[list[int], list[float]]:
    """(indices, values) of text's sparse vector: each word hashed to 32 bits, valued by its
    count in the text (the server weighs it by its rarity); a query's, of its query_words."""
    counts = Counter(zlib.crc32(word.encode("utf-8")) for word in (query_words(text) if query else words(text)))
    indices = sorted(counts)
    return indices, [float(counts[i]) for i in indices]


def match_expression(query: list[str]) -> str | None:
    """An FTS5 query for any of the words, each quoted (a query's punctuation never reaches
    FTS5's syntax); None without a word."""
    return " OR ".join(f'"{word}"' for word in query) or None


class KeywordIndex(SqliteFile):
    """keywords.db: a row per decision (by point id) and its words in FTS5."""

    def __init__(self, folder: Path, *, timeout: float) -> None:
        super().__init__(folder / FILE, MIGRATIONS, timeout=timeout)

    def add(self, records: Iterable[DecisionRecord], *, keyed: Sequence[tuple[str, str]] | None = None) -> int:
        """Index records not indexed yet (by point id); returns how many were new. keyed:
        each record's point id and payload, when the caller has them (the vector store
        computed both for the same batch). Raises StoreUnavailable."""
        listed = list(records)
        if keyed is None:
            keyed = [(str(record.point_id), record.model_dump_json()) for record in listed]
        rows = [(point_id, record.project, record.task_id, payload, record.embedding_text())
                for record, (point_id, payload) in zip(listed, keyed, strict=True)]
        with self.writing(STORE) as conn:
            # A new row's id is above every id the table held: the words of those rows alone
            # go into FTS5, one statement for the batch.
            before = conn.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()[0]
            conn.executemany(
                "INSERT OR IGNORE INTO docs (point_id, project, task_id, payload, body) VALUES (?, ?, ?, ?, ?)", rows)
            return conn.execute("INSERT INTO terms (rowid, body) SELECT id, body FROM docs WHERE id > ?",
                                (before,)).rowcount

    def delete_tasks(self, project: str, task_ids: Sequence[str]) -> int:
        if not task_ids or not self.path.exists():
            return 0
        removed = 0
        with self.writing(STORE) as conn:
            for task_id in task_ids:
                rows = conn.execute("SELECT id, body FROM docs WHERE project = ? AND task_id = ?",
                                    (project, task_id)).fetchall()
                conn.executemany("INSERT INTO terms (terms, rowid, body) VALUES ('delete', ?, ?)", rows)
                conn.executemany("DELETE FROM docs WHERE id = ?", [(row[0],) for row in rows])
                removed += len(rows)
            if removed:
                # FTS5 marks a deletion and keeps the words until its segments merge: merged
                # now, so no word of a removed (pruned, redacted) decision stays in the file.
                conn.execute("INSERT INTO terms (terms) VALUES ('optimize')")
        return removed

    def count(self) -> int:
        return self.counted(STORE, "SELECT count(*) FROM docs")

    def search(self, text: str, *, project: str, limit: int, exclude_task_id: str | None) -> list[ScoredDecision]:
        """The project's decisions sharing words with text, best BM25 first (score: BM25,
        higher is better), but those of exclude_task_id."""
        from baton.recall.base import DecisionRecord, ScoredDecision

        asked = query_words(text)
        if not asked or limit <= 0 or not self.path.exists():
            return []
        with guarded(STORE, self.path):
            conn = self.conn()
            expression = match_expression([word for word in asked if conn.execute(
                "SELECT count(*) FROM (SELECT rowid FROM terms WHERE terms MATCH ? LIMIT ?)",
                (match_expression([word]), COMMON_ABOVE + 1)).fetchone()[0] <= COMMON_ABOVE])
            if expression is None:
                return []
            rows = conn.execute(
                "SELECT docs.payload, bm25(terms) FROM terms JOIN docs ON docs.id = terms.rowid "
                "WHERE terms MATCH ? AND docs.project = ? AND docs.task_id IS NOT ? "
                "ORDER BY bm25(terms), docs.id LIMIT ?", (expression, project, exclude_task_id, limit)).fetchall()
        return [ScoredDecision(record=DecisionRecord.model_validate_json(payload), score=-rank)
                for payload, rank in rows]
