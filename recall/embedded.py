"""The embedded decision index: vectors kept in SQLite, searched through derived segments.

The vector store (`vectors.db`, SQLite in WAL mode) is what is kept: a row per decision with
its payload and its 384 float32 values, written in one transaction, safe for many
processes and for `kill -9` at any point, and refused by a CHECK constraint unless the
vector has every dimension. A process that dies mid-write leaves the last committed state.

The search index (`index/`, baton.recall.segments) is derived from it and trusted for nothing:
it is checked against the store when a process opens it, rows written since it was built
are read from the store and searched beside it, and when it is missing, corrupt or does
not add up it is rebuilt from the store, without the embedding model. Candidates are
rescored against the stored vectors, so a damaged row can never be reported with a score
it does not have. Readers take no lock; writers of segment files take `index.lock` and
never change a file in place.

Every row names its project (baton.projects): a column of the store, a key in the segments,
and every read filters on it. A row stored before projects has none (NULL), and is never read.

Each row notes the RECIPE of the text its vector embeds (baton.recall.base); the background
indexer embeds again the rows of an older one. The keyword leg (`keywords.db`,
baton.recall.keywords) is a file of its own: either answers while the other cannot.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from uuid import UUID

import numpy as np

from baton.errors import StoreUnavailable
from baton.home import make_directory
from baton.locks import held
from baton.recall import segments
from baton.recall.base import (
    RECIPE,
    DecisionIndex,
    DecisionRecord,
    ScoredDecision,
    Vectors,
    embedding_text_before,
    ranked,
)
from baton.recall.embedding import DIMENSIONS
from baton.recall.keywords import KeywordIndex
from baton.sqlite import SqliteFile, guarded, write_transaction
from baton.store_names import Store

STORE = Store.RECALL_INDEX
VECTOR_BYTES = 4 * DIMENSIONS
RESCORE_TOLERANCE = 1e-4

MIGRATIONS = [
    f"""
    CREATE TABLE vectors (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        point_id TEXT NOT NULL UNIQUE,
        task_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        vector BLOB NOT NULL CHECK (length(vector) = {VECTOR_BYTES})
    );
    CREATE INDEX vectors_by_task ON vectors (task_id, seq);
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16)))), ('count', '0');
    """,  # noqa: S608 -- a constant
    # Projects: a row stored before has none (NULL) until the indexer heals it.
    """
    ALTER TABLE vectors ADD COLUMN project TEXT;
    DROP INDEX vectors_by_task;
    CREATE INDEX vectors_by_project ON vectors (project, task_id, seq);
    """,
    # The recipe of the embedded text (baton.recall.base.RECIPE): rows from before embedded recipe 1.
    """
    ALTER TABLE vectors ADD COLUMN recipe INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX vectors_by_recipe ON vectors (recipe);
    """,
]


def _unit_rows(vectors: Vectors, what: str) -> np.ndarray:
    """Rows as float32 unit vectors (cosine similarity becomes a dot product); StoreUnavailable
    refuses them as `what` (a vector, a query) where they are not vectors."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] != DIMENSIONS:
            raise ValueError(f"vectors must have {DIMENSIONS} dimensions, got shape {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise ValueError("vectors must be finite")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ValueError("a vector is all zeros")
    except ValueError as exc:
        raise StoreUnavailable(STORE, f"refused {what}: {exc}") from None
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def _vectors_of(records: Sequence[DecisionRecord], vectors: Vectors) -> np.ndarray:
    """The records' vectors as unit rows, one per record; StoreUnavailable refuses others."""
    matrix = _unit_rows(vectors, "a vector")
    if len(matrix) != len(records):
        raise StoreUnavailable(STORE, f"{len(records)} decisions but {len(matrix)} vectors")
    return matrix


_mapped: dict[Path, segments.View] = {}


def keep_mapped(folder: Path) -> None:
    """Map the index of the store in folder for this process and every process it forks (the
    resident process, baton.skills.frontends.resident), without opening the store: an index
    opened there starts from this view, which it checks against the store like any other
    (its store id, its manifest, the rows written since). Remapped when the manifest changed."""
    index_dir = folder / "index"
    kept = _mapped.get(index_dir)
    if kept is not None and kept.manifest_stamp == segments.manifest_stamp(index_dir):
        return
    _mapped.pop(index_dir, None)
    with suppress(segments.Stale):
        _mapped[index_dir] = segments.read_view(index_dir, None, DIMENSIONS)


class EmbeddedDecisionIndex(DecisionIndex):
    def __init__(self, folder: Path, *, timeout: float) -> None:
        self.folder = folder
        self.timeout = timeout
        self.path = folder / "vectors.db"
        self.index_dir = folder / "index"
        self._db = SqliteFile(self.path, MIGRATIONS, timeout=timeout)
        self._keywords = KeywordIndex(folder, timeout=timeout)
        self._keywords_checked = False  # against the vector store, once per opened index
        self._view: segments.View | None = _mapped.get(self.index_dir)

    # The vector store -------------------------------------------------------------------

    def _state(self) -> tuple[str, int, int]:
        """(store id, number of rows, highest sequence number) of the vector store."""
        conn = self._db.conn()
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        last = conn.execute("SELECT max(seq) FROM vectors").fetchone()[0] or 0
        return str(UUID(hex=meta["store_id"])), int(meta["count"]), last

    def _rows_after(self, seq: int) -> segments.Rows:
        fetched = self._db.conn().execute(
            "SELECT seq, task_id, project, vector FROM vectors WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
        if not fetched:
            return segments.Rows.empty(DIMENSIONS)
        seqs = np.fromiter((row[0] for row in fetched), np.int64, len(fetched))
        keys = np.fromiter((segments.task_key(row[1]) for row in fetched), np.uint64, len(fetched))
        projects = np.fromiter((segments.project_key(row[2]) for row in fetched), np.uint64, len(fetched))
        vectors = np.frombuffer(b"".join(row[3] for row in fetched), "<f4").reshape(len(fetched), DIMENSIONS)
        return segments.Rows(seqs, keys, projects, vectors)

    def upsert(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        if not records:
            return
        matrix = _vectors_of(records, vectors)
        with self._guarded():
            conn = self._db.conn()
            rows = [(str(record.point_id), record.project, record.task_id, record.model_dump_json(), vector.tobytes(),
                     RECIPE) for record, vector in zip(records, matrix.astype("<f4", copy=False), strict=True)]
            with write_transaction(conn):
                # rowcount of executemany: the rows inserted, those already stored ignored.
                added = conn.executemany(
                    "INSERT OR IGNORE INTO vectors (point_id, project, task_id, payload, vector, recipe) "
                    "VALUES (?, ?, ?, ?, ?, ?)", rows).rowcount
                conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'count'", (added,))
        # The vectors are kept; bringing the search index and the keywords along is an
        # optimisation that a full disk or a busy lock may postpone (readers search the newer
        # rows beside the index; the keywords are refilled from the store when short).
        with suppress(StoreUnavailable):
            self._keywords.add(records, keyed=[(row[0], row[3]) for row in rows])
        with suppress(OSError, StoreUnavailable, sqlite3.Error):
            self._extend_index()

    def index_keywords(self, records: Sequence[DecisionRecord]) -> None:
        self._keywords.add(records)

    def search_keywords(self, text: str, *, project: str, limit: int,
                        exclude_task_id: str | None) -> list[ScoredDecision]:
        if not self._keywords_checked:
            self._heal_keywords()
            self._keywords_checked = True
        return self._keywords.search(text, project=project, limit=limit, exclude_task_id=exclude_task_id)

    def _heal_keywords(self) -> None:
        """Refill the keywords from the vector store when they hold fewer decisions than it
        (keywords.db deleted, or a write to it lost); a vector store that cannot be read
        leaves the keywords to answer with what they hold."""
        try:
            if not self.path.exists() or self._keywords.count() >= self.count() - self.unscoped_count():
                return
            with self._guarded():
                rows = self._db.conn().execute("SELECT payload FROM vectors WHERE project IS NOT NULL").fetchall()
        except StoreUnavailable:
            return
        self._keywords.add(DecisionRecord.model_validate_json(p) for (p,) in rows)

    def outdated(self, limit: int) -> list[tuple[DecisionRecord, int]]:
        if not self.path.exists():
            return []
        with self._guarded():
            rows = self._db.conn().execute("SELECT payload, recipe FROM vectors WHERE recipe < ? AND project IS NOT "
                                           "NULL ORDER BY seq LIMIT ?", (RECIPE, limit)).fetchall()
        return [(DecisionRecord.model_validate_json(payload), recipe) for payload, recipe in rows]

    def renew_recipe(self, records: Sequence[DecisionRecord]) -> None:
        if records:
            # The search index holds no recipe: it stays as it is.
            with self._guarded(), write_transaction(self._db.conn()) as conn:
                conn.executemany("UPDATE vectors SET recipe = ? WHERE point_id = ?",
                                 [(RECIPE, str(record.point_id)) for record in records])

    def reembed(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        rows = [(vector.astype("<f4").tobytes(), RECIPE, str(record.point_id))
                for record, vector in zip(records, _vectors_of(records, vectors), strict=True)] if records else []
        if rows:
            with self._guarded():
                with write_transaction(self._db.conn()) as conn:
                    conn.executemany("UPDATE vectors SET vector = ?, recipe = ? WHERE point_id = ?", rows)
                # The index holds the rows' old vectors: rebuilt here, once per batch, not by a search.
                self._view = self._rebuild(self._state()[0])

    def delete_tasks(self, project: str, task_ids: Sequence[str]) -> int:
        if not task_ids:
            return 0
        # The keywords first: a failure between the two leaves them short, which heals.
        self._keywords.delete_tasks(project, task_ids)
        return self._delete("DELETE FROM vectors WHERE project = ? AND task_id = ?",
                            [(project, task_id) for task_id in task_ids])

    def delete_unscoped(self) -> int:
        return self._delete("DELETE FROM vectors WHERE project IS NULL", [()])

    def _delete(self, statement: str, rows: list[tuple[str, ...]]) -> int:
        if not self.path.exists():
            return 0
        with self._guarded():
            conn = self._db.conn()
            with write_transaction(conn):
                removed = sum(conn.execute(statement, row).rowcount for row in rows)
                conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) - ? WHERE key = 'count'", (removed,))
            if removed:
                # The index now holds rows the store lacks: rebuilt here, not by the next search.
                self._view = self._rebuild(self._state()[0])
        return removed

    def _of_points(self, columns: str, point_ids: Sequence[UUID], where: str = "") -> list[tuple]:
        """The columns (constants) of the stored rows of point_ids, of those that meet where."""
        query = f"SELECT {columns} FROM vectors WHERE {where}point_id IN (SELECT value FROM json_each(?))"  # noqa: S608
        with self._guarded():
            return self._db.conn().execute(query, (json.dumps([str(p) for p in point_ids]),)).fetchall()

    def stored(self, point_ids: Sequence[UUID]) -> set[UUID]:
        return {UUID(p) for (p,) in self._of_points("point_id", point_ids)}

    def vectors_of(self, point_ids: Sequence[UUID]) -> dict[UUID, list[float]]:
        return {UUID(p): np.frombuffer(v, "<f4").tolist()
                for p, v in self._of_points("point_id, vector", point_ids)}

    def count(self, project: str | None = None) -> int:
        with self._guarded():
            if project is None:
                return self._state()[1] if self.path.exists() else 0
            return self._db.counted(STORE, "SELECT count(*) FROM vectors WHERE project = ?", (project,))

    def unscoped_count(self) -> int:
        with self._guarded():
            return self._db.counted(STORE, "SELECT count(*) FROM vectors WHERE project IS NULL")

    def unscoped_points(self, point_ids: Sequence[UUID]) -> dict[UUID, tuple[str, list[float]]]:
        if not self.path.exists():
            return {}
        rows = self._of_points("point_id, json_extract(payload, '$.text'), json_extract(payload, '$.context'), vector",
                               point_ids, "project IS NULL AND ")
        return {UUID(point_id): (embedding_text_before(text, context or "", 1), np.frombuffer(vector, "<f4").tolist())
                for point_id, text, context, vector in rows}

    def points(self, project: str, batch: int = 1000) -> Iterator[tuple[DecisionRecord, list[float]]]:
        if not self.path.exists():
            return
        after = 0
        while True:
            with self._guarded():
                page = self._db.conn().execute("SELECT seq, payload, vector FROM vectors WHERE project = ? AND seq > "
                                               "? ORDER BY seq LIMIT ?", (project, after, batch)).fetchall()
            for seq, payload, vector in page:
                yield DecisionRecord.model_validate_json(payload), np.frombuffer(vector, "<f4").tolist()
                after = seq
            if len(page) < batch:
                return

    def describe(self) -> dict[str, str]:
        with self._guarded():
            store_id, count, _ = self._state()
            view = self._current_view(store_id, count)
        parts = sum(1 for part in view.parts if len(part))
        return {"backend": "sqlite vectors + segment index", "location": str(self.folder),
                "version": f"SQLite {sqlite3.sqlite_version}, NumPy {np.__version__}",
                "size": f"{count} decisions in {parts} index part{'s' if parts != 1 else ''}"}

    def close(self) -> None:
        self._view = None
        self._db.close()
        self._keywords.close()

    def recover(self) -> str | None:
        if not self.path.exists():
            return None
        try:
            self.count()
            return None
        except StoreUnavailable as exc:
            if not _unreadable(exc):
                raise
        self.close()
        aside = self.path.with_name(f"{self.path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        return f"the unreadable vector store was moved to {aside}"

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        try:
            with guarded(STORE, self.path):
                yield
        except StoreUnavailable as exc:
            if _unreadable(exc):
                raise StoreUnavailable(STORE,
                                       f"{exc.reason}; `baton index --all` rebuilds it from the registry") from exc
            raise

    # The search index -------------------------------------------------------------------

    def search(self, vectors: Sequence[Sequence[float]], *, project: str, limit: int,
               exclude_task_id: str | None) -> list[ScoredDecision]:
        if not vectors or limit <= 0 or not self.path.exists():
            return []
        queries = _unit_rows(vectors, "a query")
        exclude = segments.task_key(exclude_task_id) if exclude_task_id is not None else None
        key = segments.project_key(project)
        with self._guarded():
            store_id, count, _ = self._state()
            view = self._current_view(store_id, count)
            try:
                scored = self._rescored(view.search(queries, limit, key, exclude), queries)
            except segments.Stale:
                scored = None
            if scored is None:
                # A row of the index differs from the store: rebuild and search again.
                view = self._rebuild(store_id)
                scored = self._rescored(view.search(queries, limit, key, exclude), queries) or []
        # Only the best are read as records (each candidate of each query vector was scored):
        # down to the limit-th best score, ties included. Keys are hashes: a colliding ticket
        # or project is left out here.
        hits: list[ScoredDecision] = []
        for score, payload in sorted(scored, key=lambda row: -row[0]):
            if len(hits) >= limit and score < hits[limit - 1].score:
                break
            record = DecisionRecord.model_validate_json(payload)
            if record.project == project and record.task_id != exclude_task_id:
                hits.append(ScoredDecision(record=record, score=score))
        return ranked(hits, limit)

    def _rescored(self, candidates: dict[int, float], queries: np.ndarray) -> list[tuple[float, str]] | None:
        """(score, payload) of each candidate, from the store; None when a candidate's
        indexed score is not what its stored vector gives."""
        if not candidates:
            return []
        seqs = list(candidates)
        marks = ",".join("?" * len(seqs))
        query = f"SELECT seq, project, payload, vector FROM vectors WHERE seq IN ({marks})"  # noqa: S608 -- placeholders only
        rows = self._db.conn().execute(query, seqs).fetchall()
        if len(rows) != len(seqs):
            return None
        vectors = np.frombuffer(b"".join(row[3] for row in rows), "<f4").reshape(len(rows), -1)
        hits = []
        for (seq, project, payload, _), score in zip(rows, (vectors @ queries.T).max(axis=1).tolist(), strict=True):
            if abs(score - candidates[seq]) > RESCORE_TOLERANCE:
                return None
            if project is not None:  # a key collision with a row stored before projects
                hits.append((score, payload))
        return hits

    def _current_view(self, store_id: str, count: int) -> segments.View:
        """The index as of now: the mapped segments (reopened when the manifest changed) and
        the rows written after them; rebuilt when it does not add up to the store."""
        view = self._view
        if view is None or view.store_id != store_id or view.manifest_stamp != segments.manifest_stamp(self.index_dir):
            try:
                view = segments.read_view(self.index_dir, store_id, DIMENSIONS)
            except segments.Stale:
                view = None
        if view is not None:
            view = view.with_rows(self._rows_after(view.last_seq))
            if view.count != count:
                view = None  # rows were removed, or the index holds rows the store lacks
        if view is None:
            view = self._rebuild(store_id)
        self._view = view
        return view

    def _rebuild(self, store_id: str) -> segments.View:
        """Every row of the store in memory; written as the new index when the lock is free
        and the disk takes it (otherwise the next process tries again)."""
        rows = self._rows_after(0)
        view = segments.View(store_id, int(rows.seqs[-1]) if len(rows) else 0, [rows], None)
        try:
            with self._locked(wait=False):
                entries = [segments.write_segment(self.index_dir, rows, store_id, DIMENSIONS)] if len(rows) else []
                segments.write_manifest(self.index_dir, entries, store_id, DIMENSIONS)
                view.manifest_stamp = segments.manifest_stamp(self.index_dir)
        except (OSError, StoreUnavailable):  # the disk, or another process writing the index
            pass
        return view

    def _extend_index(self) -> None:
        """Write the rows the index lacks as a new segment; merge the newest segments while
        the newest is at least a quarter of the one before (a few segments, each row
        rewritten a logarithmic number of times); give lists to a segment big enough. Only
        the segments that result are written: a merge that cascades writes one file."""
        with self._guarded(), self._locked(wait=True):
            store_id, count, _ = self._state()
            self._view = None  # another writer may have changed the index since we looked
            try:
                base = segments.read_view(self.index_dir, store_id, DIMENSIONS, populate=False)
            except segments.Stale:
                base = segments.View(store_id, 0, [], None)
            entries: list[segments.SegmentEntry | None] = list(segments.read_entries(self.index_dir)) \
                if base.parts else []
            delta = self._rows_after(base.last_seq)
            if base.count + len(delta) != count:
                entries, parts = [], []
                delta = self._rows_after(0)
            else:
                parts = list(base.parts)
            if len(delta):
                entries.append(None)
                parts.append(delta)
            first = len(parts) - 1
            while first >= 1 and sum(len(part) for part in parts[first:]) * 4 >= len(parts[first - 1]):
                first -= 1
            if first < len(parts) - 1:
                parts[first:] = [_merged(parts[first:])]
                entries[first:] = [None]
            for i, part in enumerate(parts):
                if not part.lists and len(part) >= segments.IVF_MIN_ROWS:
                    parts[i] = part.with_lists(segments.train_centroids(part.vectors))
                    entries[i] = None
            written = [entry or segments.write_segment(self.index_dir, part, store_id, DIMENSIONS)
                       for entry, part in zip(entries, parts, strict=True)]
            if written != entries or not (self.index_dir / segments.MANIFEST).exists():
                segments.write_manifest(self.index_dir, written, store_id, DIMENSIONS)

    @contextmanager
    def _locked(self, *, wait: bool) -> Iterator[None]:
        """index.lock, held while segment files and the manifest are written."""
        make_directory(self.index_dir)
        with held(self.folder / "index.lock", within=self.timeout if wait else 0) as got:
            if not got:
                raise StoreUnavailable(STORE, "the search index is being written by another process")
            yield


def _merged(parts: Sequence[segments.Rows]) -> segments.Rows:
    """Neighbouring segments' rows as one; with lists once big enough, reusing the oldest
    segment's centroids while they are enough for the size (training is the costly part),
    its rows then keeping their lists."""
    oldest, total = parts[0], sum(len(part) for part in parts)
    if total >= segments.IVF_MIN_ROWS and oldest.centroids is not None and oldest.lists * oldest.lists * 2 >= total:
        return oldest.extended(segments.Rows.concat(parts[1:], DIMENSIONS))
    rows = segments.Rows.concat(parts, DIMENSIONS)
    if len(rows) < segments.IVF_MIN_ROWS:
        return rows
    return rows.with_lists(segments.train_centroids(rows.vectors))


def _unreadable(exc: StoreUnavailable) -> bool:
    """A damaged file (not a database, malformed), as opposed to one busy or on a full disk."""
    cause = exc.__cause__
    while isinstance(cause, StoreUnavailable):
        cause = cause.__cause__
    return isinstance(cause, sqlite3.DatabaseError) and not isinstance(cause, sqlite3.OperationalError)
