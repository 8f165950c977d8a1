"""The production conflict graph: Memgraph (or any Bolt server) through the `neo4j` driver.

Nodes: Repository {name}, Task {task_id, status}, File {key, repo, path}, Session
{session_id}. Edges: (Task)-[:TOUCHES {last_at}]->(File), (File)-[:BELONGS_TO]->(Repository),
(Session)-[:WORKS_ON]->(Task), (Task)-[:DEPENDS_ON]->(Task).

Every statement is parameterised and written in the Cypher subset Memgraph and Neo4j
both accept; only the schema differs, so it is generated per dialect, detected from the
server's agent string. Writes are MERGE-only and idempotent, so a transaction that fails
with TransientError (Memgraph raises it on write-write conflicts) is run again, within what
the command's budget has left (baton.budget). The driver's own retries are off: they
would wait out a server that is gone, and log each attempt. Once connected, the driver
reads without a limit, so each call runs on a thread the caller stops waiting for when
the budget is spent: a server that stops answering (a paused JVM, a frozen host) costs
the budget, not the command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from baton import clock
from baton.budget import SLACK, AnyGate, OpenGate, within
from baton.errors import ServerUnreachable, StoreUnavailable
from baton.files import FileRef
from baton.graph.base import ConflictGraph, TicketRecord, count_moves, id_range, project_prefix
from baton.projects import SEPARATOR
from baton.retry import Backoff
from baton.store_names import Store

if TYPE_CHECKING:
    import neo4j

STORE = Store.CONFLICT_GRAPH
T = TypeVar("T")

# (label, property) pairs that identify a node; each gets a uniqueness constraint (or, on
# Memgraph, an index plus a constraint, since a Memgraph constraint creates no index).
_KEYS = [("Task", "task_id"), ("File", "key"), ("Repository", "name"), ("Session", "session_id")]
_LOOKUPS = [("Task", "status")]
# The marker nodes below, one each: MERGE makes one node only under a uniqueness constraint
# (without, processes meeting a new server together made one each).
_MARKERS = [("BatonSchema", "version"), ("BatonCounts", "kept")]


def schema_statements(dialect: str) -> list[str]:
    """Index and constraint DDL for 'memgraph' or 'neo4j'; each runs in its own auto-commit."""
    keys = _KEYS + _MARKERS
    if dialect == "memgraph":
        statements = [f"CREATE INDEX ON :{label}({prop})" for label, prop in keys + _LOOKUPS]
        statements += [f"CREATE CONSTRAINT ON (n:{label}) ASSERT n.{prop} IS UNIQUE" for label, prop in keys]
        return statements  # a Lease index left by schema 2 indexes no node after DROP_LEASES
    if dialect == "neo4j":
        statements = [f"CREATE CONSTRAINT baton_{label.lower()}_{prop} IF NOT EXISTS "
                      f"FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE" for label, prop in keys]
        statements += [f"CREATE INDEX baton_{label.lower()}_{prop} IF NOT EXISTS FOR (n:{label}) ON (n.{prop})"
                       for label, prop in _LOOKUPS]
        # Schema 4: leases live in the registry alone; the graph's copy goes.
        return [*statements, "DROP CONSTRAINT baton_lease_lease_id IF EXISTS"]
    raise ValueError(f"unknown Cypher dialect {dialect!r}")


def dialect_of(agent: str) -> str:
    """'memgraph' when the server says so in its Bolt agent string, else 'neo4j'."""
    return "memgraph" if "memgraph" in agent.lower() else "neo4j"


SCHEMA_VERSION = 4  # 2: Lease; 3: the kept conflict counts; 4: the markers unique and no Lease (DROP_LEASES)
SCHEMA_MARKED = "MATCH (m:BatonSchema {version: $version}) RETURN count(m) > 0 AS marked"
MARK_SCHEMA = "MERGE (m:BatonSchema {version: $version})"
# Markers a version before 4 made twice: all but the first (by id, the same for every
# process that runs this at once) go, before their constraint can be created.
DUPLICATE_MARKERS = """
MATCH (m) WHERE m:BatonSchema OR m:BatonCounts
WITH labels(m) AS kind, m.version AS version, m ORDER BY id(m)
WITH kind, version, collect(m) AS markers WHERE size(markers) > 1
UNWIND markers[1..] AS extra
DELETE extra
"""
# The copy of the leases schemas 2 and 3 kept, and their HOLDS edges: the registry holds leases.
DROP_LEASES = "MATCH (lease:Lease) DETACH DELETE lease"

# Conflict counts kept at write time on each Task (shared_files, sharers: ConflictGraph.
# conflict_counts), whole once a BatonCounts node says so: a graph with no active ticket
# when the schema came is counted from the start, one from before waits for recount().
COUNTED = "MATCH (c:BatonCounts) RETURN count(c) > 0 AS counted"
MARK_COUNTED = "MERGE (c:BatonCounts {kept: true})"
MARK_COUNTED_IF_EMPTY = """
OPTIONAL MATCH (t:Task {status: 'active'})
WITH count(t) AS active WHERE active = 0
MERGE (c:BatonCounts {kept: true})
"""
# Each ticket's status and every file it touches, before a write: with what the write sets,
# count_moves' `before` and `after` (a write only adds touches). One record (_collected).
STATUS_AND_FILES = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
OPTIONAL MATCH (t)-[:TOUCHES]->(f)
WITH task_id, t.status AS status, collect(f.key) AS files
RETURN collect([task_id, status, files]) AS rows
"""
# For each file each ticket touches, the other active tickets of its project touching it
# ([ticket, its project's prefix]: baton.graph.base.project_prefix), files no other touches
# left out, as one record (_collected): the counts' `others`, and what shared_files_of the
# tickets would answer after the write (record_many answers it, so a batch's overlaps cost
# the projector no read of their own).
_OF_ITS_PROJECT = """other.task_id <> ticket[0] AND other.task_id STARTS WITH ticket[1]
    AND (ticket[1] <> '' OR NOT other.task_id CONTAINS $separator)"""
