"""The production session store: PostgreSQL through psycopg 3 and a connection pool.

Timeouts bound every wait: connecting (connect_timeout), borrowing from the pool, each
statement (statement_timeout) and each lock (lock_timeout), so a dead or stalled server
answers Unavailable within about the store timeout instead of hanging.

Writers of one ticket are serialised by a transaction-scoped advisory lock on its id;
inside it the event is inserted (a replay is a no-op through its primary key) and the
projection is merged by the same pure apply_event as every backend, then written back.
The lock makes the read-merge-write one atomic step, so two writers cannot race.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.outcome import Found, NotFound, Unavailable
from registry.base import SessionStore
from registry.wire import event_adapter, files_touched_body

if TYPE_CHECKING:
    import psycopg

    from registry.model import Event, Session

STORE = "session registry"

# Append-only: the list index is the version recorded in baton_schema_migrations.
MIGRATIONS = [
    """
    CREATE TABLE baton_events (
        event_id uuid PRIMARY KEY,
        task_id text NOT NULL,
        at timestamptz NOT NULL,
        type text NOT NULL,
        body jsonb NOT NULL,
        applied boolean NOT NULL DEFAULT true
    );
    CREATE INDEX baton_events_by_task ON baton_events (task_id, at);
    CREATE INDEX baton_events_pending ON baton_events (at) WHERE NOT applied;
    CREATE TABLE baton_sessions (
        task_id text PRIMARY KEY,
        status text NOT NULL,
        last_activity timestamptz NOT NULL,
        body jsonb NOT NULL
    );
    CREATE INDEX baton_sessions_active ON baton_sessions (last_activity DESC) WHERE status = 'active';
    CREATE INDEX baton_sessions_by_status ON baton_sessions (status, last_activity DESC);
    CREATE TABLE baton_session_files (
        task_id text NOT NULL,
        repo text NOT NULL,
        path text NOT NULL,
        last_at timestamptz NOT NULL,
        PRIMARY KEY (task_id, repo, path)
    );
    CREATE INDEX baton_session_files_by_file ON baton_session_files (repo, path);
    """,
]

_MIGRATION_LOCK = 0x62617431  # advisory lock key: one process at a time migrates the schema


class PostgresSessionStore(SessionStore):
    def __init__(self, url: str, *, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self._pool = None
        self._migrated = False

    def _get_pool(self):
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            # The pool logs each failed connection attempt; the caller already gets the
            # failure as Unavailable(reason), so keep it off stderr unless logging is set up.
            logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
            millis = int(self.timeout * 1000)
            pool = ConnectionPool(
                self.url, min_size=0, max_size=4, open=False, timeout=self.timeout, name="baton-registry",
                check=ConnectionPool.check_connection, reconnect_timeout=self.timeout,
                kwargs={"connect_timeout": max(2, math.ceil(self.timeout)), "application_name": "baton",
                        "options": f"-c statement_timeout={millis} -c lock_timeout={millis}"})
            pool.open(wait=False)
            self._pool = pool
        return self._pool

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        import psycopg

        try:
            with self._get_pool().connection(timeout=self.timeout) as conn:
                if not self._migrated:
                    self._migrate(conn)
                with conn.transaction():
                    yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise StoreUnavailable(STORE, f"{_where(self.url)}: {_first_line(exc)}") from exc

    def _migrate(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS baton_schema_migrations ("
                         "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            done = {row[0] for row in conn.execute("SELECT version FROM baton_schema_migrations")}
            for version, script in enumerate(MIGRATIONS):
                if version in done:
                    continue
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO baton_schema_migrations (version) VALUES (%s)", (version,))
        self._migrated = True

    def _load(self, conn, task_id: str) -> Session | None:
        from registry.model import Session

        row = conn.execute("SELECT body FROM baton_sessions WHERE task_id = %s", (task_id,)).fetchone()
        return None if row is None else Session.model_validate(row[0])

    def _save(self, conn, session: Session, files: Sequence[FileRef]) -> None:
        from psycopg.types.json import Jsonb

        conn.execute(
            "INSERT INTO baton_sessions (task_id, status, last_activity, body) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, "
            "last_activity = excluded.last_activity, body = excluded.body",
            (session.task_id, session.status.value, session.last_activity, Jsonb(session.model_dump(mode="json"))))
        if files:
            conn.cursor().executemany(
                "INSERT INTO baton_session_files (task_id, repo, path, last_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (task_id, repo, path) DO UPDATE SET last_at = GREATEST(baton_session_files.last_at, excluded.last_at)",
                [(session.task_id, f.repo, f.path, session.files[f.key].last_at) for f in files])

    def _merge(self, conn, event: Event) -> Session | None:
        """Insert the event; if it is new, merge it into the ticket's projection under its lock."""
        from registry.apply import apply_event

        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (event.task_id,))
        current = self._load(conn, event.task_id)
        session = apply_event(current, event)
        self._save(conn, session, getattr(event, "files", ()))
        return session

    def _apply_pending(self, conn) -> None:
        rows = conn.execute("SELECT event_id, body FROM baton_events WHERE NOT applied ORDER BY at FOR UPDATE SKIP LOCKED").fetchall()
        adapter = event_adapter()
        for event_id, body in rows:
            self._merge(conn, adapter.validate_python(body))
            conn.execute("UPDATE baton_events SET applied = true WHERE event_id = %s", (event_id,))

    def _catch_up(self) -> None:
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM baton_events WHERE NOT applied LIMIT 1").fetchone() is not None:
                self._apply_pending(conn)

    def record_touch(self, task_id: str, session_id: str, at: datetime, files: Sequence[FileRef], *,
                     event_id: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO baton_events (event_id, task_id, at, type, body, applied) VALUES (%s, %s, %s, %s, %s::jsonb, false) "
                "ON CONFLICT (event_id) DO NOTHING",
                (event_id, task_id, at, "files_touched", files_touched_body(event_id, task_id, session_id, at, files)))

    def append(self, events: Sequence[Event]) -> dict[str, Session]:
        from psycopg.types.json import Jsonb

        sessions: dict[str, Session] = {}
        with self._transaction() as conn:
            for event in events:
                inserted = conn.execute(
                    "INSERT INTO baton_events (event_id, task_id, at, type, body) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (event_id) DO NOTHING",
                    (event.event_id, event.task_id, event.at, event.type, Jsonb(event.model_dump(mode="json")))).rowcount
                if inserted:
                    sessions[event.task_id] = self._merge(conn, event)
            for event in events:
                if event.task_id not in sessions:
                    found = self._load(conn, event.task_id)
                    if found is not None:
                        sessions[event.task_id] = found
        return sessions

    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        try:
            self._catch_up()
            with self._transaction() as conn:
                session = self._load(conn, task_id)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        return NotFound(task_id) if session is None else Found(session)

    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        from registry.model import Session

        query = ("SELECT body FROM baton_sessions ORDER BY last_activity DESC, task_id" if include_inactive else
                 "SELECT body FROM baton_sessions WHERE status = 'active' ORDER BY last_activity DESC, task_id")
        try:
            self._catch_up()
            with self._transaction() as conn:
                return Found([Session.model_validate(body) for (body,) in conn.execute(query)])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        adapter = event_adapter()
        try:
            with self._transaction() as conn:
                rows = conn.execute("SELECT body FROM baton_events WHERE task_id = %s ORDER BY at, event_id", (task_id,))
                return Found([adapter.validate_python(body) for (body,) in rows])
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)

    def describe(self) -> dict[str, str]:
        with self._transaction() as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            sessions = conn.execute("SELECT count(*) FROM baton_sessions").fetchone()[0]
        return {"backend": "postgresql", "location": _where(self.url), "version": f"PostgreSQL {version}",
                "size": f"{sessions} sessions"}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _where(url: str) -> str:
    """The server part of a URL, without credentials."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # an unparsable URL is reported by the connection attempt itself
        return "PostgreSQL"
    return f"PostgreSQL at {info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
