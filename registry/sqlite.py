"""The embedded session store: SQLite in WAL mode, one file in the data home."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from baton import clock
from baton.errors import StoreUnavailable
from baton.outcome import Found, NotFound, Unavailable
from baton.sqlite import connect, guarded, migrate, write_transaction
from registry.apply import apply_event
from registry.base import SessionStore
from registry.model import Event, Session

STORE = "session registry"

MIGRATIONS = [
    """
    CREATE TABLE events (
        event_id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        at TEXT NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX events_by_task ON events (task_id, at);
    CREATE TABLE sessions (
        task_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        last_activity TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_status ON sessions (status, last_activity);
    """,
]


@cache
def _event_adapter() -> TypeAdapter:
    return TypeAdapter(Event)


class SqliteSessionStore(SessionStore):
    def __init__(self, path: Path, *, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._connection: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            conn = connect(self.path, timeout=self.timeout)
            try:
                migrate(conn, MIGRATIONS)
            except BaseException:
                conn.close()
                raise
            self._connection = conn
        return self._connection

    def _load(self, conn: sqlite3.Connection, task_id: str) -> Session | None:
        row = conn.execute("SELECT body FROM sessions WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        try:
            return Session.model_validate_json(row[0])
        except ValidationError as exc:
            raise sqlite3.DatabaseError(f"stored session {task_id} is unreadable: {exc.errors()[0]['msg']}") from exc

    def append(self, events: Sequence[Event]) -> dict[str, Session]:
        adapter = _event_adapter()
        with guarded(STORE, self.path):
            conn = self._conn()
            sessions: dict[str, Session | None] = {}
            with write_transaction(conn):
                for event in events:
                    inserted = conn.execute(
                        "INSERT OR IGNORE INTO events (event_id, task_id, at, type, body) VALUES (?, ?, ?, ?, ?)",
                        (str(event.event_id), event.task_id, clock.to_text(event.at), event.type,
                         adapter.dump_json(event).decode()),
                    ).rowcount
                    if event.task_id not in sessions:
                        sessions[event.task_id] = self._load(conn, event.task_id)
                    if inserted:
                        sessions[event.task_id] = apply_event(sessions[event.task_id], event)
                for task_id, session in sessions.items():
                    if session is not None:
                        conn.execute(
                            "INSERT INTO sessions (task_id, status, last_activity, body) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, "
                            "last_activity = excluded.last_activity, body = excluded.body",
                            (task_id, session.status.value, clock.to_text(session.last_activity),
                             session.model_dump_json()),
                        )
        return {task_id: s for task_id, s in sessions.items() if s is not None}

    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        try:
            with guarded(STORE, self.path):
                session = self._load(self._conn(), task_id)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        return NotFound(task_id) if session is None else Found(session)

    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        query = "SELECT body FROM sessions {} ORDER BY last_activity DESC, task_id".format(
            "" if include_inactive else "WHERE status = 'active'")
        try:
            with guarded(STORE, self.path):
                rows = self._conn().execute(query).fetchall()
                return Found([Session.model_validate_json(body) for (body,) in rows])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        except ValidationError as exc:
            return Unavailable(f"{self.path}: a stored session is unreadable: {exc.errors()[0]['msg']}")

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        adapter = _event_adapter()
        try:
            with guarded(STORE, self.path):
                rows = self._conn().execute(
                    "SELECT body FROM events WHERE task_id = ? ORDER BY at, event_id", (task_id,)).fetchall()
                return Found([adapter.validate_json(body) for (body,) in rows])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        except ValidationError as exc:
            return Unavailable(f"{self.path}: a stored event is unreadable: {exc.errors()[0]['msg']}")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
