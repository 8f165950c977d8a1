"""SQLite connections shared by the embedded backends: WAL, bounded waits, explicit transactions.

Concurrency model: many agent processes of one user open the same files. WAL lets readers
run beside one writer; every write transaction starts with BEGIN IMMEDIATE so it takes the
write lock up front (a deferred transaction that upgrades later can fail at once with
"database is locked" instead of waiting), and busy_timeout bounds how long it waits.

Whose file: Baton marks its files (`PRAGMA application_id`) and creates each one complete
under a temporary name before it takes its place, so an empty file is never one of Baton's
(a disk that fills up midway leaves nothing behind). An existing file is used only when it
carries the mark, or is a file of an earlier Baton (no mark, Baton's tables at its
user_version), which gets the mark; any other file (empty, another application's
database, not a database at all) is reported unavailable and left untouched.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from baton.errors import StoreUnavailable, Untrusted
from baton.home import make_directory
from baton.trust import file_refusal

APPLICATION_ID = 0x4241544E  # "BATN", in the file header
_CREATED_TABLE = re.compile(r"CREATE (?:VIRTUAL )?TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)


def _open(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection to the existing file at path (mode=rw: opening never creates one); the
    timeout is its busy timeout (sqlite3_busy_timeout), every lock wait's bound."""
    uri = f"{path.absolute().as_uri()}?mode=rw"
    return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)


