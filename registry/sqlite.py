"""The embedded session store: SQLite in WAL mode, one file in the data home.

Events are appended to `events`; `applied = 0` marks one whose projection is not yet
written. Full writes apply their events in the same transaction. The hook's touch only
appends (no pydantic import, a few hundred microseconds), and the next read or write
applies every pending event first, in the same transaction as it marks them applied.

Every row belongs to a project (baton.projects), part of each key: a store is opened for one
project and every statement names it, so the same ticket id in two projects is two sessions.
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
from baton.projects import check_project
from baton.registry.base import (
    ListedSession,
    SessionOutline,
    SessionStore,
    SignalScope,
    handoff_held,
    outline_status,
)
from baton.registry.wire import event_adapter
from baton.sqlite import SqliteFile, guarded, write_transaction
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.registry.model import Event, SecretsRedacted, Session

STORE = Store.SESSION_REGISTRY
# Unprojected events (append_body) that signal_scope reads raw: they add files at most (a
# checkpoint's record, which the Stop hook appends, adds nothing to the scope).
_SCOPE_READ_RAW = {"files_touched", "decision_recorded", "checkpoint_taken"}
# Unprojected events that session_outlines reads raw: they move last_activity at most.
_OUTLINE_READ_RAW = ("files_touched", "decision_recorded", "checkpoint_taken")
_OUTLINE_NEEDS_PROJECTION = (
    "SELECT 1 FROM events e WHERE e.project = ? AND e.applied = 0 AND (e.type NOT IN (?, ?, ?) "
    "OR NOT EXISTS (SELECT 1 FROM sessions s WHERE s.project = e.project AND s.task_id = e.task_id)) LIMIT 1")
# The outline's fields from the stored projection (one parse of it: json_extract of many
# paths answers a JSON array), with the latest unprojected event's time; a stalled session
# with unprojected events may be active again (Session.status).
_OUTLINES = (
    "WITH pending AS (SELECT task_id, max(at) AS at FROM events WHERE project = ?1 AND applied = 0 "
    "GROUP BY task_id) "
    "SELECT s.task_id, s.status, s.last_activity, p.at, json_extract(s.body, '$.lifecycle', "
    "'$.lifecycle_stamp.at', '$.phase', '$.repo', '$.worktree_path', '$.branch', '$.agent', "
    "'$.workflow.state.status', '$.workflow.state.next_stage') "
    "FROM sessions s LEFT JOIN pending p ON p.task_id = s.task_id WHERE s.project = ?1")
_ACTIVE_OUTLINES = f"{_OUTLINES} AND (s.status = 'active' OR p.at IS NOT NULL)"

# What `baton list` shows of each session, from its stored projection (read after every
# pending event is projected, so the status column is the session's status).
_LISTED = (
    "SELECT task_id, status, last_activity, json_extract(body, '$.phase', '$.repo', '$.worktree_path', '$.branch', "
    "'$.agent', '$.workflow.state.status', '$.workflow.state.next_stage', '$.files', '$.handoff_verification', "
    "'$.reopened_by', '$.checkpoint.id', '$.checkpoint.boundary', '$.run_log', '$.workflow') FROM sessions "
    "WHERE project = ?1")
_ACTIVE_LISTED = f"{_LISTED} AND status = 'active'"
_LISTED_ORDER = " ORDER BY last_activity DESC, task_id"

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
    # Projects: each key gains the project. A session moves to its repository's project
    # (what a worktree of it derives unless baton.toml names another) with its events; a
    # tombstone, whose session is gone, holds in every project.
    """
    DROP INDEX events_by_task;
    DROP INDEX events_pending;
    DROP INDEX sessions_by_status;
    ALTER TABLE events RENAME TO events_before_projects;
    ALTER TABLE sessions RENAME TO sessions_before_projects;
    ALTER TABLE pruned RENAME TO pruned_before_projects;
    CREATE TABLE events (
        project TEXT NOT NULL,
        event_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        at TEXT NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        applied INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (project, event_id)
    );
    CREATE INDEX events_by_task ON events (project, task_id, at);
    CREATE INDEX events_pending ON events (applied) WHERE applied = 0;
    CREATE TABLE sessions (
        project TEXT NOT NULL,
        task_id TEXT NOT NULL,
        status TEXT NOT NULL,
        last_activity TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (project, task_id)
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_status ON sessions (project, status, last_activity);
    CREATE TABLE pruned (
        project TEXT NOT NULL,
        task_id TEXT NOT NULL,
        through TEXT NOT NULL,
        PRIMARY KEY (project, task_id)
    ) WITHOUT ROWID;
    INSERT INTO sessions (project, task_id, status, last_activity, body)
        SELECT coalesce(json_extract(body, '$.repo'), ''), task_id, status, last_activity, body
        FROM sessions_before_projects;
    INSERT INTO events (project, event_id, task_id, at, type, body, applied)
        SELECT coalesce((SELECT s.project FROM sessions s WHERE s.task_id = e.task_id),
                        json_extract(e.body, '$.repo'), ''), e.event_id, e.task_id, e.at, e.type, e.body, e.applied
        FROM events_before_projects e ORDER BY e.rowid;
    INSERT INTO pruned (project, task_id, through)
        SELECT projects.project, p.task_id, p.through FROM pruned_before_projects p,
            (SELECT '' AS project UNION SELECT project FROM sessions) AS projects;
    DROP TABLE events_before_projects;
    DROP TABLE sessions_before_projects;
    DROP TABLE pruned_before_projects;
    """,
]
# An event of a pruned ticket as old as its tombstone is not stored again.
_INSERT_EVENT = ("INSERT OR IGNORE INTO events (project, event_id, task_id, at, type, body, applied) "
                 "SELECT ?7, ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS ("
                 "SELECT 1 FROM pruned WHERE pruned.project = ?7 AND pruned.task_id = ?2 AND pruned.through >= ?3)")


class SqliteSessionStore(SessionStore):
    def __init__(self, path: Path, *, timeout: float, project: str) -> None:
        self.path = path
        self.project = check_project(project)
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)

    def _load(self, conn: sqlite3.Connection, task_id: str) -> Session | None:
        from pydantic import ValidationError

        from baton.registry.model import Session

        row = conn.execute("SELECT body FROM sessions WHERE project = ? AND task_id = ?",
                           (self.project, task_id)).fetchone()
        if row is None:
            return None
        try:
            return Session.model_validate_json(row[0])
        except ValidationError as exc:
            raise sqlite3.DatabaseError(f"stored session {task_id} is unreadable: {exc.errors()[0]['msg']}") from exc

    def _save(self, conn: sqlite3.Connection, session: Session) -> None:
        conn.execute(
            "INSERT INTO sessions (project, task_id, status, last_activity, body) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project, task_id) DO UPDATE SET status = excluded.status, "
            "last_activity = excluded.last_activity, body = excluded.body",
            (self.project, session.task_id, session.status.value, clock.to_text(session.last_activity),
             session.model_dump_json()))

    def _apply_pending(self, conn: sqlite3.Connection) -> None:
        """Project every pending event; runs inside the caller's write transaction."""
        from pydantic import ValidationError

        from baton.registry.apply import apply_event

        rows = conn.execute("SELECT event_id, body FROM events WHERE project = ? AND applied = 0 ORDER BY at",
                            (self.project,)).fetchall()
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
        conn.executemany("UPDATE events SET applied = 1 WHERE project = ? AND event_id = ?",
                         [(self.project, e) for e, _ in rows])

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        if conn.execute("SELECT 1 FROM events WHERE project = ? AND applied = 0 LIMIT 1",
                        (self.project,)).fetchone() is None:
            return
        with write_transaction(conn):
            self._apply_pending(conn)

    def append_body(self, event_id: str, task_id: str, at: datetime, event_type: str, body: str) -> None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                conn.execute(_INSERT_EVENT,
                             (event_id, task_id, clock.to_text(at), event_type, body, 0, self.project))

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
                        adapter.dump_json(event).decode(), 1, self.project)).rowcount
                    if event.task_id not in sessions:
                        sessions[event.task_id] = self._load(conn, event.task_id)
                    if inserted and event.type == "secrets_redacted":
                        sessions[event.task_id] = self._redact(conn, event)
                    elif inserted:
                        sessions[event.task_id] = apply_event(sessions[event.task_id], event)
                for session in sessions.values():
                    if session is not None:
                        self._save(conn, session)
        return {task_id: s for task_id, s in sessions.items() if s is not None}

    def _redact(self, conn: sqlite3.Connection, event: SecretsRedacted) -> Session | None:
        """Rewrite the fields the event names in the stored events, then fold the ticket's
        log again; runs inside the caller's write transaction."""
        from baton.registry.apply import fold

        conn.executemany("UPDATE events SET body = json_set(body, ?, ?) WHERE project = ? AND event_id = ? "
                         "AND task_id = ?",
                         [(f"$.{r.field}", r.text, self.project, str(r.event_id), event.task_id)
                          for r in event.rewrites])
        adapter = event_adapter()
        rows = conn.execute("SELECT body FROM events WHERE project = ? AND task_id = ? ORDER BY at, event_id",
                            (self.project, event.task_id))
        return fold(adapter.validate_json(body) for (body,) in rows)

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
                    "SELECT 'session', NULL, body FROM sessions WHERE project = ?1 AND task_id = ?2 "
                    "UNION ALL SELECT type, at, body FROM events WHERE project = ?1 AND task_id = ?2 AND applied = 0",
                    (self.project, task_id)).fetchall()
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

        query = ("SELECT body FROM sessions WHERE project = ? ORDER BY last_activity DESC, task_id" if include_inactive
                 else "SELECT body FROM sessions WHERE project = ? AND status = 'active' "
                      "ORDER BY last_activity DESC, task_id")
        try:
            with guarded(STORE, self.path):
                conn = self._db.conn()
                self._catch_up(conn)
                rows = conn.execute(query, (self.project,)).fetchall()
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
                if conn.execute(_OUTLINE_NEEDS_PROJECTION, (self.project, *_OUTLINE_READ_RAW)).fetchone() is not None:
                    self._catch_up(conn)
                rows = conn.execute(query, (self.project,)).fetchall()
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

    def listed_sessions(self, *, include_inactive: bool = False) -> Found[list[ListedSession]] | Unavailable:
        """From the stored projections' JSON (read by SQLite): no pydantic, no validation."""
        query = (_LISTED if include_inactive else _ACTIVE_LISTED) + _LISTED_ORDER
        try:
            with guarded(STORE, self.path):
                conn = self._db.conn()
                self._catch_up(conn)
                rows = conn.execute(query, (self.project,)).fetchall()
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        try:
            return Found([_listed(*row) for row in rows])
        except (ValueError, TypeError, KeyError) as exc:  # json.JSONDecodeError is a ValueError
            return Unavailable(f"{self.path}: a stored session is unreadable: {type(exc).__name__}: {exc}")

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        from pydantic import ValidationError

        adapter = event_adapter()
        try:
            with guarded(STORE, self.path):
                rows = self._db.conn().execute(
                    "SELECT body FROM events WHERE project = ? AND task_id = ? ORDER BY at, event_id",
                    (self.project, task_id)).fetchall()
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
                    "SELECT s.task_id, (SELECT max(at) FROM events e WHERE e.project = s.project "
                    "AND e.task_id = s.task_id) FROM sessions s "
                    "WHERE s.project = ?1 AND s.status IN ('completed', 'stalled') AND s.last_activity < ?2 "
                    "AND s.task_id NOT IN (SELECT d.value FROM sessions a, json_each(a.body, '$.depends_on') d "
                    "WHERE a.project = ?1 AND a.status = 'active' "
                    "UNION SELECT json_extract(r.value, '$.parent_task_id') FROM sessions a, "
                    "json_each(a.body, '$.run_log') r WHERE a.project = ?1 AND a.status = 'active' "
                    "AND json_extract(r.value, '$.kind') = 'fork' "
                    "AND json_extract(r.value, '$.parent_task_id') IS NOT NULL) "
                    "ORDER BY s.task_id", (self.project, clock.to_text(ended_before))).fetchall()
                if not dry_run:
                    for task_id, through in rows:
                        conn.execute("DELETE FROM events WHERE project = ? AND task_id = ?", (self.project, task_id))
                        conn.execute("DELETE FROM sessions WHERE project = ? AND task_id = ?", (self.project, task_id))
                        conn.execute("INSERT INTO pruned (project, task_id, through) VALUES (?, ?, ?) "
                                     "ON CONFLICT (project, task_id) "
                                     "DO UPDATE SET through = max(through, excluded.through)",
                                     (self.project, task_id, through or clock.to_text(ended_before)))
        return [task_id for task_id, _ in rows]

    def forget_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        import json

        if not checkpoint_ids:
            return 0
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with write_transaction(conn):
                return conn.execute(
                    "DELETE FROM events WHERE project = ? AND type = 'checkpoint_taken' "
                    "AND json_extract(body, '$.checkpoint_id') IN (SELECT value FROM json_each(?))",
                    (self.project, json.dumps(list(checkpoint_ids)))).rowcount

    def pruned(self) -> Found[set[str]] | Unavailable:
        try:
            with guarded(STORE, self.path):
                return Found({task_id for (task_id,) in self._db.conn().execute(
                    "SELECT task_id FROM pruned WHERE project = ?", (self.project,))})
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def projects(self) -> Found[list[str]] | Unavailable:
        try:
            with guarded(STORE, self.path):
                return Found([project for (project,) in self._db.conn().execute(
                    "SELECT DISTINCT project FROM sessions ORDER BY project")])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def describe(self) -> dict[str, str]:
        with guarded(STORE, self.path):
            return self._db.describe("sessions")

    def close(self) -> None:
        self._db.close()


