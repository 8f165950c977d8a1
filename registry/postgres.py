"""The production session store: PostgreSQL through psycopg 3, one connection per store.

Timeouts bound every wait: connecting (what the command's budget has left, baton.budget),
each statement (statement_timeout), each lock (lock_timeout), and the server's silence
within a transaction (what the budget has left: a server that stops answering after the
login, which no server-side timeout ends, has its connection's socket shut), so a dead or
stalled server answers Unavailable within the budget instead of hanging. The connection is made in
the caller's call, on a thread it stops waiting for at the budget (psycopg counts
connect_timeout in whole seconds, at least 2), and made again after it broke: no pool
reconnects in the background, and a refused login or a missing database is reported as
the server said it, not as a timeout.

The merge runs in SQL: the projection of a ticket's new events (apply_event folded over
them, from no session) is upserted into the ticket's row, and on conflict merged into it
by baton_merge_session following baton.registry.model.SESSION_MERGE. The upsert holds the row's
lock for the merge, so two writers of one ticket cannot race and no read-modify-write
happens in Python. A replayed event is a no-op through the events table's primary key, and
would change nothing anyway: the merge is idempotent. The merge is a join (each field a
union, a minimum or maximum, or a register won by the later stamp), so merging the fold of
a batch equals merging its events one by one; an append therefore costs four statements
whatever its size: the events' insert, the read of the tickets' take-overs (their rows
locked in ticket order, so two appenders lock rows in the same order), the tickets' upsert
and their files'. The take-overs are what the events are folded onto before the merge, so a
late write of a superseded run (baton.registry.apply) merges as nothing but itself.

Every row belongs to a project (baton.projects), part of each key, and every statement names
the store's project. The database enforces it too: each transaction sets `baton.project`
(set_config, local to the transaction) and row-level security, forced on the tables' owner
too, shows and takes only that project's rows, so a statement that forgot its project still
cannot read or change another's. Only `projects()` reads across, under the setting `*`, which
a policy admits for SELECT alone; no write can name it (baton.projects.check_project).
Superusers and roles with BYPASSRLS skip row-level security: run Baton as a team's role.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from baton.budget import SLACK, AnyGate, OpenGate, cut_when_silent, shut_socket, within
from baton.errors import ServerUnreachable, StoreUnavailable
from baton.outcome import Found, NotFound, Unavailable, answering
from baton.projects import ALL_PROJECTS, check_project
from baton.registry.base import (
    LISTED_PATHS,
    OUTLINE_PATHS,
    HolderNote,
    ListedLease,
    SessionOutline,
    SessionStore,
    lease_anchor,
    listed_row,
    meeting_anchors,
    meeting_leases,
    near_leases,
    outline_row,
    path_anchors,
    unreleased_leases,
)
from baton.registry.wire import event_of
from baton.store_names import Store

if TYPE_CHECKING:
    import psycopg

    from baton.registry.base import ListedSession  # in annotations only
    from baton.registry.model import Event, SecretsRedacted, Session

STORE = Store.SESSION_REGISTRY
_T = TypeVar("_T")


def _fields(paths: Sequence[tuple[str, ...]]) -> str:
    """A session's ticket, status, last activity and values at paths, read by the server from
    its projection: no session sent whole, none validated."""
    values = ", ".join(f"body#>'{{{','.join(path)}}}'" for path in paths)
    return f"task_id, status, last_activity, jsonb_build_array({values})"


def _sessions(columns: str, include_inactive: bool) -> str:
    """The columns of the project's sessions, the active ones only unless include_inactive."""
    active = "" if include_inactive else "AND status = 'active' "
    return f"SELECT {columns} FROM baton_sessions WHERE project = %(project)s {active}"  # noqa: S608


