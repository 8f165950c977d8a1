"""What each agent session has been told and has changed, so that every signal is told
once per session and each end of turn records only what changed since the last.

`agent-sessions.db` in the data home keeps, per agent session id: the signal ids it was
told, per ticket when it last heard from Baton, and the dirty files its last end of turn
saw (only the hooks use it; a session's rows go when it ends, leftovers after a week). It
also keeps, per ticket and worktree, the heartbeat of the agent last working there, by
which `baton recover` tells an agent that is gone from one that runs; a heartbeat outlives
its session's end for a week. That Baton cannot record the session is told once per session
too, but marked outside the data home, which may be what is broken (trouble_first_told).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from contextlib import closing, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from baton import clock
from baton.sqlite import SqliteFile, guarded
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.skills.runtime.settings import Settings

STORE = Store.AGENT_SESSION_LOG
FILE = "agent-sessions.db"
KEEP = timedelta(days=7)

MIGRATIONS = [
    """
    CREATE TABLE told (
        agent_session TEXT NOT NULL,
        signal_id TEXT NOT NULL,
        told_at TEXT NOT NULL,
        PRIMARY KEY (agent_session, signal_id)
    ) WITHOUT ROWID;
    CREATE INDEX told_by_time ON told (told_at);
    CREATE TABLE heard (
        agent_session TEXT NOT NULL,
        task_id TEXT NOT NULL,
        heard_at TEXT NOT NULL,
        watermark TEXT,
        PRIMARY KEY (agent_session, task_id)
    ) WITHOUT ROWID;
    CREATE INDEX heard_by_time ON heard (heard_at);
    CREATE TABLE swept (
        agent_session TEXT NOT NULL,
        task_id TEXT NOT NULL,
        path TEXT NOT NULL,
        mtime REAL NOT NULL,
        swept_at TEXT NOT NULL,
        PRIMARY KEY (agent_session, task_id, path)
    ) WITHOUT ROWID;
    CREATE INDEX swept_by_time ON swept (swept_at);
    """,
    """
    CREATE TABLE heartbeats (
        task_id TEXT NOT NULL,
        worktree TEXT NOT NULL,
        agent_session TEXT NOT NULL,
        pid INTEGER NOT NULL,
        process_start TEXT,
        host TEXT,
        beat_at TEXT NOT NULL,
        PRIMARY KEY (task_id, worktree)
    ) WITHOUT ROWID;
    """,
]


# A NamedTuple: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Beat(NamedTuple):
    """One heartbeat row (baton.skills.core.interrupted.Heartbeat is made from it)."""

    task_id: str
    worktree: str
    agent_session: str
    pid: int
    process_start: str | None
    host: str | None
    at: datetime


class AgentSessions:
    def __init__(self, home: Path, *, timeout: float) -> None:
        self.path = home / FILE
        self._db = SqliteFile(self.path, MIGRATIONS, timeout=timeout)

    def untold(self, agent_session: str, signal_ids: Sequence[str]) -> list[str]:
        """The ids among signal_ids not yet told to agent_session, in their order."""
        if not signal_ids:
            return []
        with guarded(STORE, self.path):
            rows = self._db.conn().execute(
                "SELECT signal_id FROM told WHERE agent_session = ? AND signal_id IN (SELECT value FROM json_each(?))",
                (agent_session, json.dumps(list(signal_ids))))
            known = {signal_id for (signal_id,) in rows}
        return [s for s in signal_ids if s not in known]

    def told(self, agent_session: str, signal_ids: Sequence[str], at: datetime) -> None:
        """Record that agent_session was told signal_ids."""
        if not signal_ids:
            return
        with self._db.writing(STORE) as conn:
            conn.executemany("INSERT OR IGNORE INTO told (agent_session, signal_id, told_at) VALUES (?, ?, ?)",
                             [(agent_session, s, clock.to_text(at)) for s in signal_ids])

    def heard(self, agent_session: str, task_id: str, at: datetime, watermark: str | None) -> None:
        """Record that agent_session heard everything about task_id up to `at`, when the
        signal log's end was `watermark` (read before the signals were)."""
        with self._db.writing(STORE) as conn:
            conn.execute("INSERT INTO heard (agent_session, task_id, heard_at, watermark) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (agent_session, task_id) DO UPDATE SET heard_at = excluded.heard_at, "
                         "watermark = excluded.watermark",
                         (agent_session, task_id, clock.to_text(at), watermark))

    def last_heard(self, agent_session: str, task_id: str) -> tuple[datetime, str | None] | None:
        """When agent_session last heard about task_id, and the signal log's watermark then."""
        with guarded(STORE, self.path):
            row = self._db.conn().execute(
                "SELECT heard_at, watermark FROM heard WHERE agent_session = ? AND task_id = ?",
                (agent_session, task_id)).fetchone()
        return (clock.parse(row[0]), row[1]) if row else None

    def changed_since_sweep(self, agent_session: str, task_id: str, dirty: dict[str, float]) -> list[str]:
        """The paths of dirty ({path: mtime, -1 when deleted}) that are new or changed since
        the session's last recorded sweep of them."""
        with guarded(STORE, self.path):
            seen = dict(self._db.conn().execute("SELECT path, mtime FROM swept WHERE agent_session = ? AND task_id = ?",
                                                (agent_session, task_id)).fetchall())
        return [path for path, mtime in dirty.items() if seen.get(path) != mtime]

    def record_sweep(self, agent_session: str, task_id: str, swept: dict[str, float], at: datetime) -> None:
        """Record that the files of swept ({path: mtime}) were recorded as they are now."""
        if not swept:
            return
        when = clock.to_text(at)
        with self._db.writing(STORE) as conn:
            conn.executemany(
                "INSERT INTO swept (agent_session, task_id, path, mtime, swept_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (agent_session, task_id, path) DO UPDATE SET mtime = excluded.mtime, "
                "swept_at = excluded.swept_at",
                [(agent_session, task_id, path, mtime, when) for path, mtime in swept.items()])

    def beat(self, beat: Beat) -> None:
        """Record that beat's agent works on its ticket in its worktree now."""
        with self._db.writing(STORE) as conn:
            conn.execute(
                "INSERT INTO heartbeats (task_id, worktree, agent_session, pid, process_start, host, beat_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id, worktree) DO UPDATE SET "
                "agent_session = excluded.agent_session, pid = excluded.pid, "
                "process_start = excluded.process_start, host = excluded.host, beat_at = excluded.beat_at",
                (beat.task_id, beat.worktree, beat.agent_session, beat.pid, beat.process_start, beat.host,
                 clock.to_text(beat.at)))

    def heartbeats(self) -> list[Beat]:
        """Every heartbeat kept on this machine."""
        with guarded(STORE, self.path):
            rows = self._db.conn().execute("SELECT task_id, worktree, agent_session, pid, process_start, host, "
                                           "beat_at FROM heartbeats").fetchall()
        return [Beat(task_id, worktree, session, pid, started, host, clock.parse(at))
                for task_id, worktree, session, pid, started, host, at in rows]

    def forget(self, agent_session: str, *, now: datetime) -> None:
        """Drop the session's rows, and every row older than KEEP (sessions that never ended)."""
        cutoff = clock.to_text(now - KEEP)
        with self._db.writing(STORE) as conn:
            for table, column in (("told", "told_at"), ("heard", "heard_at"), ("swept", "swept_at")):
                conn.execute(f"DELETE FROM {table} WHERE agent_session = ? OR {column} < ?",  # noqa: S608 -- fixed names
                             (agent_session, cutoff))
            conn.execute("DELETE FROM heartbeats WHERE beat_at < ?", (cutoff,))

    def close(self) -> None:
        self._db.close()