def _listed(task_id: str, status: str, last_activity: str, fields: str) -> ListedSession:
    """One row of _LISTED as Session's own properties would give it."""
    (phase, repo, worktree_path, branch, agent, stage, next_stage, files, verification, reopened_by, checkpoint,
     boundary, run_log, workflow) = json.loads(fields)
    by_recency = sorted((-datetime.fromisoformat(touch["last_at"]).timestamp(), touch["path"])
                        for touch in (files or {}).values())
    return ListedSession(
        SessionOutline(task_id, status, phase or "planning", repo, worktree_path, branch, agent,
                       clock.parse(last_activity), _text(stage), _text(next_stage)),
        tuple(path for _, path in by_recency), verification and _verification_public(verification),
        1 + len(reopened_by or ()),
        next((run["parent_task_id"] for run in run_log or () if run["kind"] == "fork"), None),
        (checkpoint, boundary) if checkpoint is not None else None, workflow is not None)


def _verification_public(stored: dict) -> dict:
    """VerificationRecord.public() of a stored record, without the model."""
    written = stored.get("written_at")
    return {"path": stored["path"], "written_at": clock.parse(written).isoformat() if written else None,
            "verified_at": clock.parse(stored["verified_at"]).isoformat(),
            "held": handoff_held(changed=stored["changed"], failed=stored["failed"], not_run=stored["not_run"]),
            "verified": stored["verified"], "changed": stored["changed"], "failed": stored["failed"],
            "not_run": stored["not_run"], "stale": stored["stale"]}


def _text(value: object) -> str | None:
    """A workflow state's field as text; None when absent or of another kind."""
    return value if isinstance(value, str) else None
