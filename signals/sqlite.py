"""The embedded signal bus: an append-only SQLite log indexed by subject and time.

Every signal belongs to a project (baton.projects), part of its key and of its subjects' index:
a bus is opened for one project and reads and writes only its signals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from baton import clock
from baton.outcome import Found, Unavailable, answering
from baton.projects import check_project
from baton.signals.base import SignalBus
from baton.sqlite import SqliteFile
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.signals.model import Signal
    from baton.signals.wire import WireSignal

STORE = Store.SIGNAL_LOG
_T = TypeVar("_T")

MIGRATIONS = [
    """
    CREATE TABLE signals (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        signal_id TEXT NOT NULL UNIQUE,
        signal_type TEXT NOT NULL,
        task_id TEXT NOT NULL,
        emitted_at TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX signals_by_time ON signals (emitted_at);
    CREATE TABLE signal_subjects (
        subject TEXT NOT NULL,
        emitted_at TEXT NOT NULL,
        seq INTEGER NOT NULL REFERENCES signals (seq),
        PRIMARY KEY (subject, emitted_at, seq)
    ) WITHOUT ROWID;
    """,
    # Projects: a signal moves to its repository's project (what a worktree of it derives
    # unless baton.toml names another), its subjects with it; seq (the watermark) is kept.
    """
    DROP INDEX signals_by_time;
    ALTER TABLE signal_subjects RENAME TO signal_subjects_before_projects;
    ALTER TABLE signals RENAME TO signals_before_projects;
    CREATE TABLE signals (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        project TEXT NOT NULL,
        signal_id TEXT NOT NULL,
        signal_type TEXT NOT NULL,
        task_id TEXT NOT NULL,
        emitted_at TEXT NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (project, signal_id)
    );
    CREATE INDEX signals_by_time ON signals (project, emitted_at);
    CREATE TABLE signal_subjects (
        project TEXT NOT NULL,
        subject TEXT NOT NULL,
        emitted_at TEXT NOT NULL,
        seq INTEGER NOT NULL REFERENCES signals (seq),
        PRIMARY KEY (project, subject, emitted_at, seq)
    ) WITHOUT ROWID;
    INSERT INTO signals (seq, project, signal_id, signal_type, task_id, emitted_at, body)
        SELECT seq, coalesce(json_extract(body, '$.repo'), ''), signal_id, signal_type, task_id, emitted_at, body
        FROM signals_before_projects ORDER BY seq;
    INSERT INTO signal_subjects (project, subject, emitted_at, seq)
        SELECT s.project, ss.subject, ss.emitted_at, ss.seq
        FROM signal_subjects_before_projects ss JOIN signals s ON s.seq = ss.seq;
    DROP TABLE signal_subjects_before_projects;
    DROP TABLE signals_before_projects;
    """,
]

_EPOCH = "0000"


class SqliteSignalBus(SignalBus):
    def __init__(self, path: Path, *, timeout: float, project: str) -> None:
        self.path = path
        self.project = check_project(project)
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)

    def publish(self, signals: Sequence[Signal | WireSignal]) -> list[bool]:
        fresh = []
        with self._db.writing(STORE) as conn:
            for signal in signals:
                emitted = clock.to_text(signal.emitted_at)
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO signals (project, signal_id, signal_type, task_id, emitted_at, body) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (self.project, str(signal.signal_id), signal.signal_type.value, signal.task_id, emitted,
                     signal.to_json()))
                fresh.append(cursor.rowcount == 1)
                if cursor.rowcount == 1:
                    conn.executemany(
                        "INSERT INTO signal_subjects (project, subject, emitted_at, seq) VALUES (?, ?, ?, ?)",
                        [(self.project, subject, emitted, cursor.lastrowid) for subject in signal.subjects()])
        return fresh

    def rewrite(self, signals: Sequence[Signal]) -> int:
        with self._db.writing(STORE) as conn:
            return sum(conn.execute("UPDATE signals SET body = ? WHERE project = ? AND signal_id = ?",
                                    (signal.to_json(), self.project, str(signal.signal_id))).rowcount
                       for signal in signals)

    def known(self, signal_ids: Sequence[str]) -> set[str]:
        if not signal_ids:
            return set()
        marks = ",".join("?" * len(signal_ids))
        query = f"SELECT signal_id FROM signals WHERE project = ? AND signal_id IN ({marks})"  # noqa: S608
        return {signal_id for (signal_id,) in self._db.read(STORE, query, [self.project, *signal_ids])}

    def watermark(self) -> str | None:
        return str(self._db.read(STORE, "SELECT coalesce(max(seq), 0) FROM signals")[0][0])

    @answering
    def _read(self, query: str, params: Sequence, decode: Callable[[str], _T]) -> Found[list[_T]] | Unavailable:
        """The bodies query reads, each decoded."""
        rows = self._db.read(STORE, query, params)
        try:
            return Found([decode(body) for (body,) in rows])
        except (ValueError, KeyError, TypeError) as exc:  # a pydantic ValidationError is a ValueError
            errors = getattr(exc, "errors", None)
            said = errors()[0]["msg"] if callable(errors) else f"{type(exc).__name__}: {exc}"
            return Unavailable(f"{self.path}: a stored signal is unreadable: {said}")

    def concerning(self, subjects: Sequence[str], *, after: datetime | None,
                   limit: int) -> Found[list[Signal]] | Unavailable:
        return self._concerning(subjects, after, limit, _signal)

    def concerning_wire(self, subjects: Sequence[str], *, after: datetime | None,
                        limit: int) -> Found[list[WireSignal]] | Unavailable:
        from baton.signals.wire import WireSignal

        return self._concerning(subjects, after, limit, WireSignal.from_json)

    def _concerning(self, subjects: Sequence[str], after: datetime | None, limit: int,
                    decode: Callable[[str], _T]) -> Found[list[_T]] | Unavailable:
        """The newest `limit` signals about any of subjects after `after`, oldest first: one
        index range per subject (their number is bounded by the caller's files)."""
        if not subjects:
            return Found([])
        marks = ",".join("?" * len(subjects))
        query = (
            "SELECT body FROM (SELECT body, emitted_at, seq FROM signals WHERE seq IN ("  # noqa: S608 -- placeholders only
            f"SELECT seq FROM signal_subjects WHERE project = ? AND subject IN ({marks}) AND emitted_at > ?"
            ") ORDER BY emitted_at DESC, seq DESC LIMIT ?) ORDER BY emitted_at, seq")
        return self._read(query, [self.project, *subjects, clock.to_text(after) if after else _EPOCH, limit], decode)

    @answering
    def conflict_pairs(self, *, after: datetime | None) -> Found[set[frozenset[str | None]]] | Unavailable:
        rows = self._db.read(STORE, "SELECT task_id, json_extract(body, '$.payload.related_task_id') FROM signals "
                                    "WHERE project = ? AND emitted_at > ? AND signal_type = 'conflict_detected'",
                             [self.project, clock.to_text(after) if after else _EPOCH])
        return Found({frozenset(pair) for pair in rows})

    def recent(self, *, task_id: str | None, after: datetime | None, limit: int) -> Found[list[Signal]] | Unavailable:
        since = clock.to_text(after) if after else _EPOCH
        if task_id is None:
            query = ("SELECT body FROM (SELECT body, emitted_at, seq FROM signals WHERE project = ? AND emitted_at > ? "
                     "ORDER BY emitted_at DESC, seq DESC LIMIT ?) ORDER BY emitted_at, seq")
            return self._read(query, [self.project, since, limit], _signal)
        query = ("SELECT body FROM (SELECT s.body, s.emitted_at, s.seq FROM signal_subjects AS ss "
                 "JOIN signals AS s ON s.seq = ss.seq WHERE ss.project = ? AND ss.subject = ? AND ss.emitted_at > ? "
                 "ORDER BY ss.emitted_at DESC, ss.seq DESC LIMIT ?) ORDER BY emitted_at, seq")
        return self._read(query, [self.project, f"task:{task_id}", since, limit], _signal)

    def prune(self, before: datetime) -> int:
        stamp = clock.to_text(before)
        with self._db.writing(STORE) as conn:
            conn.execute("DELETE FROM signal_subjects WHERE seq IN "
                         "(SELECT seq FROM signals WHERE project = ? AND emitted_at < ?)", (self.project, stamp))
            return conn.execute("DELETE FROM signals WHERE project = ? AND emitted_at < ?",
                                (self.project, stamp)).rowcount

    def describe(self) -> dict[str, str]:
        return self._db.describe(STORE, "signals")

    def close(self) -> None:
        self._db.close()


def _signal(body: str) -> Signal:
    from baton.signals.model import Signal

    return Signal.model_validate_json(body)