TOUCHERS_OF_EACH = """
UNWIND $tickets AS ticket
MATCH (t:Task {task_id: ticket[0]})
MATCH (t)-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
WHERE other.status = 'active' AND """ + _OF_ITS_PROJECT + """
WITH ticket[0] AS task, f, collect(other.task_id) AS others
RETURN collect([task, f.key, f.repo, f.path, others]) AS rows
"""
# [ticket, files, tickets, whether they are its counts (else by how much they move)].
MOVE_COUNTS = """
UNWIND $moves AS move
MATCH (t:Task {task_id: move[0]})
SET t.shared_files = move[1] + CASE WHEN move[3] THEN 0 ELSE coalesce(t.shared_files, 0) END,
    t.sharers = move[2] + CASE WHEN move[3] THEN 0 ELSE coalesce(t.sharers, 0) END
"""
TICKETS_AFTER = """
MATCH (t:Task) WHERE t.task_id > $after
WITH t ORDER BY t.task_id LIMIT $page
RETURN t.task_id AS task
"""
RECOUNT = """
UNWIND $tickets AS ticket
MATCH (t:Task {task_id: ticket[0]})
OPTIONAL MATCH (t)-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
WHERE t.status = 'active' AND other.status = 'active' AND """ + _OF_ITS_PROJECT + """
WITH t, count(DISTINCT f) AS files, count(DISTINCT other) AS tickets
SET t.shared_files = files, t.sharers = tickets
"""
# Reads of a row per ticket answer one record, `rows`, a list of lists (_collected): the
# driver handles a record in about 45 µs, so 10,000 records took 450 ms and one record of
# the same 10,000 rows 67 ms (a warm Neo4j 5, here).
_KEPT_MATCH = """
MATCH (t:Task)
WHERE t.task_id > $after AND t.task_id < $before AND t.status = 'active' AND t.shared_files > 0
"""
KEPT = _KEPT_MATCH + "RETURN collect([t.task_id, t.shared_files, t.sharers]) AS rows"
KEPT_FIRST = _KEPT_MATCH + "WITH t LIMIT $at_most RETURN collect([t.task_id, t.shared_files, t.sharers]) AS rows"
KEPT_OF = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
WHERE coalesce(t.status, '') = 'active'
RETURN collect([t.task_id, coalesce(t.shared_files, 0), coalesce(t.sharers, 0)]) AS rows
"""

# A stalled or never-seen ticket becomes active when it touches a file; completed stays.
ACTIVATE = """
MERGE (t:Task {task_id: $task_id})
SET t.status = CASE WHEN t.status IS NULL OR t.status IN ['stalled', 'unknown'] THEN 'active' ELSE t.status END
RETURN t.status AS status
"""

# Ticket t's touch of file f at $at. A file is passed as [key, repo, path] (_file_rows):
# the driver packs parameters in Python, value by value, and a list of three strings packs
# in about half the time of a map of three, whose keys are strings too.
_TOUCH_F = """
MERGE (file:File {key: f[0]})
ON CREATE SET file.repo = f[1], file.path = f[2]
MERGE (t)-[touch:TOUCHES]->(file)
SET touch.last_at = CASE WHEN touch.last_at IS NULL OR touch.last_at < $at THEN $at ELSE touch.last_at END
FOREACH (_ IN CASE WHEN f[1] <> '' THEN [1] ELSE [] END |
    MERGE (repo:Repository {name: f[1]})
    MERGE (file)-[:BELONGS_TO]->(repo))