_ORDER = "ORDER BY last_activity DESC, task_id"

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
    # The merge in SQL; baton.registry.model.SESSION_MERGE says which kind each field is.
    """
    CREATE FUNCTION baton_later_stamp(current jsonb, candidate jsonb) RETURNS boolean
    LANGUAGE sql STABLE AS $$
        SELECT CASE
            WHEN candidate IS NULL OR candidate = 'null'::jsonb THEN false
            WHEN current IS NULL OR current = 'null'::jsonb THEN true
            ELSE ((candidate->>'at')::timestamptz, coalesce((candidate->>'rank')::int, 0),
                  (candidate->>'event_id') COLLATE "C")
               > ((current->>'at')::timestamptz, coalesce((current->>'rank')::int, 0),
                  (current->>'event_id') COLLATE "C")
        END
    $$;

    CREATE FUNCTION baton_merge_session(current jsonb, delta jsonb, spec jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
    DECLARE
        merged jsonb := current;
        name text;
        stamp text;
        register_values jsonb;
    BEGIN
        FOR name IN SELECT jsonb_array_elements_text(spec->'same') LOOP
            IF current->name IS DISTINCT FROM delta->name THEN
                RAISE EXCEPTION 'baton_merge_session: % differs (% vs %)', name, current->name, delta->name;
            END IF;
        END LOOP;
        FOR name IN SELECT jsonb_array_elements_text(spec->'earliest') LOOP
            IF (delta->>name)::timestamptz < (current->>name)::timestamptz THEN
                merged := jsonb_set(merged, ARRAY[name], delta->name);
            END IF;
        END LOOP;
        FOR name IN SELECT jsonb_array_elements_text(spec->'latest') LOOP
            IF (delta->>name)::timestamptz > (current->>name)::timestamptz THEN
                merged := jsonb_set(merged, ARRAY[name], delta->name);
            END IF;
        END LOOP;
        FOR name IN SELECT jsonb_array_elements_text(spec->'union') LOOP
            merged := jsonb_set(merged, ARRAY[name], (
                SELECT coalesce(jsonb_agg(member ORDER BY member COLLATE "C"), '[]'::jsonb) FROM (
                    SELECT jsonb_array_elements_text(coalesce(current->name, '[]'::jsonb)) AS member
                    UNION
                    SELECT jsonb_array_elements_text(coalesce(delta->name, '[]'::jsonb))) AS members));
        END LOOP;
        -- Entries keyed by text: the earliest recording of a text is the one kept.
        FOR name IN SELECT jsonb_array_elements_text(spec->'entries') LOOP
            merged := jsonb_set(merged, ARRAY[name], (
                SELECT coalesce(jsonb_agg(entry ORDER BY (entry->>'at')::timestamptz,
                                          entry->>'event_id' COLLATE "C", entry->>'text' COLLATE "C"), '[]'::jsonb)
                FROM (
                    SELECT DISTINCT ON (entry->>'text') entry FROM (
                        SELECT jsonb_array_elements(coalesce(current->name, '[]'::jsonb)) AS entry
                        UNION ALL
                        SELECT jsonb_array_elements(coalesce(delta->name, '[]'::jsonb))) AS candidates
                    ORDER BY entry->>'text', (entry->>'at')::timestamptz, entry->>'event_id' COLLATE "C") AS firsts));
        END LOOP;
        -- Touches keyed by file: the latest touch is the one kept.
        FOR name IN SELECT jsonb_array_elements_text(spec->'touches') LOOP
            merged := jsonb_set(merged, ARRAY[name], (
                SELECT coalesce(jsonb_object_agg(key, touch), '{}'::jsonb) FROM (
                    SELECT DISTINCT ON (key) key, touch FROM (
                        SELECT key, value AS touch FROM jsonb_each(coalesce(current->name, '{}'::jsonb))
                        UNION ALL
                        SELECT key, value FROM jsonb_each(coalesce(delta->name, '{}'::jsonb))) AS candidates
                    ORDER BY key, (touch->>'last_at')::timestamptz DESC) AS latest));
        END LOOP;
        -- Registers: a later stamp takes its value fields along.
        FOR stamp, register_values IN SELECT key, value FROM jsonb_each(spec->'registers') LOOP
            IF baton_later_stamp(current->stamp, delta->stamp) THEN
                merged := jsonb_set(merged, ARRAY[stamp], delta->stamp);
                FOR name IN SELECT jsonb_array_elements_text(register_values) LOOP
                    merged := jsonb_set(merged, ARRAY[name], coalesce(delta->name, 'null'::jsonb));
                END LOOP;
            END IF;
        END LOOP;
        RETURN merged;
    END
    $$;

    -- The indexed columns follow the body (Session.status: a stall is undone by later activity).
    CREATE FUNCTION baton_session_columns() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.last_activity := (NEW.body->>'last_activity')::timestamptz;
        NEW.status := CASE
            WHEN NEW.body->>'lifecycle' = 'stalled'
                 AND jsonb_typeof(NEW.body->'lifecycle_stamp') = 'object'
                 AND (NEW.body->>'last_activity')::timestamptz > (NEW.body->'lifecycle_stamp'->>'at')::timestamptz
            THEN 'active'
            ELSE NEW.body->>'lifecycle'
        END;
        RETURN NEW;
    END
    $$;

    CREATE TRIGGER baton_session_columns BEFORE INSERT OR UPDATE ON baton_sessions
        FOR EACH ROW EXECUTE FUNCTION baton_session_columns();
    """,
    # Tombstones of pruned sessions: events up to `through` are not taken again.
    """
    CREATE TABLE baton_pruned (
        task_id text PRIMARY KEY,
        through timestamptz NOT NULL
    );
    """,
    # Projects: each key gains the project, which row-level security enforces. A session
    # moves to its repository's project (what a worktree of it derives unless baton.toml
    # names another) with its events and files; a tombstone, whose session is gone, holds
    # in every project.
    """
    ALTER TABLE baton_events ADD COLUMN project text;
    ALTER TABLE baton_sessions ADD COLUMN project text;
    ALTER TABLE baton_session_files ADD COLUMN project text;
    ALTER TABLE baton_pruned ADD COLUMN project text;
    UPDATE baton_sessions SET project = coalesce(body->>'repo', '');
    UPDATE baton_events e SET project = coalesce(
        (SELECT s.project FROM baton_sessions s WHERE s.task_id = e.task_id), e.body->>'repo', '');
    UPDATE baton_session_files f SET project = coalesce(
        (SELECT s.project FROM baton_sessions s WHERE s.task_id = f.task_id), '');
    INSERT INTO baton_pruned (project, task_id, through)
        SELECT projects.project, p.task_id, p.through FROM baton_pruned p,
            (SELECT DISTINCT project FROM baton_sessions WHERE project <> '') AS projects;
    UPDATE baton_pruned SET project = '' WHERE project IS NULL;
    ALTER TABLE baton_events DROP CONSTRAINT baton_events_pkey, ADD PRIMARY KEY (project, event_id);
    ALTER TABLE baton_sessions DROP CONSTRAINT baton_sessions_pkey, ADD PRIMARY KEY (project, task_id);
    ALTER TABLE baton_session_files DROP CONSTRAINT baton_session_files_pkey,
        ADD PRIMARY KEY (project, task_id, repo, path);
    ALTER TABLE baton_pruned DROP CONSTRAINT baton_pruned_pkey, ADD PRIMARY KEY (project, task_id);
    DROP INDEX baton_events_by_task;
    CREATE INDEX baton_events_by_task ON baton_events (project, task_id, at);
    DROP INDEX baton_session_files_by_file;
    CREATE INDEX baton_session_files_by_file ON baton_session_files (project, repo, path);
    DROP INDEX baton_sessions_active;
    CREATE INDEX baton_sessions_active ON baton_sessions (project, last_activity DESC) WHERE status = 'active';
    DROP INDEX baton_sessions_by_status;
    CREATE INDEX baton_sessions_by_status ON baton_sessions (project, status, last_activity DESC);
    DO $$
    DECLARE
        name text;
    BEGIN
        FOREACH name IN ARRAY ARRAY['baton_events', 'baton_sessions', 'baton_session_files', 'baton_pruned'] LOOP
            EXECUTE format('ALTER TABLE %I ALTER COLUMN project SET NOT NULL', name);
            EXECUTE format('ALTER TABLE %I ALTER COLUMN project SET DEFAULT current_setting(''baton.project'')',
                           name);
            EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', name);
            EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', name);
            EXECUTE format('CREATE POLICY baton_own_project ON %I '
                           'USING (project = current_setting(''baton.project'', true)) '
                           'WITH CHECK (project = current_setting(''baton.project'', true))', name);
            EXECUTE format('CREATE POLICY baton_every_project ON %I FOR SELECT '
                           'USING (current_setting(''baton.project'', true) = ''*'')', name);
        END LOOP;
    END
    $$;
    """,
    # Each lease's anchor (baton.registry.base.lease_anchor), so that the check before an
    # edit reads only the sessions whose leases may cover the file. A lease granted before
    # has the empty anchor (it is read for every file) until its ticket is stored again.
    # Filled across projects (the setting `*` reads every session), then under the same
    # row-level security as the other tables.
    """
    CREATE TABLE baton_lease_anchors (
        project text NOT NULL DEFAULT current_setting('baton.project'),
        lease_id text NOT NULL,
        task_id text NOT NULL,
        repo text NOT NULL,
        anchor text NOT NULL,
        PRIMARY KEY (project, lease_id)
    );
    CREATE INDEX baton_lease_anchors_by_anchor ON baton_lease_anchors (project, repo, anchor, task_id);
    DO $$
    DECLARE
        before text := current_setting('baton.project', true);
    BEGIN
        PERFORM set_config('baton.project', '*', true);
        INSERT INTO baton_lease_anchors (project, lease_id, task_id, repo, anchor)
            SELECT s.project, lease->>'text', s.task_id, lease->>'repo', ''
            FROM baton_sessions s, jsonb_array_elements(coalesce(s.body->'leases', '[]'::jsonb)) AS lease
            ON CONFLICT DO NOTHING;
        PERFORM set_config('baton.project', coalesce(before, ''), true);
    END
    $$;
    ALTER TABLE baton_lease_anchors ENABLE ROW LEVEL SECURITY;
    ALTER TABLE baton_lease_anchors FORCE ROW LEVEL SECURITY;
    CREATE POLICY baton_own_project ON baton_lease_anchors
        USING (project = current_setting('baton.project', true))
        WITH CHECK (project = current_setting('baton.project', true));
    CREATE POLICY baton_every_project ON baton_lease_anchors FOR SELECT
        USING (current_setting('baton.project', true) = '*');
    """,
]
# The ticket, last activity and stored leases and releases of the active sessions holding a
# lease in %(repo)s whose anchor meets the condition that follows.
_LEASES_HELD = """
    SELECT task_id, last_activity, body->'leases', body->'lease_releases' FROM baton_sessions
    WHERE project = %(project)s AND status = 'active' AND task_id IN (
        SELECT task_id FROM baton_lease_anchors WHERE project = %(project)s AND repo = %(repo)s
"""
# Those that may cover a file, in list_sessions' order.
_LEASES_NEAR = _LEASES_HELD + "AND anchor = ANY(%(anchors)s)) ORDER BY last_activity DESC, task_id"
# The leases a claim's decision reads (meeting_anchors), every pending event merged first:
# those anchored at one of %(above)s (every one when %(every)s) or under one of the prefixes
# %(under)s, by ticket.
_LEASES_MEETING = _LEASES_HELD + """
        AND (%(every)s OR anchor = ANY(%(above)s::text[]) OR anchor ^@ ANY(%(under)s::text[])))
    ORDER BY task_id
"""
_ANCHOR_LEASE = """
    INSERT INTO baton_lease_anchors (project, lease_id, task_id, repo, anchor) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (project, lease_id) DO UPDATE SET anchor = excluded.anchor
    WHERE baton_lease_anchors.anchor <> excluded.anchor
"""