def _create(path: Path, migrations: Sequence[str]) -> None:
    """Build the database, marked and migrated, under a temporary name, then link it to
    path; if another process was first, its file stands."""
    import tempfile  # here, not at the top: only a new file needs it, and a hook's touch opens existing ones

    make_directory(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.new-")
    os.close(handle)
    try:
        conn = sqlite3.connect(temporary, isolation_level=None)  # nobody else knows this file yet
        try:
            # Nor can anyone read it half-built: no journal, no sync per step, one fsync before the link.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            with write_transaction(conn):
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            migrate(conn, migrations)
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        with open(temporary, "rb") as built:
            os.fsync(built.fileno())
        with suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        for leftover in (temporary, *(f"{temporary}{suffix}" for suffix in ("-journal", "-wal", "-shm"))):
            with suppress(FileNotFoundError):
                os.unlink(leftover)


def _check_owner(path: Path, found: os.stat_result) -> None:
    """Untrusted unless the database, and its write-ahead log and index beside it when
    present (they carry its pages too), are the user's own and writable by nobody else:
    another user's file would be read and written as ours (baton.trust)."""
    refusal = file_refusal(path, found)
    for suffix in ("-wal", "-shm"):
        if refusal is None:
            beside = Path(f"{path}{suffix}")
            with suppress(FileNotFoundError):
                refusal = file_refusal(beside, os.stat(beside))
    if refusal is not None:
        raise Untrusted(refusal)


def _identify(conn: sqlite3.Connection, migrations: Sequence[str]) -> tuple[bool, int]:
    """(whether the file is an earlier Baton's, without the mark; its schema version);
    DatabaseError unless it is Baton's."""
    application_id, version = conn.execute("SELECT * FROM pragma_application_id, pragma_user_version").fetchone()
    if application_id == APPLICATION_ID:
        return False, version
    if application_id != 0:
        raise sqlite3.DatabaseError(f"not a Baton database (application_id {application_id:#x}); left untouched")
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    created = {name for block in migrations[:version] for name in _CREATED_TABLE.findall(block)}
    if 1 <= version <= len(migrations) and created <= tables:
        return True, version
    what = "an empty SQLite database" if not tables else "an SQLite database without Baton's tables"
    raise sqlite3.DatabaseError(f"{what}, not Baton's; left untouched")


def connect(path: Path, migrations: Sequence[str], *, timeout: float) -> sqlite3.Connection:
    """Open Baton's database at path (created if missing) in WAL mode, migrated; every lock
    wait is bounded by timeout seconds. DatabaseError for a file that is not Baton's."""
    try:
        found = os.stat(path)
        empty = found.st_size == 0
    except (FileNotFoundError, NotADirectoryError):
        _create(path, migrations)  # or says which part of its directory is not one
        empty = False
    else:
        _check_owner(path, found)
    if empty:
        raise sqlite3.DatabaseError("empty file (0 bytes), not a Baton database; left untouched")
    conn = _open(path, timeout)
    try:
        # Whose file it is is read before anything is written to it.
        unmarked, version = _identify(conn, migrations)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives a process crash; only an OS crash can lose the last commits.
        conn.execute("PRAGMA synchronous = NORMAL")
        if unmarked:
            _mark(conn)
        if version != len(migrations):
            migrate(conn, migrations)
    except BaseException:
        conn.close()
        raise
    return conn


def _mark(conn: sqlite3.Connection) -> None:
    """Mark an earlier Baton's file as Baton's. Where that cannot be written now (a full
    disk, a busy writer), the file is recognised by its tables again next time."""
    with suppress(sqlite3.OperationalError), write_transaction(conn):
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


@contextmanager
def write_transaction(conn: sqlite3.Connection, *, begun: bool = False) -> Iterator[sqlite3.Connection]:
    """A write transaction, begun here unless the caller began it: committed when the block
    ends, rolled back when it raises."""
    if not begun:
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        # A COMMIT that failed (a full disk, say) may leave the transaction open.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def begin_within(conn: sqlite3.Connection, within: float, *, restore: float) -> bool:
    """BEGIN IMMEDIATE, waiting at most `within` seconds for another process's write lock;
    False, in no transaction, when that was not enough. The connection's busy timeout is
    `restore` seconds again afterwards."""
    conn.execute(f"PRAGMA busy_timeout = {int(within * 1000)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return False
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(restore * 1000)}")
    return True


def migrate(conn: sqlite3.Connection, migrations: Sequence[str]) -> None:
    """Apply migrations[v:] where v is the file's user_version; the list is append-only."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= len(migrations):
        return
    with write_transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(migrations):
            raise sqlite3.DatabaseError(
                f"schema version {version} is newer than this Baton knows ({len(migrations)})"
            )
        for statement_block in migrations[version:]:
            for statement in statement_block.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(migrations)}")


class SqliteFile:
    """One embedded store's database file: opened and migrated on first use, closed explicitly."""

    def __init__(self, path: Path, migrations: Sequence[str], *, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._migrations = migrations
        self._connection: sqlite3.Connection | None = None
        # Threads of a process share the connection (a read a command stopped waiting for
        # runs on in its own thread: baton.budget.side_by_side), and a connection holds one
        # transaction at a time: a second BEGIN fails "within a transaction".
        self._turn = threading.RLock()

    def conn(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = connect(self.path, self._migrations, timeout=self.timeout)
        return self._connection

    @contextmanager
    def writing(self, store: str) -> Iterator[sqlite3.Connection]:
        """One write transaction on the file; a driver or file-system error, the block's own
        included, raises StoreUnavailable naming the store and the file (as guarded does)."""
        with self.turn(store), guarded(store, self.path), write_transaction(self.conn()) as conn:
            yield conn

    @contextmanager
    def turn(self, store: str) -> Iterator[None]:
        """The connection to this thread alone for the block, waiting for another thread's
        statement or transaction at most the file's timeout (as for another process's lock)."""
        if not self._turn.acquire(timeout=self.timeout):
            raise StoreUnavailable(store, f"{self.path}: still in use by another thread of this process "
                                          f"after {self.timeout:g} s")
        try:
            yield
        finally:
            self._turn.release()

    def write_each(self, store: str, statement: str, rows: Sequence[Sequence[object]]) -> None:
        """statement once per row, in one write transaction (as writing); none without rows."""
        if rows:
            with self.writing(store) as conn:
                conn.executemany(statement, rows)

    def read(self, store: str, query: str, params: Sequence[object] | dict[str, object] = ()) -> list[Any]:
        """query's rows; StoreUnavailable for store when the file cannot be read."""
        with self.turn(store), guarded(store, self.path):
            return self.conn().execute(query, params).fetchall()

    def counted(self, store: str, query: str, params: Sequence[object] = ()) -> int:
        """The number query answers; 0 without creating a missing file."""
        return self.read(store, query, params)[0][0] if self.path.exists() else 0

    def describe(self, store: str, table: str) -> dict[str, str]:
        """What `baton doctor` shows for an embedded SQLite store; table is a fixed name."""
        rows = self.read(store, f"SELECT count(*) FROM {table}")[0][0]  # noqa: S608 -- a fixed name
        version = f"SQLite {sqlite3.sqlite_version}"
        return {"backend": "sqlite", "location": str(self.path), "version": version, "size": f"{rows} {table}"}

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@contextmanager
def guarded(store: str, path: Path) -> Iterator[None]:
    """Turn driver and file-system failures into StoreUnavailable naming the file."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreUnavailable(store, f"{path}: {exc}{_full_disk_hint(path, exc)}") from exc
    except OSError as exc:
        raise StoreUnavailable(store, f"{path}: {exc.strerror or exc}") from exc


def _full_disk_hint(path: Path, exc: sqlite3.Error) -> str:
    """SQLite says "disk I/O error" when a full disk keeps it from sizing its shared-memory
    file (every open of a WAL file needs one): say what the file system says."""
    if not (getattr(exc, "sqlite_errorname", None) or "").startswith("SQLITE_IOERR"):
        return ""
    try:
        full = os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return ""
    return " (no space left on device)" if full else ""


def scrub(path: Path, *, timeout: float, min_free: float = 0.0) -> int:
    """Rebuild one of Baton's files (VACUUM drops its free pages) and empty its WAL, when at
    least `min_free` of its pages are free; returns the bytes the file and its WAL shrank by.
    With min_free 0 it leaves no byte of removed or rewritten rows behind, in a free page or
    an earlier version of a page in the WAL (`baton redact --scan`); `baton gc` gives back
    the space of what it removed. Raises StoreUnavailable (another process holding a
    transaction open, a full disk)."""
    wal = path.with_name(f"{path.name}-wal")

    def on_disk() -> int:
        return sum(p.stat().st_size for p in (path, wal) if p.exists())

    with guarded("data home", path):
        if not path.exists():
            return 0
        before = on_disk()
        conn = _open(path, timeout)
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                return 0  # not Baton's: left alone
            free, pages = conn.execute("SELECT * FROM pragma_freelist_count(), pragma_page_count()").fetchone()
            if min_free and free < min_free * pages:
                return 0
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return max(before - on_disk(), 0)