"""
ADD_TOUCHES = "MATCH (t:Task {task_id: $task_id})\nUNWIND $files AS f" + _TOUCH_F

# The batch form of a ticket's status, session and touches: one statement for a batch of
# tickets (a ticket without files ends at its UNWIND, after its status and session).
RECORD_TICKETS = """
UNWIND $tickets AS ticket
MERGE (t:Task {task_id: ticket.task_id})
SET t.status = ticket.status
FOREACH (session_id IN CASE WHEN ticket.session_id IS NULL THEN [] ELSE [ticket.session_id] END |
    MERGE (s:Session {session_id: session_id})
    MERGE (s)-[:WORKS_ON]->(t))
WITH t, ticket
UNWIND ticket.files AS f""" + _TOUCH_F.replace("$at", "ticket.at")

ADD_DEPENDENCIES_OF_MANY = """
UNWIND $tickets AS ticket
MATCH (t:Task {task_id: ticket.task_id})
UNWIND ticket.depends_on AS other_id
MERGE (other:Task {task_id: other_id})
ON CREATE SET other.status = 'unknown'
MERGE (t)-[:DEPENDS_ON]->(other)
"""

# The reads below start at the given tickets (unique key) and walk their own touches, so
# cost follows their files. The file and the other ticket carry no label (only a Task
# touches, only a File is touched): labelled, Neo4j may plan, on a small graph, to start
# from the status index too (every project's active tickets) and join, and keep that
# plan as the graph grows (tests/test_conflict_graph_conformance.py profiles them).
# A row per shared file and partner, as one record (_collected): the projector reads a
# batch's overlaps with it, thousands of rows where tickets share busy files.
SHARED_FILES_OF_MANY = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
WHERE other.task_id <> task_id AND other.status = 'active' AND other.task_id STARTS WITH $scope
WITH task_id AS task, other.task_id AS other, f.repo AS repo, f.path AS path
ORDER BY task, other, repo, path
RETURN collect([task, other, repo, path]) AS rows
"""