_MIGRATION_LOCK = 0x62617431  # advisory lock key: one process at a time migrates the schema
# Appends hold this advisory lock shared and a prune holds it alone, so an event cannot be
# stored for a ticket while its session is being pruned (and outlive it, untombstoned).
_PRUNE_LOCK = 0x62617432
# A conditional write (append_unless: a lease's grant) holds this advisory lock, keyed by its
# project too, through its read and its write.
_DECISION_LOCK = 0x62617433
# An event of a pruned ticket as old as its tombstone is not stored again; %(applied)s:
# whether the events are merged in the same transaction (append_body's are not).
_INSERT_EVENTS = """
    INSERT INTO baton_events (project, event_id, task_id, at, type, body, applied)
    SELECT %(project)s, (e->>'event_id')::uuid, e->>'task_id', (e->>'at')::timestamptz, e->>'type', e, %(applied)s
    FROM jsonb_array_elements(%(events)s::jsonb) AS e
    WHERE NOT EXISTS (SELECT 1 FROM baton_pruned p WHERE p.project = %(project)s
                      AND p.task_id = e->>'task_id' AND p.through >= (e->>'at')::timestamptz)
    ON CONFLICT (project, event_id) DO NOTHING
    RETURNING event_id
"""

# The sessions of a batch's tickets as append answers them: whole, or (whole false) as
# Session.batch_view, made here so that no more than that crosses the wire or is parsed.
_SESSION_VIEWS = """
    SELECT task_id, CASE WHEN %(whole)s OR task_id = ANY(%(redacted)s) THEN body
        ELSE (body - %(history)s::text[]) || jsonb_build_object('decisions', coalesce((
            SELECT jsonb_agg(entry ORDER BY n)
            FROM jsonb_array_elements(body -> 'decisions') WITH ORDINALITY AS d(entry, n)
            WHERE entry ->> 'text' = ANY(%(recorded)s)), '[]'::jsonb)) END
    FROM baton_sessions WHERE project = %(project)s AND task_id = ANY(%(tickets)s)
"""