def local_heartbeats(settings: Settings) -> list[Beat]:
    """The heartbeats the hooks kept in the data home (none when they kept nothing there)."""
    if not (settings.home / FILE).exists():  # reading creates nothing
        return []
    with closing(AgentSessions(settings.home, timeout=settings.store_timeout)) as sessions:
        return sessions.heartbeats()


def trouble_first_told(agent_session: str) -> bool:
    """Mark that agent_session is being told that Baton cannot record it; False if it was
    told already. When no mark can be made the answer is True: telling again beats silence."""
    try:
        handle = os.open(_trouble_mark(agent_session), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(handle)
    return True


def forget_trouble(agent_session: str) -> None:
    """Drop the session's mark (at its end), so that a resumed session is told again."""
    with suppress(OSError):
        _trouble_mark(agent_session).unlink(missing_ok=True)


def _trouble_mark(agent_session: str) -> Path:
    """The session's mark in $XDG_RUNTIME_DIR/baton, else in a directory of the user's own
    (mode 0700, checked, since the temporary directory is shared) under the temp directory."""
    import hashlib
    import tempfile

    runtime = os.environ.get("XDG_RUNTIME_DIR")
    directory = Path(runtime) / "baton" if runtime and os.path.isabs(runtime) else \
        Path(tempfile.gettempdir()) / f"baton-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    status = directory.lstat()
    if not directory.is_dir() or directory.is_symlink() or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise PermissionError(f"{directory} is not a private directory of this user")
    return directory / f"cannot-record-{hashlib.sha256(agent_session.encode()).hexdigest()[:32]}"