FORGET_TASKS = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
OPTIONAL MATCH (t)-[:TOUCHES]->(f:File)
OPTIONAL MATCH (s:Session)-[:WORKS_ON]->(t)
DETACH DELETE t
WITH collect(DISTINCT f) AS files, collect(DISTINCT s) AS sessions
FOREACH (f IN [f IN files WHERE NOT (f)<-[:TOUCHES]-()] | DETACH DELETE f)
FOREACH (s IN [s IN sessions WHERE NOT (s)-[:WORKS_ON]->()] | DETACH DELETE s)
"""

# The active tickets' touches of the files of $keys.
TOUCHERS = """
UNWIND $keys AS key
MATCH (f:File {key: key})<-[touch:TOUCHES]-(t:Task)
WHERE t.status = 'active' AND t.task_id STARTS WITH $scope
RETURN f.repo AS repo, f.path AS path, t.task_id AS task, touch.last_at AS at
ORDER BY repo, path, task
"""

# The active touches of a repository's files under a path prefix: a range of the unique
# file key (repository, a colon, the path; baton.files.FileRef.key).
UNDER = """
MATCH (f:File)<-[:TOUCHES]-(t)
WHERE f.key STARTS WITH $key AND f.repo = $repo AND t.status = 'active' AND t.task_id STARTS WITH $scope
RETURN t.task_id AS task, f.path AS path
ORDER BY path, task
"""

HELD = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
OPTIONAL MATCH (t)-[:TOUCHES]->(f)
RETURN t.task_id AS task, t.status AS status, f.repo AS repo, f.path AS path
ORDER BY task, repo, path
"""

HELD_COUNTS = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
OPTIONAL MATCH (t)-[:TOUCHES]->(f)
RETURN t.task_id AS task, t.status AS status, count(f) AS files
"""

# The first $partners other tickets by id, then the files each shares.
SHARED_FILES_OF_FIRST = """
MATCH (t:Task {task_id: $task_id})-[:TOUCHES]->()<-[:TOUCHES]-(other)
WHERE other.task_id <> $task_id AND other.status = 'active' AND other.task_id STARTS WITH $scope
WITH DISTINCT t, other ORDER BY other.task_id LIMIT $partners
MATCH (t)-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
RETURN other.task_id AS other, f.repo AS repo, f.path AS path
ORDER BY other, repo, path
"""

# SHARED_FILES_OF_MANY with both tickets active and among $task_ids (the map's pairs).
# The given ticket's status is read through coalesce (a Task always has one), which no
# index answers: `a.status = 'active'` lets Neo4j seek every project's active tickets in
# the status index and filter them by id, even past a WITH (it merges a plain WITH away).
PAIRS_AMONG = """
UNWIND $task_ids AS task_id
MATCH (a:Task {task_id: task_id})-[:TOUCHES]->(f)<-[:TOUCHES]-(b)
WHERE coalesce(a.status, '') = 'active' AND b.status = 'active' AND b.task_id <> a.task_id
    AND b.task_id IN $task_ids
WITH a.task_id AS task, b.task_id AS other, f.repo AS repo, f.path AS path
ORDER BY task, other, repo, path
RETURN collect([task, other, repo, path]) AS rows
"""

# One ticket's conflicts, aggregated on the server: partners sorted so that the slice
# holds the first by id (none for a ticket that is not active). Written once, used per
# page of tickets or for given tickets.
_SUMMARY_OF_T = """
OPTIONAL MATCH (t)-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
WHERE t.status = 'active' AND other.status = 'active' AND other.task_id <> t.task_id
    AND other.task_id STARTS WITH $scope
    AND NOT [t.task_id, other.task_id] IN $expected
WITH t, f, other ORDER BY other.task_id
WITH t, count(DISTINCT f) AS files, collect(DISTINCT other.task_id) AS others
WITH t.task_id AS task, files, size(others) AS tickets, others[..$sample] AS sample
ORDER BY task
RETURN collect([task, files, tickets, sample]) AS rows
"""

# A page of the project's tickets after $after by id, below $before (id_range): the server
# aggregates one page at a time, so its memory holds one page's partners, never every
# pair. The page is one range of the unique index, bounded on both sides: asked for active
# tickets, Neo4j may start from the status index (every project's active tickets); given
# `STARTS WITH $scope` as well, it may seek either, and a seek of `> $after` alone runs
# through every project sorting after it.
SUMMARIES_PAGE = """
MATCH (t:Task)
WHERE t.task_id > $after AND t.task_id < $before
WITH t ORDER BY t.task_id LIMIT $page
""" + _SUMMARY_OF_T

# An inactive ticket gets no partners (_SUMMARY_OF_T): no status here for the planner to seek.
SUMMARIES_OF = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})
WITH t
""" + _SUMMARY_OF_T
SUMMARY_PAGE = 500
# Up to $sample of each active ticket's partners, the first found (ConflictGraph._sample_rows):
# without SUMMARIES_OF's counts and order, a page of 1,000 tickets' samples took 215 ms
# against 280 (100,000 active tickets, bench/scale.py --servers).
SAMPLES_OF = """
UNWIND $task_ids AS task_id
MATCH (t:Task {task_id: task_id})-[:TOUCHES]->(f)<-[:TOUCHES]-(other)
WHERE t.status = 'active' AND other.status = 'active' AND other.task_id <> task_id
    AND other.task_id STARTS WITH $scope
WITH task_id, collect(DISTINCT other.task_id)[..$sample] AS partners
RETURN collect([task_id, partners]) AS rows
"""


