"""The embedded session store: SQLite in WAL mode, one file in the data home.

Events are appended to `events`; `applied = 0` marks one whose projection is not yet
written. Full writes apply their events in the same transaction. The hook's touch only
appends (no pydantic import, a few hundred microseconds), and the next read or write
applies every pending event first, in the same transaction as it marks them applied.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.outcome import Found, NotFound, Unavailable
from baton.registry.base import SessionOutline, SessionStore, SignalScope, outline_status
from baton.registry.wire import event_adapter
from baton.sqlite import SqliteFile, guarded, write_transaction
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.registry.model import Event, Session

STORE = Store.SESSION_REGISTRY
# Unprojected events (append_body) that signal_scope reads raw: they add files at most (a
# checkpoint's record, which the Stop hook appends, adds nothing to the scope).
_SCOPE_READ_RAW = {"files_touched", "decision_recorded", "checkpoint_taken"}
# Unprojected events that session_outlines reads raw: they move last_activity at most.
_OUTLINE_READ_RAW = ("files_touched", "decision_recorded", "checkpoint_taken")
_OUTLINE_NEEDS_PROJECTION = (
    "SELECT 1 FROM events e WHERE e.applied = 0 AND (e.type NOT IN (?, ?, ?) "
    "OR NOT EXISTS (SELECT 1 FROM sessions s WHERE s.task_id = e.task_id)) LIMIT 1")
# The outline's fields from the stored projection (one parse of it: json_extract of many
# paths answers a JSON array), with the latest unprojected event's time; a stalled session
# with unprojected events may be active again (Session.status).
_OUTLINES = (
    "WITH pending AS (SELECT task_id, max(at) AS at FROM events WHERE applied = 0 GROUP BY task_id) "
    "SELECT s.task_id, s.status, s.last_activity, p.at, json_extract(s.body, '$.lifecycle', "
    "'$.lifecycle_stamp.at', '$.phase', '$.repo', '$.worktree_path', '$.branch', '$.agent', "
    "'$.workflow.state.status', '$.workflow.state.next_stage') "
    "FROM sessions s LEFT JOIN pending p ON p.task_id = s.task_id")
_ACTIVE_OUTLINES = f"{_OUTLINES} WHERE s.status = 'active' OR p.at IS NOT NULL"

MIGRATIONS = [
    """
    CREATE TABLE events (
        event_id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        at TEXT NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        applied INTEGER NOT NULL DEFAULT 1
    );
    CREATE INDEX events_by_task ON events (task_id, at);
    CREATE INDEX events_pending ON events (applied) WHERE applied = 0;
    CREATE TABLE sessions (
        task_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        last_activity TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_status ON sessions (status, last_activity);
    """,
    # Tombstones of pruned sessions: events up to `through` are not taken again.
    """
    CREATE TABLE pruned (
        task_id TEXT PRIMARY KEY,
        through TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
]
# An event of a pruned ticket as old as its tombstone is not stored again.
_INSERT_EVENT = ("INSERT OR IGNORE INTO events (event_id, task_id, at, type, body, applied) "
                 "SELECT ?1, ?2, ?3, ?4, ?5, ?6 "
                 "WHERE NOT EXISTS (SELECT 1 FROM pruned WHERE pruned.task_id = ?2 AND pruned.through >= ?3)")


class SqliteSessionStore(SessionStore):
    def __init__(self, path: Path, *, timeout: float) -> None:
        self.path = path
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)

    def _load(self, conn: sqlite3.Connection, task_id: str) -> Session | None:
        from pydantic import ValidationError

        from baton.registry.model import Session

        row = conn.execute("SELECT body FROM sessions WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        try:
            return Session.model_validate_json(row[0])
        except ValidationError as exc:
            raise sqlite3.DatabaseError(f"stored session {task_id} is unreadable: {exc.errors()[0]['msg']}") from exc

    def _save(self, conn: sqlite3.Connection, session: Session) -> None:
        conn.execute(
            "INSERT INTO sessions (task_id, status, last_activity, body) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, "
            "last_activity = excluded.last_activity, body = excluded.body",
            (session.task_id, session.status.value, clock.to_text(session.last_activity), session.model_dump_json()))

    def _apply_pending(self, conn: sqlite3.Connection) -> None:
        """Project every pending event; runs inside the caller's write transaction."""
        from pydantic import ValidationError

        from baton.registry.apply import apply_event

        rows = conn.execute("SELECT event_id, body FROM events WHERE applied = 0 ORDER BY at").fetchall()
        if not rows:
            return
        adapter = event_adapter()
        sessions: dict[str, Session] = {}
        for event_id, body in rows:
            try:
                event = adapter.validate_json(body)
            except ValidationError as exc:
                problem = exc.errors()[0]["msg"]
                raise sqlite3.DatabaseError(f"pending event {event_id} is unreadable: {problem}") from exc
            current = sessions[event.task_id] if event.task_id in sessions else self._load(conn, event.task_id)
            sessions[event.task_id] = apply_event(current, event)
        for session in sessions.values():
            self._save(conn, session)
        conn.executemany("UPDATE events SET applied = 1 WHERE event_id = ?", [(e,) for e, _ in rows])

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        if conn.execute("SELECT 1 FROM events WHERE applied = 0 LIMIT 1").fetchone() is None:
            return
        with write_transaction(conn):
            self._apply_pending(conn)

    def append_body(self, event_id: str, task_id: str, at: datetime, event_type: str, body: str) -> None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.execute(_INSERT_EVENT, (event_id, task_id, clock.to_text(at), event_type, body, 0))

    def append(self, events: Sequence[Event]) -> dict[str, Session]:
        from baton.registry.apply import apply_event

        adapter = event_adapter()
        with guarded(STORE, self.path):
            conn = self._db.conn()
            sessions: dict[str, Session | None] = {}
            with write_transaction(conn):
                self._apply_pending(conn)
                for event in events:
                    inserted = conn.execute(_INSERT_EVENT, (
                        str(event.event_id), event.task_id, clock.to_text(event.at), event.type,
                        adapter.dump_json(event).decode(), 1)).rowcount
                    if event.task_id not in sessions:
                        sessions[event.task_id] = self._load(conn, event.task_id)
                    if inserted:
                        sessions[event.task_id] = apply_event(sessions[event.task_id], event)
                for session in sessions.values():
                    if session is not None:
                        self._save(conn, session)
        return {task_id: s for task_id, s in sessions.items() if s is not None}

    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        try:
            with guarded(STORE, self.path):
                conn = self._db.conn()
                self._catch_up(conn)
                session = self._load(conn, task_id)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        return NotFound(task_id) if session is None else Found(session)

    def signal_scope(self, task_id: str) -> Found[SignalScope] | NotFound | Unavailable:
        """From the stored projection's JSON and the pending events' (one statement, one
        snapshot), so the prompt hook pays neither pydantic nor a projection."""
        try:
            with guarded(STORE, self.path):
                rows = self._db.conn().execute(
                    "SELECT 'session', NULL, body FROM sessions WHERE task_id = ? "
                    "UNION ALL SELECT type, at, body FROM events WHERE task_id = ? AND applied = 0",
                    (task_id, task_id)).fetchall()
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        stored = [body for kind, _, body in rows if kind == "session"]
        pending = [(kind, at, body) for kind, at, body in rows if kind != "session"]
        if not stored or any(kind not in _SCOPE_READ_RAW for kind, _, _ in pending):
            # A ticket not projected yet, or a pending event that may change the scope:
            # the full read projects it.
            return super().signal_scope(task_id) if rows else NotFound(task_id)
        try:
            session = json.loads(stored[0])
            files = {(t["repo"], t["path"]) for t in session["files"].values()}
            files.update((f["repo"], f["path"]) for kind, _, body in pending if kind == "files_touched"
                         for f in json.loads(body)["files"])
            created_at = min([clock.parse(session["created_at"]), *(clock.parse(at) for _, at, _ in pending)])
            fork_of = next((r["parent_task_id"] for r in session.get("run_log", []) if r["kind"] == "fork"), None)
            return Found(SignalScope(created_at, tuple(session["depends_on"]),
                                     tuple(FileRef(repo, path) for repo, path in sorted(files)), fork_of))
        except (ValueError, KeyError, TypeError) as exc:
            return Unavailable(f"{self.path}: stored session {task_id} is unreadable: {type(exc).__name__}: {exc}")

    def watermark(self) -> str | None:
        # The events' rowids only grow while events are stored; applying them changes no rowid.
        with guarded(STORE, self.path):
            mark = self._db.conn().execute(
                "SELECT coalesce(max(rowid), 0), (SELECT count(*) FROM pruned) FROM events").fetchone()
        return f"{mark[0]}:{mark[1]}"

    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        from pydantic import ValidationError

        from baton.registry.model import Session

        query = ("SELECT body FROM sessions ORDER BY last_activity DESC, task_id" if include_inactive
                 else "SELECT body FROM sessions WHERE status = 'active' ORDER BY last_activity DESC, task_id")
        try:
            with guarded(STORE, self.path):
                conn = self._db.conn()
                self._catch_up(conn)
                rows = conn.execute(query).fetchall()
                return Found([Session.model_validate_json(body) for (body,) in rows])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        except ValidationError as exc:
            return Unavailable(f"{self.path}: a stored session is unreadable: {exc.errors()[0]['msg']}")

    def session_outlines(self, *, include_inactive: bool = False) -> Found[list[SessionOutline]] | Unavailable:
        """From the stored projections' JSON (read by SQLite) and the unprojected events'
        times, so a thousand sessions cost neither pydantic nor their validation; an
        unprojected event that may change more than the last activity is projected first."""
        query = _OUTLINES if include_inactive else _ACTIVE_OUTLINES
        try:
            with guarded(STORE, self.path):
                conn = self._db.conn()
                if conn.execute(_OUTLINE_NEEDS_PROJECTION, _OUTLINE_READ_RAW).fetchone() is not None:
                    self._catch_up(conn)
                rows = conn.execute(query).fetchall()
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        outlines = []
        try:
            for task_id, status, last_activity, pending_at, fields in rows:
                (lifecycle, lifecycle_at, phase, repo, worktree_path, branch, agent, stage,
                 next_stage) = json.loads(fields)
                last = clock.parse(last_activity)
                if pending_at is not None:
                    last = max(last, clock.parse(pending_at))
                    status = outline_status(lifecycle or status, lifecycle_at and clock.parse(lifecycle_at), last)
                if include_inactive or status == "active":
                    outlines.append(SessionOutline(task_id, status, phase or "planning", repo, worktree_path, branch,
                                                   agent, last, _text(stage), _text(next_stage)))
        except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
            return Unavailable(f"{self.path}: a stored session is unreadable: {type(exc).__name__}: {exc}")
        outlines.sort(key=lambda o: o.task_id)
        outlines.sort(key=lambda o: o.last_activity, reverse=True)
        return Found(outlines)

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        from pydantic import ValidationError

        adapter = event_adapter()
        try:
            with guarded(STORE, self.path):
                rows = self._db.conn().execute(
                    "SELECT body FROM events WHERE task_id = ? ORDER BY at, event_id", (task_id,)).fetchall()
                return Found([adapter.validate_json(body) for (body,) in rows])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        except ValidationError as exc:
            return Unavailable(f"{self.path}: a stored event is unreadable: {exc.errors()[0]['msg']}")

    def prune(self, ended_before: datetime, *, dry_run: bool = False) -> list[str]:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                self._apply_pending(conn)
                rows = conn.execute(
                    "SELECT s.task_id, (SELECT max(at) FROM events e WHERE e.task_id = s.task_id) FROM sessions s "
                    "WHERE s.status IN ('completed', 'stalled') AND s.last_activity < ? AND s.task_id NOT IN ("
                    "  SELECT d.value FROM sessions a, json_each(a.body, '$.depends_on') d WHERE a.status = 'active') "
                    "ORDER BY s.task_id", (clock.to_text(ended_before),)).fetchall()
                if not dry_run:
                    for task_id, through in rows:
                        conn.execute("DELETE FROM events WHERE task_id = ?", (task_id,))
                        conn.execute("DELETE FROM sessions WHERE task_id = ?", (task_id,))
                        conn.execute("INSERT INTO pruned (task_id, through) VALUES (?, ?) ON CONFLICT (task_id) "
                                     "DO UPDATE SET through = max(through, excluded.through)",
                                     (task_id, through or clock.to_text(ended_before)))
        return [task_id for task_id, _ in rows]

    def forget_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        import json

        if not checkpoint_ids:
            return 0
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                return conn.execute(
                    "DELETE FROM events WHERE type = 'checkpoint_taken' "
                    "AND json_extract(body, '$.checkpoint_id') IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(checkpoint_ids)),)).rowcount

    def pruned(self) -> Found[set[str]] | Unavailable:
        try:
            with guarded(STORE, self.path):
                return Found({task_id for (task_id,) in self._db.conn().execute("SELECT task_id FROM pruned")})
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def describe(self) -> dict[str, str]:
        with guarded(STORE, self.path):
            return self._db.describe("sessions")

    def close(self) -> None:
        self._db.close()


def _text(value: object) -> str | None:
    """A workflow state's field as text; None when absent or of another kind."""
    return value if isinstance(value, str) else None