# Each ticket's delta (its new events' projection) merged into its row under the row's
# lock, in ticket order, and the delta's files recorded for the lookup by file. The
# batches travel as one JSON array each: no per-row parameters to escape.
_MERGE_DELTAS = """
    WITH delta AS (
        SELECT d->>'task_id' AS task_id, (d->>'last_activity')::timestamptz AS at, d AS body
        FROM jsonb_array_elements(%(deltas)s::jsonb) AS d
    ), merged AS (
        INSERT INTO baton_sessions AS s (project, task_id, status, last_activity, body)
        SELECT %(project)s, task_id, '', at, body FROM delta ORDER BY task_id
        ON CONFLICT (project, task_id) DO UPDATE SET body = baton_merge_session(s.body, excluded.body, %(spec)s)
        RETURNING s.task_id
    ), files AS (
        INSERT INTO baton_session_files (project, task_id, repo, path, last_at)
        SELECT %(project)s, d.task_id, touch->>'repo', touch->>'path', (touch->>'last_at')::timestamptz
        FROM delta AS d, jsonb_each(d.body -> 'files') AS touched(key, touch)
        ORDER BY d.task_id, touch->>'repo', touch->>'path'
        ON CONFLICT (project, task_id, repo, path)
        DO UPDATE SET last_at = GREATEST(baton_session_files.last_at, excluded.last_at)
    )
    SELECT task_id FROM merged
"""

# The take-overs of tickets about to be merged (PostgresSessionStore._fences), their rows locked.
_FENCES = """
    SELECT task_id, body->'created_at', body->'last_activity', body->'takeovers' FROM baton_sessions
    WHERE project = %s AND task_id = ANY(%s) ORDER BY task_id FOR UPDATE
"""

# SQLSTATEs of a server that cannot be heard from (the health record's business): class 08
# (connection exceptions), shutting down or starting up, and a statement cut at its timeout.
# A failed connection has no SQLSTATE: it is the server's own refusal when it says FATAL
# (a wrong role or database), else the client's (refused, timed out, connection lost).
_UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03", "57014")
_STARTING_OR_STOPPING = "the database system is"


