"""The embedded conflict graph: touches indexed by file in SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.files import FileRef
from baton.graph.base import ConflictGraph, TicketRecord, count_moves, id_range
from baton.sqlite import SqliteFile, guarded
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
    # Each touch carries its ticket's activity, so that a file's sharers are found among
    # active tickets only: the conflict queries cost the same however many ended sessions
    # touched the same files before.
    """
    ALTER TABLE touches ADD COLUMN active INTEGER NOT NULL DEFAULT 0;
    UPDATE touches SET active = 1 WHERE task_id IN (SELECT task_id FROM tasks WHERE status = 'active');
    DROP INDEX touches_by_file;
    CREATE INDEX active_touches_by_file ON touches (repo, path, task_id) WHERE active;
    """,
    # Projects (baton.projects): a ticket's id is qualified by its project. Before them a
    # ticket's project was its repository, which each of its touches names; a ticket that
    # touched no file holds no overlap and is recorded again by its next write.
    """
    INSERT OR IGNORE INTO tasks (task_id, status)
        SELECT DISTINCT t.repo || char(31) || t.task_id, k.status
        FROM touches t JOIN tasks k ON k.task_id = t.task_id WHERE instr(t.task_id, char(31)) = 0;
    UPDATE touches SET task_id = repo || char(31) || task_id WHERE instr(task_id, char(31)) = 0;
    DELETE FROM tasks WHERE instr(task_id, char(31)) = 0;
    """,
    # A copy of the leases, dropped by the last migration (the registry holds them).
    """
    CREATE TABLE leases (
        task_id TEXT NOT NULL,
        lease_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        pattern TEXT NOT NULL,
        exclusive INTEGER NOT NULL,
        agent TEXT,
        ttl_seconds INTEGER NOT NULL,
        granted_at TEXT NOT NULL,
        ends REAL NOT NULL,
        released INTEGER NOT NULL,
        PRIMARY KEY (task_id, lease_id)
    ) WITHOUT ROWID;
    """,
    # Conflict counts kept at write time (ConflictGraph.kept_counts): per ticket, its files
    # another active ticket of its project touches and how many such tickets. A graph that
    # held active touches before is not counted yet: `counted` says so until a recount. The
    # tickets in conflict have their own index, which the list reads whole.
    """
    ALTER TABLE tasks ADD COLUMN shared_files INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN sharers INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE counts (counted INTEGER NOT NULL);
    INSERT INTO counts (counted) SELECT NOT EXISTS (SELECT 1 FROM touches WHERE active);
    CREATE INDEX tasks_in_conflict ON tasks (task_id, shared_files, sharers)
        WHERE status = 'active' AND shared_files > 0;
    """,
    # Leases live in the registry alone: the graph's copy of them, read by nothing, goes.
    "DROP TABLE leases;",
]

# The other active tickets' touches of a ticket's files: its own touches (primary key
# prefix), then the file's active sharers (the partial index). Pairs in `expected` (a JSON
# list of [task, other]) are left out.
_SHARERS = """
FROM touches AS mine
JOIN touches AS other ON other.active AND other.repo = mine.repo AND other.path = mine.path
    AND other.task_id <> mine.task_id AND other.task_id >= :low AND other.task_id < :high
"""
_EXPECTED = """
WITH expected (task, other) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:expected))
"""

# partners: how many other tickets, first by id.
_SHARED = f"""
WITH partner AS (
    SELECT DISTINCT other.task_id {_SHARERS} WHERE mine.task_id = :task ORDER BY other.task_id LIMIT :partners)
SELECT other.task_id, other.repo, other.path {_SHARERS}
WHERE mine.task_id = :task AND other.task_id IN partner
ORDER BY other.task_id, other.repo, other.path
"""

# The tickets of :tasks (a JSON list), each from its own touches; _PAIRS keeps the pairs of
# two active tickets among them.
_SHARED_OF, _PAIRS = (f"""
WITH asked AS (SELECT value AS task_id FROM json_each(:tasks))
SELECT mine.task_id, other.task_id, other.repo, other.path {_SHARERS}
WHERE {where}
ORDER BY mine.task_id, other.task_id, other.repo, other.path
"""  # noqa: S608 -- constants
    for where in ("mine.task_id IN asked", "mine.active AND mine.task_id IN asked AND other.task_id IN asked"))
# The active touches of the files of :files (a JSON list of [repo, path]): the partial index.
_TOUCHERS = """
WITH asked (repo, path) AS (SELECT DISTINCT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                            FROM json_each(:files))
SELECT t.repo, t.path, t.task_id, t.last_at
FROM asked JOIN touches AS t ON t.active AND t.repo = asked.repo AND t.path = asked.path
    AND t.task_id >= :low AND t.task_id < :high
