"""The embedded session store: SQLite in WAL mode, one file in the data home.

Events are appended to `events`; `applied = 0` marks one whose projection is not yet
written. Full writes apply their events in the same transaction. The hook's touch only
appends (no pydantic import, a few hundred microseconds), and the next read or write
applies every pending event first, in the same transaction as it marks them applied.

Every row belongs to a project (baton.projects), part of each key: a store is opened for one
project and every statement names it, so the same ticket id in two projects is two sessions.

A write never waits long for the write lock: when another process holds it past QUEUE_AFTER,
the write's events go to the write queue beside the file (baton.write_queue), which needs no
lock, and the command goes on as if they were stored. Every transaction that takes the lock
first moves what waits there into `events` (unprojected, each id once), so the next process
that writes or catches up applies them, in their order; the background delivery does it
when no other process does. A read that cannot take the lock to catch up folds the
unprojected and queued events into the stored sessions in memory, so it sees them too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from baton import clock
from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.outcome import Found, NotFound, Unavailable, answering
from baton.projects import check_project
from baton.registry.base import (
    LISTED_PATHS,
    OUTLINE_PATHS,
    HolderNote,
    ListedLease,
    ListedSession,
    SessionOutline,
    SessionStore,
    SignalScope,
    in_list_order,
    lease_anchor,
    listed_of,
    listed_row,
    meeting_anchors,
    meeting_leases,
    near_leases,
    outline_of,
    outline_row,
    outline_status,
    path_anchors,
    unreleased_leases,
)
from baton.registry.wire import event_of
from baton.sqlite import SqliteFile, begin_within, guarded, write_transaction
from baton.store_names import Store
from baton.write_queue import WriteQueue

if TYPE_CHECKING:
    from baton.registry.model import Event, SecretsRedacted, Session

STORE = Store.SESSION_REGISTRY
_T = TypeVar("_T")
# Seconds a write or a read's catch-up waits for another process's write lock before the
# write is queued (or the read folds what waits in memory): a hook's budget, not a command's.
QUEUE_AFTER = 0.25
# Seconds a conditional write (append_unless: a lease's grant) waits at least for the write
# lock: its answer needs the lock, so it cannot be queued like a plain write.
DECISION_WAIT = 10.0
# Unprojected events (append_body) that signal_scope, session_outlines and leases_near read
# raw: they add files and move last_activity at most (a checkpoint's record, which the Stop
# hook appends, adds nothing to the scope).
_READ_RAW = ("files_touched", "decision_recorded", "checkpoint_taken")
_SCOPE_RAW = (*_READ_RAW, "bound", "run_started")  # signal_scope's: a bind changes no file nor dependency
_OUTLINE_NEEDS_PROJECTION = (
    "SELECT 1 FROM events e WHERE e.project = ? AND e.applied = 0 AND (e.type NOT IN (?, ?, ?) "
    "OR NOT EXISTS (SELECT 1 FROM sessions s WHERE s.project = e.project AND s.task_id = e.task_id)) LIMIT 1")
# The outline's fields from the stored projection (one parse of it: json_extract of many
# paths answers a JSON array), with the latest unprojected event's time; a stalled session
# with unprojected events may be active again (Session.status).
_OUTLINES = (
    "WITH pending AS (SELECT task_id, max(at) AS at FROM events WHERE project = ?1 AND applied = 0 "  # noqa: S608
    "GROUP BY task_id) "
    "SELECT s.task_id, s.status, s.last_activity, p.at, json_extract(s.body, '$.lifecycle', '$.lifecycle_stamp.at', "
    + ", ".join(f"'$.{'.'.join(path)}'" for path in OUTLINE_PATHS) + ") "
    "FROM sessions s LEFT JOIN pending p ON p.task_id = s.task_id WHERE s.project = ?1")
_ACTIVE_OUTLINES = f"{_OUTLINES} AND (s.status = 'active' OR p.at IS NOT NULL)"

# What `baton list` shows of each session, from its stored projection (read after every
# pending event is projected, so the status column is the session's status).
_LISTED_FIELDS = ("SELECT s.task_id, s.status, s.last_activity, json_extract(s.body, "
                  + ", ".join(f"'$.{'.'.join(path)}'" for path in LISTED_PATHS) + ")")
_LISTED = f"{_LISTED_FIELDS} FROM sessions AS s WHERE s.project = ?1"
# A page of them (?2, a JSON list of tickets): each a primary-key read (CROSS JOIN keeps
# SQLite from scanning every active session instead).
_LISTED_OF = (f"{_LISTED_FIELDS} FROM json_each(?2) AS asked CROSS JOIN sessions AS s "
              "ON s.project = ?1 AND s.task_id = asked.value WHERE TRUE")
_ACTIVE = " AND s.status = 'active'"  # appended to a query of sessions AS s
_ORDER = " ORDER BY s.last_activity DESC, s.task_id"
# The tickets in list_sessions' order, from the status index alone (no session read).
_TICKETS = "SELECT s.task_id, s.status FROM sessions AS s WHERE s.project = ?1"
_PAGE = " LIMIT ?2 OFFSET ?3"  # a LIMIT of -1: every row
_COUNT = "SELECT count(*) FROM sessions AS s WHERE s.project = ?1"
_BODIES = "SELECT s.body FROM sessions AS s WHERE s.project = ?1"

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
    # Each lease's anchor (baton.registry.base.lease_anchor), so that the check before an
    # edit reads only the sessions whose leases may cover the file. A lease granted before
    # has the empty anchor (it is read for every file) until its ticket is stored again.
    """
    CREATE TABLE lease_anchors (
        project TEXT NOT NULL,
        lease_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        repo TEXT NOT NULL,
        anchor TEXT NOT NULL,
        PRIMARY KEY (project, lease_id)
    ) WITHOUT ROWID;
    CREATE INDEX lease_anchors_by_anchor ON lease_anchors (project, repo, anchor, task_id);
    INSERT OR IGNORE INTO lease_anchors (project, lease_id, task_id, repo, anchor)
        SELECT s.project, json_extract(l.value, '$.text'), s.task_id, json_extract(l.value, '$.repo'), ''
        FROM sessions s, json_each(s.body, '$.leases') l;
    """,
]
# The leases of the sessions that may cover a file (the anchors' index leads: CROSS JOIN
# keeps SQLite from scanning the active sessions instead, which reads every body), with what
# _OUTLINES reads to fold in their unprojected events' times: their last activity moves
# their leases' end, and may lift a stall.
_LEASES_NEAR = (
    "WITH pending AS (SELECT task_id, max(at) AS at FROM events WHERE project = ?1 AND applied = 0 "
    "GROUP BY task_id) "
    "SELECT s.task_id, s.status, s.last_activity, p.at, json_extract(s.body, '$.lifecycle', "
    "'$.lifecycle_stamp.at', '$.leases', '$.lease_releases') "
    "FROM (SELECT DISTINCT task_id FROM lease_anchors WHERE project = ?1 AND repo = ?2 "
    "AND anchor IN (SELECT value FROM json_each(?3))) AS near CROSS JOIN sessions AS s "
    "ON s.project = ?1 AND s.task_id = near.task_id LEFT JOIN pending p ON p.task_id = s.task_id "
    "WHERE s.status = 'active' OR p.at IS NOT NULL")
# The leases a claim's decision reads (meeting_anchors), every pending event projected
# first: the active sessions holding one anchored at ?3's anchors (every one when ?5), or in
# one of ?4's ranges of anchors (a JSON list of [first, past the last]), each an index seek.
_LEASES_MEETING = (
    "SELECT s.task_id, s.last_activity, json_extract(s.body, '$.leases', '$.lease_releases') "
    "FROM (SELECT task_id FROM lease_anchors WHERE project = ?1 AND repo = ?2 "
    "AND (?5 OR anchor IN (SELECT value FROM json_each(?3))) "
    "UNION SELECT a.task_id FROM json_each(?4) AS r CROSS JOIN lease_anchors AS a "
    "ON a.project = ?1 AND a.repo = ?2 AND a.anchor >= json_extract(r.value, '$[0]') "
    "AND a.anchor < json_extract(r.value, '$[1]')) AS near "
    "CROSS JOIN sessions AS s ON s.project = ?1 AND s.task_id = near.task_id "
    "WHERE s.status = 'active' ORDER BY s.task_id")
# An event of a pruned ticket as old as its tombstone is not stored again.
_INSERT_EVENT = ("INSERT OR IGNORE INTO events (project, event_id, task_id, at, type, body, applied) "
                 "SELECT ?7, ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS ("
                 "SELECT 1 FROM pruned WHERE pruned.project = ?7 AND pruned.task_id = ?2 AND pruned.through >= ?3)")


class SqliteSessionStore(SessionStore):
    def __init__(self, path: Path, *, timeout: float, project: str) -> None:
        self.path = path
        self.project = check_project(project)
        self.timeout = timeout
        self._db = SqliteFile(path, MIGRATIONS, timeout=timeout)
        self._queue = WriteQueue(path.with_name(f"{path.stem}-queue"))
        self.kept = 0  # writes this process queued: its stores start a delivery when closed

    def _load(self, conn: sqlite3.Connection, task_id: str) -> Session | None:
        row = conn.execute("SELECT body FROM sessions WHERE project = ? AND task_id = ?",
                           (self.project, task_id)).fetchone()
        if row is None:  # a new ticket's first bind imports no model
            return None
        from baton.registry.model import Session

        return _valid(f"stored session {task_id}", Session.model_validate_json, row[0])

    def _save(self, conn: sqlite3.Connection, session: Session) -> None:
        conn.execute(
            "INSERT INTO sessions (project, task_id, status, last_activity, body) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project, task_id) DO UPDATE SET status = excluded.status, "
            "last_activity = excluded.last_activity, body = excluded.body",
            (self.project, session.task_id, session.status.value, clock.to_text(session.last_activity),
             session.model_dump_json()))
        if session.leases:
            conn.executemany(
                "INSERT INTO lease_anchors (project, lease_id, task_id, repo, anchor) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (project, lease_id) DO UPDATE SET anchor = excluded.anchor "
                "WHERE anchor <> excluded.anchor",
                [(self.project, lease.text, session.task_id, lease.repo, lease_anchor(lease.pattern))
                 for lease in session.leases])

    def _apply_pending(self, conn: sqlite3.Connection) -> None:
        """Project every pending event; runs inside the caller's write transaction. A
        redaction that waited unprojected (it was queued) rewrites the events it names then,
        as append does."""
        rows = conn.execute("SELECT event_id, type, body FROM events WHERE project = ? AND applied = 0 ORDER BY at",
                            (self.project,)).fetchall()
        if not rows:
            return
        self._project(conn, ((_valid(f"pending event {event_id}", event_of, event_type, body), True)
                             for event_id, event_type, body in rows))
        conn.executemany("UPDATE events SET applied = 1 WHERE project = ? AND event_id = ?",
                         [(self.project, e) for e, _, _ in rows])

    @contextmanager
    def _writing(self, conn: sqlite3.Connection, *, within: float | None = None) -> Iterator[bool]:
        """Hold the write lock, the queued writes moved into the events first (unprojected);
        yields False, holding nothing, when another process held the lock through `within`
        seconds. Without `within`, waits the store's timeout and raises if it is not enough."""
        if within is not None and not begin_within(conn, within, restore=self.timeout):
            yield False
            return
        with write_transaction(conn, begun=within is not None):
            taken = self._take_queued(conn)
            yield True
        self._queue.remove(taken)

    def _take_queued(self, conn: sqlite3.Connection) -> list[str]:
        """Move every queued write into the events, unprojected, in the order they were made;
        the names of the records taken (removed once committed). An event id already stored
        (a record taken before a crash kept it from being removed) is not stored again."""
        if not self._queue.names():
            return []
        records = self._queue.read()
        conn.executemany(_INSERT_EVENT, [(e["event_id"], e["task_id"], e["at"], e["type"], e["body"], 0, e["project"])
                                         for _, entries in records for e in entries])
        return [name for name, _ in records]

    def _queued(self, task_ids: Collection[str] | None = None) -> list[tuple[str, str, str, str, str]]:
        """This project's queued events (of task_ids, None: all) as (at, event_id, type,
        body, task_id), in order."""
        if not self._queue.names():
            return []
        return [(e["at"], e["event_id"], e["type"], e["body"], e["task_id"]) for _, entries in self._queue.read()
                for e in entries if e["project"] == self.project and (task_ids is None or e["task_id"] in task_ids)]

    def _keep_queued(self, rows: list[dict]) -> None:
        """Queue one write (its events applied together later); raises OSError, keeping nothing."""
        self._queue.append(rows)
        self.kept += 1

    def _catch_up(self, conn: sqlite3.Connection) -> bool:
        """Project the pending and queued events; False, projecting nothing, when another
        process held the write lock through QUEUE_AFTER (the caller reads them in memory)."""
        if not self._queue.names() and conn.execute("SELECT 1 FROM events WHERE project = ? AND applied = 0 LIMIT 1",
                                                    (self.project,)).fetchone() is None:
            return True
        with self._writing(conn, within=QUEUE_AFTER) as locked:
            if locked:
                self._apply_pending(conn)
        return locked

    def _in_memory(self, conn: sqlite3.Connection, task_ids: Collection[str] | None) -> dict[str, Session]:
        """The sessions of task_ids (None: every ticket with such events) with their
        unprojected and queued events folded in, as the next catch-up will store them; read
        without the write lock. An event both stored and still queued is folded twice, which
        changes nothing (the projection is replay-safe)."""
        from baton.registry.apply import fold_onto

        rows = [row for row in conn.execute("SELECT at, event_id, type, body, task_id FROM events "
                                            "WHERE project = ? AND applied = 0", (self.project,))
                if task_ids is None or row[4] in task_ids]
        return fold_onto(lambda task_id: self._load(conn, task_id), (
            _valid(f"pending event {event_id}", event_of, event_type, body)
            for _, event_id, event_type, body, _ in sorted(rows + self._queued(task_ids), key=lambda row: row[0])))

    def _all_in_memory(self, conn: sqlite3.Connection, *, include_inactive: bool) -> list[Session]:
        """list_sessions' answer without the write lock (see _in_memory)."""
        from baton.registry.model import Session

        sessions = {task_id: _valid("a stored session", Session.model_validate_json, body) for task_id, body
                    in conn.execute("SELECT task_id, body FROM sessions WHERE project = ?", (self.project,))}
        sessions.update(self._in_memory(conn, None))
        return in_list_order(sessions.values(), include_inactive)

    def queued(self) -> int:
        return len(self._queue.names())

    def apply_queued(self, *, patient: bool) -> bool:
        if not self._queue.names():
            return True
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with self._writing(conn, within=None if patient else QUEUE_AFTER) as locked:
                if locked:
                    self._apply_pending(conn)
        return locked

    def append_body(self, event_id: str, task_id: str, at: datetime, event_type: str, body: str) -> None:
        row = {"project": self.project, "event_id": event_id, "task_id": task_id, "at": clock.to_text(at),
               "type": event_type, "body": body}
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with self._writing(conn, within=QUEUE_AFTER) as locked:
                if locked:
                    conn.execute(_INSERT_EVENT, (event_id, task_id, row["at"], event_type, body, 0, self.project))
            if not locked:
                self._keep_queued([row])

    def append(self, events: Sequence[Event], *, whole: bool = True) -> dict[str, Session]:
        from baton.registry.model import batch_terms

        with guarded(STORE, self.path):
            conn = self._db.conn()
            sessions: dict[str, Session | None] = {}
            with self._writing(conn, within=QUEUE_AFTER) as locked:
                if not locked:
                    self._keep_queued([{"project": self.project, "event_id": str(e.event_id), "task_id": e.task_id,
                                        "at": clock.to_text(e.at), "type": e.type,
                                        "body": e.model_dump_json()} for e in events])
                    sessions = dict(self._in_memory(conn, {e.task_id for e in events}))
                else:
                    self._apply_pending(conn)
                    sessions = self._append_in(conn, events)
        recorded, redacted = batch_terms(events) if not whole else (set(), set())
        return {task_id: s if whole or task_id in redacted else s.batch_view(recorded)
                for task_id, s in sessions.items() if s is not None}

    def _append_in(self, conn: sqlite3.Connection, events: Sequence[Event]) -> dict[str, Session | None]:
        """Store and project the events inside the caller's write transaction (see append)."""
        return self._project(conn, ((event, conn.execute(_INSERT_EVENT, (
            str(event.event_id), event.task_id, clock.to_text(event.at), event.type, event.model_dump_json(),
            1, self.project)).rowcount == 1) for event in events))

    def _project(self, conn: sqlite3.Connection, events: Iterable[tuple[Event, bool]]) -> dict[str, Session | None]:
        """Apply each event marked new to its ticket's stored projection (a redaction rewrites
        the events it names and folds the log again) and store the projections, inside the
        caller's write transaction; the session of every ticket of the events."""
        from baton.registry.apply import apply_event

        sessions: dict[str, Session | None] = {}
        for event, new in events:
            if event.task_id not in sessions:
                sessions[event.task_id] = self._load(conn, event.task_id)
            if new and event.type == "secrets_redacted":
                sessions[event.task_id] = self._redact(conn, event)
            elif new:
                sessions[event.task_id] = apply_event(sessions[event.task_id], event)
        for session in sessions.values():
            if session is not None:
                self._save(conn, session)
        return sessions

    def append_unless(self, events: Sequence[Event], repo: str, patterns: Sequence[str],
                      refusal: Callable[[list[tuple[str, ListedLease]]], str | None]) -> str | None:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with self._writing(conn, within=max(self.timeout, DECISION_WAIT)) as locked:
                if not locked:
                    raise StoreUnavailable(STORE, f"{self.path}: another process held the write lock "
                                                  f"through {max(self.timeout, DECISION_WAIT):g} s")
                self._apply_pending(conn)
                refused = refusal(self._leases_meeting(conn, repo, patterns))
                if refused is None:
                    self._append_in(conn, events)
        return refused

    def _leases_meeting(self, conn: sqlite3.Connection, repo: str, patterns: Sequence[str]
                        ) -> list[tuple[str, ListedLease]]:
        """append_unless' leases, through the lease anchors' index, from the stored JSON of
        the sessions holding one (every event projected): no session is validated."""
        reach = meeting_anchors(patterns)
        above, under = reach or ([], [])
        ranges = [[prefix, prefix[:-1] + "0"] for prefix in under]  # "0" follows "/": what starts with prefix
        held = []
        for task_id, last_activity, fields in conn.execute(_LEASES_MEETING, (
                self.project, repo, json.dumps(above), json.dumps(ranges), reach is None)):
            try:
                leases, releases = json.loads(fields)
                held.append((task_id, unreleased_leases(leases, releases, clock.parse(last_activity))))
            except (ValueError, TypeError, KeyError) as exc:  # json.JSONDecodeError is a ValueError
                raise sqlite3.DatabaseError(f"stored session {task_id} is unreadable: {type(exc).__name__}: "
                                            f"{exc}") from exc
        return meeting_leases(held, repo, patterns)

    def _redact(self, conn: sqlite3.Connection, event: SecretsRedacted) -> Session | None:
        """Rewrite the fields the event names in the stored events, then fold the ticket's
        log again; runs inside the caller's write transaction."""
        from baton.registry.apply import fold

        conn.executemany("UPDATE events SET body = json_set(body, ?, ?) WHERE project = ? AND event_id = ? "
                         "AND task_id = ?",
                         [(f"$.{r.field}", r.text, self.project, str(r.event_id), event.task_id)
                          for r in event.rewrites])
        rows = conn.execute("SELECT type, body FROM events WHERE project = ? AND task_id = ? ORDER BY at, event_id",
                            (self.project, event.task_id))
        return fold(event_of(event_type, body) for event_type, body in rows)

    @answering
    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            if self._catch_up(conn):
                session = self._load(conn, task_id)
            else:
                session = self._in_memory(conn, [task_id]).get(task_id) or self._load(conn, task_id)
        return NotFound(task_id) if session is None else Found(session)

    @answering
    def signal_scope(self, task_id: str) -> Found[SignalScope] | NotFound | Unavailable:
        """From the stored projection's JSON and the pending events' (one statement, one
        snapshot) and the queued ones', so the prompt hook pays neither pydantic nor a projection."""
        with guarded(STORE, self.path):
            rows = self._db.conn().execute(
                "SELECT 'session', NULL, body FROM sessions WHERE project = ?1 AND task_id = ?2 "
                "UNION ALL SELECT type, at, body FROM events WHERE project = ?1 AND task_id = ?2 AND applied = 0",
                (self.project, task_id)).fetchall()
            rows += [(kind, at, body) for at, _, kind, body, _ in self._queued([task_id])]
        stored = [body for kind, _, body in rows if kind == "session"]
        pending = [(kind, at, body) for kind, at, body in rows if kind != "session"]
        if not rows:
            return NotFound(task_id)
        if any(kind not in _SCOPE_RAW for kind, _, _ in pending):  # a pending event that may change the scope
            return super().signal_scope(task_id)  # the full read projects it
        try:
            # A bind's events (kept unprojected) start the scope: its time and, a fork's run, its parent.
            session = json.loads(stored[0]) if stored else {"files": {}, "depends_on": [], "run_log": []}
            files = {(t["repo"], t["path"]) for t in session["files"].values()}
            files.update((f["repo"], f["path"]) for kind, _, body in pending if kind == "files_touched"
                         for f in json.loads(body)["files"])
            created_at = min([*(clock.parse(session["created_at"]) for _ in stored),
                              *(clock.parse(at) for _, at, _ in pending)])
            started = [json.loads(body) for kind, _, body in pending if kind == "run_started"]
            runs = session.get("run_log", []) + [{"kind": run["run_kind"], **run} for run in started]
            fork_of = next((r["parent_task_id"] for r in runs if r["kind"] == "fork"), None)
            return Found(SignalScope(created_at, tuple(session["depends_on"]),
                                     tuple(FileRef(repo, path) for repo, path in sorted(files)), fork_of))
        except (ValueError, KeyError, TypeError) as exc:
            return Unavailable(f"{self.path}: stored session {task_id} is unreadable: {type(exc).__name__}: {exc}")

    @answering
    def holder_notes(self, task_ids: Sequence[str]) -> Found[dict[str, HolderNote]] | Unavailable:
        """From the stored projections' JSON: the hook before an edit pays no pydantic. An
        event not projected yet shows at the next check after it is."""
        rows = self._db.read(STORE, "SELECT task_id, json_extract(body, '$.agent', '$.branch', '$.next_action') "
                                    "FROM sessions WHERE project = ? AND task_id IN "
                                    "(SELECT value FROM json_each(?))", (self.project, json.dumps(list(task_ids))))
        try:
            return Found({task_id: HolderNote(*json.loads(fields)) for task_id, fields in rows})
        except (ValueError, TypeError) as exc:
            return Unavailable(f"{self.path}: a stored session is unreadable: {exc}")

    def watermark(self) -> str | None:
        # The events' rowids only grow while events are stored; applying them changes no
        # rowid. A queued write changes the newest record's name.
        with guarded(STORE, self.path):
            mark = self._db.conn().execute(
                "SELECT coalesce(max(rowid), 0), (SELECT count(*) FROM pruned) FROM events").fetchone()
            queued = self._queue.names()
        return f"{mark[0]}:{mark[1]}:{len(queued)}:{queued[-1] if queued else ''}"

    @answering
    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        from baton.registry.model import Session

        query = _BODIES + ("" if include_inactive else _ACTIVE) + _ORDER
        with guarded(STORE, self.path):
            conn = self._db.conn()
            if not self._catch_up(conn):
                return Found(self._all_in_memory(conn, include_inactive=include_inactive))
            rows = conn.execute(query, (self.project,)).fetchall()
            return Found([_valid("a stored session", Session.model_validate_json, body) for (body,) in rows])

    def _readable_raw(self, conn: sqlite3.Connection) -> bool:
        """Whether the stored projections' JSON can be read as it is, the unprojected events'
        times folded in: nothing is queued and no unprojected event changes more than the
        last activity, or those were projected now; False: read the sessions in memory."""
        if not self._queue.names() and conn.execute(_OUTLINE_NEEDS_PROJECTION,
                                                    (self.project, *_READ_RAW)).fetchone() is None:
            return True
        return self._catch_up(conn)

    @answering
    def _stored_rows(self, ready: Callable[[sqlite3.Connection], bool], query: str, params: tuple[object, ...],
                     rows_read: Callable[[list[Any]], _T], sessions_read: Callable[[list[Session]], _T],
                     *, include_inactive: bool = False) -> Found[_T] | Unavailable:
        """What rows_read makes of query's rows of the stored projections' JSON, once ready
        says they read as they are; else what sessions_read makes of the sessions projected
        in memory."""
        with guarded(STORE, self.path):
            conn = self._db.conn()
            if not ready(conn):
                return Found(sessions_read(self._all_in_memory(conn, include_inactive=include_inactive)))
            rows = conn.execute(query, params).fetchall()
        try:
            return Found(rows_read(rows))
        except (ValueError, TypeError, KeyError) as exc:  # json.JSONDecodeError is a ValueError
            return Unavailable(f"{self.path}: a stored session is unreadable: {type(exc).__name__}: {exc}")

    def session_outlines(self, *, include_inactive: bool = False) -> Found[list[SessionOutline]] | Unavailable:
        """From the stored projections' JSON (read by SQLite) and the unprojected events'
        times, so a thousand sessions cost neither pydantic nor their validation; an
        unprojected event that may change more than the last activity (or a queued one) is
        projected first."""
        return self._stored_rows(self._readable_raw, _OUTLINES if include_inactive else _ACTIVE_OUTLINES,
                                 (self.project,), lambda rows: [
                                     outline_row(task_id, status, last, fields) for task_id, status, last, fields
                                     in _folded(rows, include_inactive=include_inactive)],
                                 lambda sessions: [outline_of(s) for s in sessions], include_inactive=include_inactive)

    def listed_sessions(self, *, include_inactive: bool = False, task_ids: Collection[str] | None = None
                        ) -> Found[list[ListedSession]] | Unavailable:
        """From the stored projections' JSON (read by SQLite): no pydantic, no validation."""
        query = (_LISTED if task_ids is None else _LISTED_OF) + ("" if include_inactive else _ACTIVE) + _ORDER
        arguments = (self.project,) if task_ids is None else (self.project, json.dumps(sorted(set(task_ids))))
        return self._stored_rows(self._catch_up, query, arguments,
                                 lambda rows: [listed_row(task_id, status, clock.parse(last), json.loads(fields))
                                               for task_id, status, last, fields in rows],
                                 lambda sessions: [listed_of(s) for s in sessions
                                                   if task_ids is None or s.task_id in task_ids],
                                 include_inactive=include_inactive)

    def lease_holders(self) -> Found[set[str]] | Unavailable:
        """From the lease anchors' index (a lease not projected yet is there once it is)."""
        return self._stored_rows(self._catch_up, "SELECT DISTINCT task_id FROM lease_anchors WHERE project = ?",
                                 (self.project,), lambda rows: {task_id for (task_id,) in rows},
                                 lambda sessions: {s.task_id for s in sessions if s.leases})

    def session_order(self, *, include_inactive: bool = False, offset: int = 0,
                      limit: int | None = None) -> Found[list[tuple[str, str]]] | Unavailable:
        """From the status index alone, every pending event projected first."""
        page = slice(offset, None if limit is None else offset + limit)
        return self._stored_rows(self._catch_up, _TICKETS + ("" if include_inactive else _ACTIVE) + _ORDER + _PAGE,
                                 (self.project, -1 if limit is None else limit, offset), lambda rows: rows,
                                 lambda sessions: [(s.task_id, s.status.value) for s in sessions][page],
                                 include_inactive=include_inactive)

    def session_count(self, *, include_inactive: bool = False) -> Found[int] | Unavailable:
        """From the status index alone, every pending event projected first."""
        return self._stored_rows(self._catch_up, _COUNT + ("" if include_inactive else _ACTIVE), (self.project,),
                                 lambda rows: rows[0][0], len, include_inactive=include_inactive)

    def leases_near(self, repo: str, paths: Sequence[str]) -> Found[list[tuple[str, ListedLease]]] | Unavailable:
        """Through the lease anchors' index: only the sessions holding a lease that may cover
        one of paths are read, from their stored JSON, with their unprojected touches' times
        (as session_outlines folds them), so the check after an edit's own touch pays
        neither pydantic nor a projection."""
        anchors = json.dumps(sorted({anchor for path in paths for anchor in path_anchors(path)}))
        return self._stored_rows(
            self._readable_raw, _LEASES_NEAR, (self.project, repo, anchors),
            lambda rows: near_leases([(task_id, unreleased_leases(leases, releases, last)) for task_id, _, last,
                                      (leases, releases) in _folded(rows, include_inactive=False)], repo, paths),
            lambda sessions: near_leases(((s.task_id, listed_of(s).leases) for s in sessions), repo, paths))

    @answering
    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        with guarded(STORE, self.path):
            rows = self._db.conn().execute(
                "SELECT at, event_id, type, body FROM events WHERE project = ? AND task_id = ?",
                (self.project, task_id)).fetchall()
            stored = {event_id for _, event_id, _, _ in rows}
            rows += [row[:4] for row in self._queued([task_id]) if row[1] not in stored]
            return Found([_valid("a stored event", event_of, event_type, body)
                          for _, _, event_type, body in sorted(rows)])

    def prune(self, ended_before: datetime, *, dry_run: bool = False) -> list[str]:
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with self._writing(conn):
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
                    for table in ("events", "sessions", "lease_anchors"):
                        conn.executemany(f"DELETE FROM {table} WHERE project = ? AND task_id = ?",  # noqa: S608
                                         [(self.project, task_id) for task_id, _ in rows])
                    conn.executemany("INSERT INTO pruned (project, task_id, through) VALUES (?, ?, ?) "
                                     "ON CONFLICT (project, task_id) "
                                     "DO UPDATE SET through = max(through, excluded.through)",
                                     [(self.project, task_id, through or clock.to_text(ended_before))
                                      for task_id, through in rows])
        return [task_id for task_id, _ in rows]

    def forget_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        if not checkpoint_ids:
            return 0
        with guarded(STORE, self.path):
            conn = self._db.conn()
            with self._writing(conn):
                return conn.execute(
                    "DELETE FROM events WHERE project = ? AND type = 'checkpoint_taken' "
                    "AND json_extract(body, '$.checkpoint_id') IN (SELECT value FROM json_each(?))",
                    (self.project, json.dumps(list(checkpoint_ids)))).rowcount

    @answering
    def held_events(self, event_ids: Sequence[str]) -> Found[set[str]] | Unavailable:
        return Found({event_id for (event_id,) in self._db.read(
            STORE, "SELECT event_id FROM events WHERE project = ? AND event_id IN (SELECT value FROM json_each(?))",
            (self.project, json.dumps(list(event_ids))))})

    @answering
    def pruned(self) -> Found[set[str]] | Unavailable:
        return Found({task_id for (task_id,) in self._db.read(
            STORE, "SELECT task_id FROM pruned WHERE project = ?", (self.project,))})

    @answering
    def projects(self) -> Found[list[str]] | Unavailable:
        return Found([project for (project,) in self._db.read(
            STORE, "SELECT project FROM sessions UNION SELECT project FROM events WHERE applied = 0 "
                   "ORDER BY project")])

    def describe(self) -> dict[str, str]:
        with guarded(STORE, self.path):  # a ticket whose bind waits unprojected is counted too
            self._catch_up(self._db.conn())
        return self._db.describe(STORE, "sessions")

    def close(self) -> None:
        self._db.close()