class PostgresSessionStore(SessionStore):
    def __init__(self, url: str, *, timeout: float, project: str, gate: AnyGate | None = None) -> None:
        """gate: the server's gate in the command's budget (baton.budget); without one,
        each call may wait `timeout` seconds."""
        self.url = url
        self.project = check_project(project)
        self.timeout = timeout
        self._gate = gate or OpenGate(timeout)
        self._conn: psycopg.Connection | None = None
        self._heard_at = time.monotonic()  # when the server was last heard from on the connection
        self._lock = threading.RLock()  # one transaction at a time on the connection
        self._migrated = False

    def _connection(self) -> psycopg.Connection:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        import psycopg

        millis = int(self.timeout * 1000)
        left = self._gate.left()  # after the import, which the budget pays for too
        cursor = _cursor_noting(self._heard)
        self._conn = within(left, lambda: psycopg.connect(
            self.url, autocommit=True, cursor_factory=cursor, connect_timeout=max(2, math.ceil(left)),
            application_name="baton",
            # UTC: the times the server sends back read as the projections' own (+00:00).
            options=f"-c statement_timeout={millis} -c lock_timeout={millis} -c TimeZone=UTC"))
        return self._conn

    @contextmanager
    def _transaction(self, scope: str | None = None) -> Iterator[psycopg.Connection]:
        """A transaction whose row-level security admits the rows of scope (default: the
        store's project)."""
        with self._gate.call(STORE), self._lock:
            import psycopg

            cut = threading.Event()
            try:
                conn = self._connection()
                # The server's timeouts end its own work; a server that stops answering at all
                # (paused, frozen) is cut when silent for what the budget has left, else
                # psycopg would wait for ever. Each statement it answers counts as heard.
                self._heard()
                with cut_when_silent(self._gate.left() + SLACK, lambda: self._heard_at,
                                     lambda: shut_socket(conn.pgconn.socket), cut):
                    if not self._migrated:
                        self._migrate(conn)
                    with conn.transaction():
                        conn.execute("SELECT set_config('baton.project', %s, true)", (scope or self.project,))
                        yield conn
            except TimeoutError as exc:
                raise ServerUnreachable(STORE, f"{_where(self.url)}: {self._gate.no_answer()}") from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if cut.is_set():
                    raise ServerUnreachable(STORE, f"{_where(self.url)}: {self._gate.no_answer()}") from exc
                message = f"{_where(self.url)}: {(str(exc).strip() or type(exc).__name__).splitlines()[0]}"
                state = getattr(exc, "sqlstate", None)
                said = "FATAL:" in str(exc) and _STARTING_OR_STOPPING not in str(exc)
                if (state is None and not said) or (state or "").startswith(_UNREACHABLE_STATES):
                    raise ServerUnreachable(STORE, message) from exc
                raise StoreUnavailable(STORE, message) from exc
            finally:
                if cut.is_set():  # its socket is shut: the next call connects again
                    self.close()

    def _heard(self) -> None:
        self._heard_at = time.monotonic()

    def _migrate(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            # Asked first: a team's role without CREATE on the schema (docs/backends.md, "Deploying
            # for a team") is refused even a CREATE TABLE IF NOT EXISTS of a table that exists.
            if _one(conn.execute("SELECT to_regclass('baton_schema_migrations')"))[0] is None:
                conn.execute("CREATE TABLE baton_schema_migrations ("
                             "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            done = {row[0] for row in conn.execute("SELECT version FROM baton_schema_migrations")}
            for version, script in enumerate(MIGRATIONS):
                if version in done:
                    continue
                conn.execute(script)
                conn.execute("INSERT INTO baton_schema_migrations (version) VALUES (%s)", (version,))
        self._migrated = True

    def _anchor_leases(self, conn: psycopg.Connection, sessions: Iterable[Session]) -> None:
        """Keep the anchor of each lease of the sessions just stored."""
        rows = [(self.project, lease.text, s.task_id, lease.repo, lease_anchor(lease.pattern))
                for s in sessions for lease in s.leases]
        if rows:
            conn.cursor().executemany(_ANCHOR_LEASE, rows)

    def _fences(self, conn: psycopg.Connection, task_ids: Sequence[str]) -> dict[str, Session]:
        """The sessions that the new events of task_ids are applied to before their merge: for
        a ticket taken over, its take-overs with its times, so that a late write's delta is
        only itself (baton.registry.apply); for the others none (the delta is the events'
        own). Locks the tickets' rows, in ticket order as the merge does, so no take-over
        is stored between this read and the merge."""
        from baton.registry.model import Session

        if not task_ids:
            return {}
        rows = conn.execute(_FENCES, (self.project, list(task_ids))).fetchall()
        return {task_id: Session.model_validate({"task_id": task_id, "created_at": created, "last_activity": last,
                                                 "takeovers": takeovers})
                for task_id, created, last, takeovers in rows if takeovers}

    def _apply_pending(self, conn: psycopg.Connection) -> None:
        rows = conn.execute(
            "SELECT event_id, type, body::text FROM baton_events WHERE project = %s AND NOT applied ORDER BY at "
            "FOR UPDATE SKIP LOCKED", (self.project,)).fetchall()
        if rows:
            pending = [event_of(event_type, body) for _, event_type, body in rows]
            self._merge_new(conn, pending)
            self._anchor_leases(conn, self._views(conn, pending, whole=False).values())
            conn.execute("UPDATE baton_events SET applied = true WHERE project = %s AND event_id = ANY(%s)",
                         (self.project, [event_id for event_id, _, _ in rows]))

    def _catch_up(self) -> None:
        with self._transaction() as conn:
            self._apply_pending(conn)

    def append_body(self, event_id: str, task_id: str, at: datetime, event_type: str, body: str) -> None:
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_PRUNE_LOCK,))
            conn.execute(_INSERT_EVENTS, {"project": self.project, "events": _json_array([body]), "applied": False})

    def append(self, events: Sequence[Event], *, whole: bool = True) -> dict[str, Session]:
        if not events:
            return {}
        with self._transaction() as conn:
            return self._append_in(conn, events, whole=whole)

    def append_unless(self, events: Sequence[Event], repo: str, patterns: Sequence[str],
                      refusal: Callable[[list[tuple[str, ListedLease]]], str | None]) -> str | None:
        with self._transaction() as conn:
            # Taken before the read: the decisions of one project follow one another.
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_DECISION_LOCK, self.project))
            self._apply_pending(conn)
            reach = meeting_anchors(patterns)
            above, under = reach or ([], [])
            rows = conn.execute(_LEASES_MEETING, {"project": self.project, "repo": repo, "every": reach is None,
                                                  "above": above, "under": under}).fetchall()
            refused = refusal(meeting_leases(_held(rows), repo, patterns))
            if refused is None:
                self._append_in(conn, events, whole=False)  # its sessions are not answered
        return refused

    def _append_in(self, conn: psycopg.Connection, events: Sequence[Event], *,
                   whole: bool = True) -> dict[str, Session]:
        """Store and merge the events inside the caller's transaction (see append)."""
        unique = list({str(e.event_id): e for e in events}.values())  # a redelivered batch may repeat one
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_PRUNE_LOCK,))
        inserted = {str(event_id) for (event_id,) in conn.execute(_INSERT_EVENTS, {
            "project": self.project, "events": _json_array(e.model_dump_json() for e in unique), "applied": True})}
        self._merge_new(conn, [e for e in unique if str(e.event_id) in inserted])
        sessions = self._views(conn, unique, whole=whole)
        self._anchor_leases(conn, sessions.values())
        return sessions

    def _views(self, conn: psycopg.Connection, events: Sequence[Event], *, whole: bool) -> dict[str, Session]:
        """The sessions of the events' tickets as append answers them, read inside the
        caller's transaction (_SESSION_VIEWS)."""
        from baton.registry.model import HISTORY_LISTS, Session, batch_terms

        recorded, redacted = batch_terms(events)
        rows = conn.execute(_SESSION_VIEWS, {"project": self.project, "tickets": sorted({e.task_id for e in events}),
                                             "whole": whole, "redacted": sorted(redacted),
                                             "history": list(HISTORY_LISTS), "recorded": sorted(recorded)})
        return {task_id: Session.model_validate(body) for task_id, body in rows}

    def _merge_new(self, conn: psycopg.Connection, events: Sequence[Event]) -> None:
        """Merge events just stored into their tickets' rows, in one statement (their fold
        onto the take-overs, baton.registry.apply), then redact what a redaction among them names."""
        from psycopg.types.json import Jsonb

        from baton.registry.apply import fold_onto
        from baton.registry.model import SESSION_MERGE

        fences = self._fences(conn, sorted({e.task_id for e in events}))
        deltas = fold_onto(fences.get, events)
        if deltas:
            tickets = sorted(deltas)
            conn.execute(_MERGE_DELTAS, {"project": self.project,
                                         "deltas": _json_array(deltas[t].model_dump_json() for t in tickets),
                                         "spec": Jsonb(SESSION_MERGE)})
        for event in events:
            if event.type == "secrets_redacted":
                self._redact(conn, event)

    def _redact(self, conn: psycopg.Connection, event: SecretsRedacted) -> None:
        """Rewrite the fields the event names in the stored events, then fold the ticket's
        log again and store that projection whole (a rewrite is no merge); runs inside the
        caller's transaction, after the batch's merge."""
        from psycopg.types.json import Jsonb

        from baton.registry.apply import fold

        conn.cursor().executemany(
            "UPDATE baton_events SET body = jsonb_set(body, ARRAY[%s], to_jsonb(%s::text)) "
            "WHERE project = %s AND event_id = %s AND task_id = %s",
            [(r.field, r.text, self.project, r.event_id, event.task_id) for r in event.rewrites])
        rows = conn.execute("SELECT type, body::text FROM baton_events WHERE project = %s AND task_id = %s "
                            "ORDER BY at, event_id", (self.project, event.task_id))
        session = fold(event_of(event_type, body) for event_type, body in rows)
        if session is not None:
            conn.execute("UPDATE baton_sessions SET body = %s WHERE project = %s AND task_id = %s",
                         (Jsonb(session.model_dump(mode="json")), self.project, event.task_id))

    @answering
    def _found(self, query: str, params: Sequence[object] | dict[str, object], answer: Callable[[list[Any]], _T],
               *, catch_up: bool = True, scope: str | None = None) -> Found[_T] | Unavailable:
        """Found(answer(query's rows)), every pending event merged first if catch_up;
        Unavailable when the server cannot answer."""
        if catch_up:
            self._catch_up()
        with self._transaction(scope) as conn:
            rows = conn.execute(query, params).fetchall()
        return Found(answer(rows))

    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        found = self.get_many([task_id])
        if isinstance(found, Unavailable):
            return found
        return Found(found.value[task_id]) if task_id in found.value else NotFound(task_id)

    def get_many(self, task_ids: Sequence[str]) -> Found[dict[str, Session]] | Unavailable:
        from baton.registry.model import Session

        return self._found("SELECT task_id, body FROM baton_sessions WHERE project = %s AND task_id = ANY(%s)",
                           (self.project, list(task_ids)),
                           lambda rows: {task_id: Session.model_validate(body) for task_id, body in rows})

    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        from baton.registry.model import Session

        query = _sessions("body", include_inactive) + _ORDER
        return self._found(query, {"project": self.project},
                           lambda rows: [Session.model_validate(body) for (body,) in rows])

    def lease_holders(self) -> Found[set[str]] | Unavailable:
        """From the lease anchors' table: no session sent."""
        return self._found("SELECT DISTINCT task_id FROM baton_lease_anchors WHERE project = %s", (self.project,),
                           lambda rows: {task_id for (task_id,) in rows})

    def listed_sessions(self, *, include_inactive: bool = False, task_ids: Collection[str] | None = None
                        ) -> Found[list[ListedSession]] | Unavailable:
        """The fields a list line shows, read by the server from each projection: no session
        sent whole, none validated."""
        query = _sessions(_fields(LISTED_PATHS), include_inactive) + (
            "" if task_ids is None else "AND task_id = ANY(%(asked)s) ") + _ORDER
        asked = None if task_ids is None else sorted(set(task_ids))
        return self._found(query, {"project": self.project, "asked": asked},
                           lambda rows: [listed_row(*row) for row in rows])

    def session_order(self, *, include_inactive: bool = False, offset: int = 0,
                      limit: int | None = None) -> Found[list[tuple[str, str]]] | Unavailable:
        """From the status index alone: no session sent."""
        query = _sessions("task_id, status", include_inactive) + _ORDER + " LIMIT %(limit)s OFFSET %(offset)s"
        return self._found(query, {"project": self.project, "limit": limit, "offset": offset},
                           lambda rows: [tuple(row) for row in rows])

    def session_count(self, *, include_inactive: bool = False) -> Found[int] | Unavailable:
        """From the status index alone."""
        query = _sessions("count(*)", include_inactive)
        return self._found(query, {"project": self.project}, lambda rows: rows[0][0])

    def session_outlines(self, *, include_inactive: bool = False) -> Found[list[SessionOutline]] | Unavailable:
        """The outlines' fields read by the server from each projection, so the sessions are
        neither sent whole nor validated."""
        query = _sessions(_fields(OUTLINE_PATHS), include_inactive) + _ORDER
        return self._found(query, {"project": self.project}, lambda rows: [outline_row(*r) for r in rows])

    def holder_notes(self, task_ids: Sequence[str]) -> Found[dict[str, HolderNote]] | Unavailable:
        """Read by the server from each projection: no session sent whole, none validated."""
        return self._found("SELECT task_id, body->>'agent', body->>'branch', body->>'next_action' "
                           "FROM baton_sessions WHERE project = %s AND task_id = ANY(%s)",
                           (self.project, list(dict.fromkeys(task_ids))),
                           lambda rows: {task_id: HolderNote(*notes) for task_id, *notes in rows})

    def leases_near(self, repo: str, paths: Sequence[str]) -> Found[list[tuple[str, ListedLease]]] | Unavailable:
        """Through the lease anchors' index: only the sessions holding a lease that may cover
        one of paths are read, and only their leases sent."""
        anchors = sorted({anchor for path in paths for anchor in path_anchors(path)})
        return self._found(_LEASES_NEAR, {"project": self.project, "repo": repo, "anchors": anchors},
                           lambda rows: near_leases(_held(rows), repo, paths))

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        return self._found("SELECT type, body::text FROM baton_events WHERE project = %s AND task_id = %s "
                           "ORDER BY at, event_id", (self.project, task_id),
                           lambda rows: [event_of(event_type, body) for event_type, body in rows], catch_up=False)

    def prune(self, ended_before: datetime, *, dry_run: bool = False) -> list[str]:
        self._catch_up()
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PRUNE_LOCK,))
            rows = conn.execute(
                "SELECT s.task_id, (SELECT max(at) FROM baton_events e WHERE e.project = s.project "
                "AND e.task_id = s.task_id) "
                "FROM baton_sessions s WHERE s.project = %(project)s AND s.status IN ('completed', 'stalled') "
                "AND s.last_activity < %(before)s "
                "AND s.task_id NOT IN (SELECT jsonb_array_elements_text(a.body -> 'depends_on') "
                "                      FROM baton_sessions a WHERE a.project = %(project)s AND a.status = 'active' "
                "                      UNION SELECT r ->> 'parent_task_id' FROM baton_sessions a, "
                "                      jsonb_array_elements(a.body -> 'run_log') r "
                "                      WHERE a.project = %(project)s AND a.status = 'active' "
                "                      AND r ->> 'kind' = 'fork' AND r ->> 'parent_task_id' IS NOT NULL) "
                "ORDER BY s.task_id", {"project": self.project, "before": ended_before}).fetchall()
            if not dry_run and rows:
                ids = [task_id for task_id, _ in rows]
                for table in ("baton_events", "baton_session_files", "baton_lease_anchors", "baton_sessions"):
                    conn.execute(f"DELETE FROM {table} WHERE project = %s AND task_id = ANY(%s)",  # noqa: S608
                                 (self.project, ids))
                conn.cursor().executemany(
                    "INSERT INTO baton_pruned (project, task_id, through) VALUES (%s, %s, %s) "
                    "ON CONFLICT (project, task_id) "
                    "DO UPDATE SET through = GREATEST(baton_pruned.through, excluded.through)",
                    [(self.project, task_id, through or ended_before) for task_id, through in rows])
        return [task_id for task_id, _ in rows]

    def forget_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        if not checkpoint_ids:
            return 0
        with self._transaction() as conn:
            return conn.execute("DELETE FROM baton_events WHERE project = %s AND type = 'checkpoint_taken' "
                                "AND body ->> 'checkpoint_id' = ANY(%s)", (self.project, list(checkpoint_ids))).rowcount

    def held_events(self, event_ids: Sequence[str]) -> Found[set[str]] | Unavailable:
        return self._found("SELECT event_id FROM baton_events WHERE project = %s AND event_id = ANY(%s::uuid[])",
                           (self.project, list(event_ids)), lambda rows: {str(event_id) for (event_id,) in rows},
                           catch_up=False)

    def pruned(self) -> Found[set[str]] | Unavailable:
        return self._found("SELECT task_id FROM baton_pruned WHERE project = %s", (self.project,),
                           lambda rows: {task_id for (task_id,) in rows}, catch_up=False)

    def projects(self) -> Found[list[str]] | Unavailable:
        return self._found("SELECT DISTINCT project FROM baton_sessions ORDER BY project", (),
                           lambda rows: [project for (project,) in rows], catch_up=False, scope=ALL_PROJECTS)

    def describe(self) -> dict[str, str]:
        with self._transaction() as conn:
            version, sessions = _one(conn.execute("SELECT current_setting('server_version'), count(*) "
                                                  "FROM baton_sessions"))
        return {"backend": "postgresql", "location": _where(self.url), "version": f"PostgreSQL {version}",
                "size": f"{sessions} sessions"}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _cursor_noting(heard: Callable[[], None]) -> type[psycopg.Cursor]:
    """psycopg's cursor, calling heard at each statement's start and end: what cuts a server
    that goes silent (PostgresSessionStore._transaction)."""
    import psycopg

    class Cursor(psycopg.Cursor):
        def execute(self, *args: Any, **kwargs: Any) -> Any:
            heard()
            try:
                return super().execute(*args, **kwargs)
            finally:
                heard()

        def executemany(self, *args: Any, **kwargs: Any) -> None:
            heard()
            try:
                super().executemany(*args, **kwargs)
            finally:
                heard()

    return Cursor


def _held(rows: list[Any]) -> list[tuple[str, tuple[ListedLease, ...]]]:
    """The unreleased leases of each row of _LEASES_NEAR or _LEASES_MEETING, by ticket."""
    return [(task_id, unreleased_leases(leases, releases, last)) for task_id, last, leases, releases in rows]


def _json_array(documents: Iterable[str]) -> str:
    """One JSON array of JSON documents."""
    return f"[{','.join(documents)}]"


def _one(cursor: psycopg.Cursor) -> tuple[Any, ...]:
    """The row of a statement that always returns one (an aggregate, an upsert's RETURNING)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreUnavailable(STORE, "PostgreSQL returned no row where one is certain")
    return row


def _where(url: str) -> str:
    """The server part of a URL, without credentials."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Error:  # an unparsable URL is reported by the connection attempt itself
        return "PostgreSQL"
    return f"PostgreSQL at {info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