ORDER BY t.repo, t.path, t.task_id
"""
# The active touches of a repository's files under a path prefix: the partial index, a range of paths.
_UNDER = """
SELECT task_id, path FROM touches
WHERE active AND repo = :repo AND path >= :first AND path < :last AND task_id >= :low AND task_id < :high
ORDER BY path, task_id
"""
_HELD = """
SELECT t.task_id, t.status, k.repo, k.path
FROM tasks AS t LEFT JOIN touches AS k ON k.task_id = t.task_id
WHERE t.task_id IN (SELECT value FROM json_each(:tasks))
ORDER BY t.task_id, k.repo, k.path
"""
_HELD_COUNTS = """
SELECT t.task_id, t.status, count(k.task_id)
FROM tasks AS t LEFT JOIN touches AS k ON k.task_id = t.task_id
WHERE t.task_id IN (SELECT value FROM json_each(:tasks))
GROUP BY t.task_id, t.status
"""

# Per active ticket, three correlated aggregates over its own touches: each holds one
# ticket's sharers at a time (the DISTINCT's temporary tree), never the pairs.
_NOT_EXPECTED = "(mine.task_id, other.task_id) NOT IN expected"
_SUMMARIES = f"""
{_EXPECTED}
SELECT t.task_id,
    (SELECT count(*) FROM touches AS mine WHERE mine.task_id = t.task_id AND EXISTS (
        SELECT 1 FROM touches AS other WHERE other.active AND other.repo = mine.repo AND other.path = mine.path
        AND other.task_id <> mine.task_id AND other.task_id >= :low AND other.task_id < :high
        AND {_NOT_EXPECTED})),
    (SELECT count(DISTINCT other.task_id) {_SHARERS} WHERE mine.task_id = t.task_id AND {_NOT_EXPECTED}),
    (SELECT json_group_array(task_id) FROM (
        SELECT DISTINCT other.task_id {_SHARERS} WHERE mine.task_id = t.task_id AND {_NOT_EXPECTED}
        ORDER BY other.task_id LIMIT :sample))
FROM tasks AS t
WHERE t.status = 'active' AND t.task_id >= :low AND t.task_id < :high
"""  # noqa: S608 -- constants
_SUMMARIES_OF = _SUMMARIES + " AND t.task_id IN (SELECT value FROM json_each(:tasks))"  # noqa: S608 -- constants


def _bounds(scope: str) -> dict[str, str]:
    """The ids starting with scope, as the range [low, high) the primary keys answer."""
    return dict(zip(("low", "high"), id_range(scope), strict=True))


def _add_touches(conn: sqlite3.Connection, task_id: str, files: Sequence[FileRef], stamp: str) -> None:
    """Touches carry the ticket's activity as it stands (set before this is called)."""
    conn.executemany(
        "INSERT INTO touches (task_id, repo, path, last_at, active) "
        "VALUES (?, ?, ?, ?, EXISTS (SELECT 1 FROM tasks WHERE task_id = ? AND status = 'active')) "
        "ON CONFLICT DO UPDATE SET last_at = max(last_at, excluded.last_at)",
        [(task_id, f.repo, f.path, stamp, task_id) for f in files])


def _mark_activity(conn: sqlite3.Connection, task_id: str) -> None:
    """Bring the ticket's touches in line with its status; touches nothing when they are."""
    conn.execute(
        "UPDATE touches SET active = (SELECT status = 'active' FROM tasks WHERE task_id = :task) "
        "WHERE task_id = :task AND active <> (SELECT status = 'active' FROM tasks WHERE task_id = :task)",
        {"task": task_id})


# A ticket and another are of one project when their ids' project prefixes (up to the
# separator, baton.projects; empty for an id kept before projects) agree.
_SAME_PROJECT = ("substr(other.task_id, 1, instr(other.task_id, char(31))) "
                 "= substr(mine.task_id, 1, instr(mine.task_id, char(31)))")