def _split_credentials(uri: str) -> tuple[str, tuple[str, str] | None]:
    """The URI without user information, and (user, password) when it held them."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri, None
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host).geturl(), (unquote(parts.username or ""), unquote(parts.password or ""))


class BoltConflictGraph(ConflictGraph):
    def __init__(self, uri: str, *, timeout: float, auth: tuple[str, str] | None = None,
                 gate: AnyGate | None = None) -> None:
        """gate: the server's gate in the command's budget (baton.budget); without one,
        each call may wait `timeout` seconds. Credentials in the URI's user information
        become the driver's auth (it refuses them in the URI) and never reach a message."""
        self.uri, from_uri = _split_credentials(uri)
        self.timeout = timeout
        self._auth = auth or from_uri
        self._gate = gate or OpenGate(timeout)
        self._driver: neo4j.Driver | None = None
        self.dialect: str | None = None
        self.agent: str | None = None

    def _get_driver(self) -> neo4j.Driver:
        if self._driver is None:
            import logging  # here: a command that skips a server known to be down never loads it

            import neo4j

            # The driver logs what it retries; failures reach the caller as Unavailable.
            logging.getLogger("neo4j").addHandler(logging.NullHandler())
            left = self._gate.left()  # after the import, which the budget pays for too
            driver = neo4j.GraphDatabase.driver(
                self.uri, auth=self._auth, connection_timeout=left, connection_acquisition_timeout=left,
                max_transaction_retry_time=0, max_connection_pool_size=4, notifications_min_severity="OFF")
            try:
                self.agent = driver.get_server_info().agent
                self.dialect = dialect_of(self.agent)
                self._create_schema(driver, self.dialect)
            except BaseException:
                driver.close()
                raise
            self._driver = driver
        return self._driver

    def _create_schema(self, driver: neo4j.Driver, dialect: str) -> None:
        """Create the schema once per server: a marker node records that it exists, so a
        new process pays one read instead of one round trip per statement. Any number of
        processes may meet a new server at once: each runs every statement, and one that
        finds another's rule already made takes it for its own."""
        import neo4j

        def run(statement: str, **parameters: Any) -> neo4j.Record | None:
            # Waits stretched by up to twice themselves: processes that deadlocked together
            # (eight meeting a new server) try again apart.
            retry = Backoff(0.05, most=0.5, jitter=1.0, give_up_after=self.timeout)
            while True:
                try:
                    with driver.session() as session:
                        return session.run(neo4j.Query(statement, timeout=self.timeout), **parameters).single()
                except neo4j.exceptions.TransientError:  # a deadlock between two of them, among others
                    if not retry.wait():
                        raise
                except neo4j.exceptions.ClientError as exc:
                    if not _made_by_another(exc):
                        raise
                    return None

        if (marked := run(SCHEMA_MARKED, version=SCHEMA_VERSION)) is not None and marked["marked"]:
            return
        run(DUPLICATE_MARKERS)
        # Schema statements may not share a transaction with anything (Memgraph refuses
        # them in explicit transactions), so each is its own auto-commit query.
        for statement in schema_statements(dialect):
            run(statement)
        run(DROP_LEASES)
        run(MARK_COUNTED_IF_EMPTY)
        run(MARK_SCHEMA, version=SCHEMA_VERSION)

    def _call(self, work: Callable[[neo4j.Transaction], T], *, write: bool) -> T:
        """Run work(tx) in one transaction; again after a TransientError while the budget lasts."""
        with self._gate.call(STORE):
            import neo4j
            from neo4j.exceptions import DriverError, Neo4jError, ServiceUnavailable, SessionExpired, TransientError

            mode = neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS
            deadline = time.monotonic() + self._gate.left()  # after the import, as the driver's timeouts

            def attempts(driver: neo4j.Driver) -> T:
                retry = Backoff(0.05, factor=1.0, give_up_after=deadline - time.monotonic() - 0.2)
                while True:
                    try:
                        # The server's own transaction timeout bounds its work, not our wait:
                        # the store timeout, however little of the budget is left.
                        with driver.session(default_access_mode=mode) as session, \
                                session.begin_transaction(timeout=self.timeout) as tx:
                            result = work(tx)
                            tx.commit()
                            return result
                    except TransientError:
                        if not retry.wait():
                            raise

            try:
                # Connecting is bounded by the driver's own timeouts (the schema, made once
                # per server, by the server's), so a slow first use is not taken for a
                # silent server. Once connected, the driver reads without a limit, and a
                # server that stops answering (paused, frozen) ends no transaction timeout:
                # the transactions run on a thread the caller stops waiting for.
                driver = self._get_driver()
                return within(self._gate.left() + SLACK, lambda: attempts(driver))
            except TimeoutError as exc:
                raise ServerUnreachable(STORE, f"Bolt server at {self.uri}: {self._gate.no_answer()}") from exc
            except (ServiceUnavailable, SessionExpired, OSError) as exc:
                late = time.monotonic() >= deadline - 0.05
                heard = self._gate.no_answer() if late else _one_line(exc)
                raise ServerUnreachable(STORE, f"Bolt server at {self.uri}: {heard}") from exc
            except (Neo4jError, DriverError) as exc:
                raise StoreUnavailable(STORE, f"Bolt server at {self.uri}: {_one_line(exc)}") from exc

    def _record_rows(self, records: Sequence[TicketRecord]) -> list[tuple[str, str, str, str]] | None:
        """One transaction of one statement (and one more for dependencies, when the batch
        has any), in ticket and file order (so two writers of the
        same tickets take their locks in the same order), and the kept counts' reads and
        write; the overlaps when the counts read them (_move_counts)."""
        if not records:
            return None
        ordered = sorted(records, key=lambda r: r.task_id)
        tickets = [{"task_id": r.task_id, "status": r.status, "at": clock.to_text(r.at),
                    "session_id": r.session_id or None, "depends_on": list(r.depends_on),
                    "files": _file_rows(sorted(r.files, key=lambda f: f.key))}
                   for r in ordered]

        statuses = {r.task_id: r.status for r in ordered}  # a ticket written twice: its last, as the UNWIND
        added: dict[str, set[str]] = {}
        for r in ordered:
            added.setdefault(r.task_id, set()).update(f.key for f in r.files)

        def work(tx: neo4j.Transaction) -> list[tuple[str, str, str, str]] | None:
            known = _status_and_files(tx, sorted(statuses))
            tx.run(RECORD_TICKETS, tickets=tickets).consume()
            if any(t["depends_on"] for t in tickets):
                tx.run(ADD_DEPENDENCIES_OF_MANY, tickets=[t for t in tickets if t["depends_on"]]).consume()
            return _move_counts(tx, known, statuses, added)

        return self._call(work, write=True)

    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        def work(tx: neo4j.Transaction) -> str:
            known = _status_and_files(tx, [task_id])
            status = tx.run(ACTIVATE, task_id=task_id).single(strict=True)["status"]
            if files:
                tx.run(ADD_TOUCHES, task_id=task_id, at=clock.to_text(at), files=_file_rows(files)).consume()
            _move_counts(tx, known, {task_id: status}, {task_id: {f.key for f in files}})
            return status

        return self._call(work, write=True) == "active"

    def counted(self) -> bool:
        return bool(self._call(lambda tx: tx.run(COUNTED).single(strict=True)["counted"], write=False))

    def recount(self) -> int:
        """A page of SUMMARY_PAGE tickets per transaction (writes in between keep theirs
        moving, so a ticket counted before them stays right), then the mark."""
        after, done = "", 0
        while True:
            page = [task for (task,) in self._rows(TICKETS_AFTER, after=after, page=SUMMARY_PAGE)]
            if not page:
                break
            self._call(partial(_recount, page), write=True)
            done += len(page)
            after = page[-1]
        self._call(lambda tx: tx.run(MARK_COUNTED).consume(), write=True)
        return done

    def _kept_rows(self, task_ids: list[str] | None, scope: str = "", *,
                   at_most: int | None = None) -> list[tuple[str, int, int]] | None:
        def work(tx: neo4j.Transaction) -> list[tuple[str, int, int]] | None:
            if not tx.run(COUNTED).single(strict=True)["counted"]:
                return None
            if task_ids is not None:
                return _collected(tx, KEPT_OF, task_ids=task_ids)
            after, before = id_range(scope)
            if at_most is None:
                return _collected(tx, KEPT, after=after, before=before)
            return _collected(tx, KEPT_FIRST, after=after, before=before, at_most=at_most)

        return self._call(work, write=False)

    def forget(self, task_ids: Sequence[str]) -> None:
        def work(tx: neo4j.Transaction) -> None:
            _move_counts(tx, _status_and_files(tx, list(task_ids)), {}, {})  # none is active after
            tx.run(FORGET_TASKS, task_ids=list(task_ids)).consume()

        if task_ids:
            self._call(work, write=True)

    def _rows(self, statement: str, **parameters: Any) -> list[Any]:
        """The rows of a read statement, each a tuple."""
        return self._call(lambda tx: [tuple(r.values()) for r in tx.run(statement, **parameters)], write=False)

    def _shared_rows(self, task_id: str, partners: int, scope: str = "") -> list[tuple[str, str, str]]:
        return self._rows(SHARED_FILES_OF_FIRST, task_id=task_id, partners=partners, scope=scope)

    def _shared_rows_of(self, task_ids: list[str], among: bool, scope: str = "") -> list[tuple[str, str, str, str]]:
        statement = PAIRS_AMONG if among else SHARED_FILES_OF_MANY
        return self._call(lambda tx: _collected(tx, statement, task_ids=task_ids, scope=scope), write=False)

    def _toucher_rows(self, files: list[FileRef], scope: str = "") -> list[tuple[str, str, str, str]]:
        return self._rows(TOUCHERS, keys=sorted({f.key for f in files}), scope=scope)

    def _under_rows(self, repo: str, prefix: str, scope: str = "") -> list[tuple[str, str]]:
        return self._rows(UNDER, key=FileRef(repo=repo, path=prefix).key if repo else prefix, repo=repo, scope=scope)

    def _held_rows(self, task_ids: list[str]) -> list[tuple[str, str, str | None, str | None]]:
        return self._rows(HELD, task_ids=task_ids)

    def _held_count_rows(self, task_ids: list[str]) -> list[tuple[str, str, int]]:
        return self._rows(HELD_COUNTS, task_ids=task_ids)

    def _sample_rows(self, task_ids: list[str], sample: int, scope: str = "") -> dict[str, list[str]]:
        return dict(self._call(lambda tx: _collected(tx, SAMPLES_OF, task_ids=task_ids, sample=sample, scope=scope),
                               write=False))

    def _summary_rows(self, sample: int, expected: list[tuple[str, str]], task_ids: list[str] | None,
                      scope: str = "") -> list[tuple[str, int, int, list[str]]]:
        pairs = [list(pair) for pair in expected]

        def work(tx: neo4j.Transaction) -> list[tuple[str, int, int, list[str]]]:
            if task_ids is not None:
                return _collected(tx, SUMMARIES_OF, task_ids=task_ids, expected=pairs, sample=sample, scope=scope)
            rows: list = []
            after, before = id_range(scope)
            while True:
                page = _collected(tx, SUMMARIES_PAGE, after=after, before=before, page=SUMMARY_PAGE,
                                  expected=pairs, sample=sample, scope=scope)
                rows += [row for row in page if row[1]]
                if len(page) < SUMMARY_PAGE:
                    return rows
                after = page[-1][0]

        return self._call(work, write=False)

    def describe(self) -> dict[str, str]:
        ((tasks,),) = self._rows("MATCH (t:Task) RETURN count(t) AS n")
        return {"backend": f"bolt ({self.dialect})", "location": self.uri, "version": self.agent or "",
                "size": f"{tasks} tasks"}

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