def _valid(what: str, read: Callable[..., _T], *stored: str) -> _T:
    """read(*stored), the model of what a row stores; a DatabaseError naming what when
    stored is not a valid one."""
    from pydantic import ValidationError

    try:
        return read(*stored)
    except ValidationError as exc:
        raise sqlite3.DatabaseError(f"{what} is unreadable: {exc.errors()[0]['msg']}") from exc


def _folded(rows: list[Any], *, include_inactive: bool) -> list[tuple[str, str, datetime, list[Any]]]:
    """The rows of _OUTLINES or _LEASES_NEAR as (ticket, status, last activity, the fields
    after the lifecycle's two), the unprojected events' latest time folded in (a stalled
    session with unprojected events may be active again: Session.status); the active ones
    only unless include_inactive, newest activity first."""
    folded = []
    for task_id, status, last_activity, pending_at, fields in rows:
        lifecycle, lifecycle_at, *rest = json.loads(fields)
        last = clock.parse(last_activity)
        if pending_at is not None:
            last = max(last, clock.parse(pending_at))
            status = outline_status(lifecycle or status, lifecycle_at and clock.parse(lifecycle_at), last)
        if include_inactive or status == "active":
            folded.append((task_id, status, last, rest))
    folded.sort(key=lambda row: row[0])
    folded.sort(key=lambda row: row[2], reverse=True)
    return folded