# The other active tickets of its project touching a ticket's files (as _SHARERS).
_PROJECT_SHARERS = f"""
FROM touches AS mine
JOIN touches AS other ON other.active AND other.repo = mine.repo AND other.path = mine.path
    AND other.task_id <> mine.task_id AND {_SAME_PROJECT}
"""
# Every touch of the ticket's files by another active ticket of its project.
_PARTNER_ROWS = f"SELECT other.task_id, mine.repo, mine.path {_PROJECT_SHARERS} WHERE mine.task_id = :task"
# Up to :sample tickets sharing a file with the ticket, the first found (no sort: a
# ticket's thousand partners are not all read for five).
_SAMPLE = f"SELECT DISTINCT other.task_id {_PROJECT_SHARERS} WHERE mine.task_id = :task LIMIT :sample"
# The kept counts of the tickets of :tasks (a JSON list), counted again from their touches.
_RECOUNT = f"""
UPDATE tasks SET
    shared_files = CASE WHEN status <> 'active' THEN 0 ELSE (
        SELECT count(*) FROM touches AS mine WHERE mine.task_id = tasks.task_id AND EXISTS (
            SELECT 1 FROM touches AS other WHERE other.active AND other.repo = mine.repo
            AND other.path = mine.path AND other.task_id <> mine.task_id AND {_SAME_PROJECT})) END,
    sharers = CASE WHEN status <> 'active' THEN 0 ELSE (
        SELECT count(DISTINCT other.task_id) {_PROJECT_SHARERS} WHERE mine.task_id = tasks.task_id) END
WHERE task_id IN (SELECT value FROM json_each(:tasks))
"""  # noqa: S608 -- constants
_KEPT = """
SELECT task_id, shared_files, sharers FROM tasks INDEXED BY tasks_in_conflict
WHERE status = 'active' AND shared_files > 0 AND task_id >= :low AND task_id < :high
LIMIT :at_most
"""
_KEPT_OF = """
SELECT task_id, shared_files, sharers FROM tasks
WHERE status = 'active' AND task_id IN (SELECT value FROM json_each(:tasks))
"""
RECOUNT_CHUNK = 500  # tickets counted again in one transaction: a hook waits for no longer


def _active_files(conn: sqlite3.Connection, task_id: str) -> set[str]:
    return {f"{repo}\0{path}" for repo, path in conn.execute(
        "SELECT repo, path FROM touches WHERE task_id = ? AND active", (task_id,))}


def _count_change(conn: sqlite3.Connection, task_id: str, before: set[str], after: set[str]) -> None:
    """Move the kept counts for a change of the ticket's active touches from `before` to
    `after` (count_moves). Called while the ticket's touches are stored (after a write,
    before a removal)."""
    if before == after:
        return
    others: dict[str, list[str]] = {}
    for other, repo, path in conn.execute(_PARTNER_ROWS, {"task": task_id}):
        others.setdefault(f"{repo}\0{path}", []).append(other)
    counts, moves = count_moves({task_id: before}, {task_id: after}, {task_id: others})
    conn.executemany("UPDATE tasks SET shared_files = shared_files + ?, sharers = sharers + ? WHERE task_id = ?",
                     [(files, tickets, other) for other, (files, tickets) in moves.items()])
    conn.execute("UPDATE tasks SET shared_files = ?, sharers = ? WHERE task_id = ?", (*counts[task_id], task_id))