def _recount(task_ids: list[str], tx: neo4j.Transaction) -> None:
    tx.run(RECOUNT, tickets=[[task, project_prefix(task)] for task in task_ids], separator=SEPARATOR).consume()


def _status_and_files(tx: neo4j.Transaction, task_ids: list[str]) -> dict[str, tuple[str | None, set[str]]]:
    """Each ticket's status and every file it touches (None and none for a ticket not kept)."""
    found: dict[str, tuple[str | None, set[str]]] = {task: (None, set()) for task in task_ids}
    for task, status, files in _collected(tx, STATUS_AND_FILES, task_ids=task_ids):
        found[task] = (status, set(files))
    return found


def _move_counts(tx: neo4j.Transaction, known: dict[str, tuple[str | None, set[str]]], statuses: Mapping[str, str],
                 added: Mapping[str, set[str]]) -> list[tuple[str, str, str, str]] | None:
    """Move the kept conflict counts for a write, in its transaction (count_moves): `known`,
    what _status_and_files answered before it; `statuses`, each ticket's status after it;
    `added`, the files it touched. Answers the rows of _shared_rows_of the tickets after
    the write, read on the way; None when the write moved no ticket's activity (not read)."""
    before = {task: files if status == "active" else set() for task, (status, files) in known.items()}
    after = {task: files | added.get(task, set()) if statuses.get(task) == "active" else set()
             for task, (_, files) in known.items()}
    if after == before:
        return None  # a write that moved no ticket's activity (most of them: a replay, a file touched again)
    others: dict[str, dict[str, list[str]]] = {task: {} for task in known}
    shared = []
    tickets = [[task, project_prefix(task)] for task in sorted(known)]
    for task, key, repo, path, touchers in _collected(tx, TOUCHERS_OF_EACH, tickets=tickets, separator=SEPARATOR):
        others[task][key] = touchers
        shared += [(task, other, repo, path) for other in touchers]
    counts, moves = count_moves(before, after, others)
    rows = [[task, f, t, False] for task, (f, t) in moves.items()]
    rows += [[task, f, t, True] for task, (f, t) in counts.items()]
    if rows:  # one statement (each a plan the server compiles once), in ticket order
        tx.run(MOVE_COUNTS, moves=sorted(rows)).consume()
    return sorted(shared)


def _collected(tx: neo4j.Transaction, statement: str, **parameters: Any) -> list[Any]:
    """The rows of a statement that answers them as one record's `rows`, each a tuple."""
    return [tuple(row) for row in tx.run(statement, **parameters).single(strict=True)["rows"]]


def _file_rows(files: Sequence[FileRef]) -> list[list[str]]:
    """Files as the write statements take them: [key, repo, path], plain strings."""
    return [[f.key, f.repo, f.path] for f in files]


def _made_by_another(exc: Exception) -> bool:
    """Whether a schema statement failed only because another process did its work
    first: Neo4j's IF NOT EXISTS is checked before its schema lock is taken, so two at
    once can both pass it (EquivalentSchemaRuleAlreadyExists and its kin)."""
    code = getattr(exc, "code", None) or ""
    return ((code.startswith("Neo.ClientError.Schema.") and code.endswith("AlreadyExists"))
            or code == "Neo.ClientError.Statement.EntityNotFound")  # a duplicate marker another removed


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