class SqliteConflictGraph(ConflictGraph):
    def __init__(self, path: Path, *, timeout: float) -> None:
        self.path = path
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)

    def _record_rows(self, records: Sequence[TicketRecord]) -> None:
        """One transaction: a ticket's status and touches never reach the graph apart."""
        with self._db.writing(STORE) as conn:
            for r in records:
                before = _active_files(conn, r.task_id)
                conn.execute(
                    "INSERT INTO tasks (task_id, status) VALUES (?, ?) "
                    "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status", (r.task_id, r.status))
                _mark_activity(conn, r.task_id)
                _add_touches(conn, r.task_id, r.files, clock.to_text(r.at))
                _count_change(conn, r.task_id, before, _active_files(conn, r.task_id))

    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        stamp = clock.to_text(at)
        with self._db.writing(STORE) as conn:
            before = _active_files(conn, task_id)
            conn.execute(
                "INSERT INTO tasks (task_id, status) VALUES (?, 'active') "
                "ON CONFLICT (task_id) DO UPDATE SET status = 'active' WHERE status = 'stalled'", (task_id,))
            _mark_activity(conn, task_id)
            _add_touches(conn, task_id, files, stamp)
            _count_change(conn, task_id, before, _active_files(conn, task_id))
            status = conn.execute("SELECT status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()[0]
        return status == "active"

    def _held_rows(self, task_ids: list[str]) -> list[tuple[str, str, str | None, str | None]]:
        return self._db.read(STORE, _HELD, {"tasks": json.dumps(task_ids)})

    def _held_count_rows(self, task_ids: list[str]) -> list[tuple[str, str, int]]:
        return self._db.read(STORE, _HELD_COUNTS, {"tasks": json.dumps(task_ids)})

    def _under_rows(self, repo: str, prefix: str, scope: str = "") -> list[tuple[str, str]]:
        first, last = id_range(prefix)
        return self._db.read(STORE, _UNDER, {"repo": repo, "first": first, "last": last, **_bounds(scope)})

    def forget(self, task_ids: Sequence[str]) -> None:
        with self._db.writing(STORE) as conn:
            for task_id in task_ids:
                _count_change(conn, task_id, _active_files(conn, task_id), set())
            conn.executemany("DELETE FROM touches WHERE task_id = ?", [(t,) for t in task_ids])
            conn.executemany("DELETE FROM tasks WHERE task_id = ?", [(t,) for t in task_ids])

    def _shared_rows(self, task_id: str, partners: int, scope: str = "") -> list[tuple[str, str, str]]:
        return self._db.read(STORE, _SHARED, {"task": task_id, "partners": partners, **_bounds(scope)})

    def _shared_rows_of(self, task_ids: list[str], among: bool, scope: str = "") -> list[tuple[str, str, str, str]]:
        return self._db.read(STORE, _PAIRS if among else _SHARED_OF, {"tasks": json.dumps(task_ids), **_bounds(scope)})

    def _toucher_rows(self, files: list[FileRef], scope: str = "") -> list[tuple[str, str, str, str]]:
        return self._db.read(STORE, _TOUCHERS, {"files": json.dumps([[f.repo, f.path] for f in files]),
                                                **_bounds(scope)})

    def _summary_rows(self, sample: int, expected: list[tuple[str, str]], task_ids: list[str] | None,
                      scope: str = "") -> list[tuple[str, int, int, list[str]]]:
        query, arguments = _SUMMARIES, {"sample": sample, "expected": json.dumps(expected), **_bounds(scope)}
        if task_ids is not None:
            query, arguments["tasks"] = _SUMMARIES_OF, json.dumps(task_ids)
        rows = self._db.read(STORE, query, arguments)
        return [(task, files, tickets, json.loads(partners)) for task, files, tickets, partners in rows if files]

    def _kept_rows(self, task_ids: list[str] | None, scope: str = "", *,
                   at_most: int | None = None) -> list[tuple[str, int, int]] | None:
        if not self.counted():
            return None
        if task_ids is None:
            return self._db.read(STORE, _KEPT, {**_bounds(scope), "at_most": -1 if at_most is None else at_most})
        return self._db.read(STORE, _KEPT_OF, {"tasks": json.dumps(task_ids)})

    def _sample_rows(self, task_ids: list[str], sample: int, scope: str = "") -> dict[str, list[str]]:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            return {task: [other for (other,) in conn.execute(_SAMPLE, {"task": task, "sample": sample})]
                    for task in task_ids}

    def counted(self) -> bool:
        return bool(self._db.read(STORE, "SELECT counted FROM counts")[0][0])

    def recount(self) -> int:
        """RECOUNT_CHUNK tickets per transaction (writes in between keep theirs moving, so a
        ticket counted before them stays right), then the mark."""
        after, done = "", 0
        while True:
            chunk = [task for (task,) in self._db.read(
                STORE, "SELECT task_id FROM tasks WHERE task_id > ? ORDER BY task_id LIMIT ?", (after, RECOUNT_CHUNK))]
            if not chunk:
                break
            with self._db.writing(STORE) as conn:
                conn.execute(_RECOUNT, {"tasks": json.dumps(chunk)})
            done += len(chunk)
            after = chunk[-1]
        with self._db.writing(STORE) as conn:
            conn.execute("UPDATE counts SET counted = 1")
        return done

    def describe(self) -> dict[str, str]:
        return self._db.describe(STORE, "touches")

    def close(self) -> None:
        self._db.close()
