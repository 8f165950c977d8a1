"""One conformance suite for every ConflictGraph backend (SQLite, and Bolt on Neo4j)."""

from datetime import UTC, datetime, timedelta

import pytest

from baton.files import FileRef
from baton.graph.base import ConflictSummary
from baton.outcome import Found, Unavailable

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
A, B = FileRef("github.com/acme/shop", "src/a.py"), FileRef("github.com/acme/shop", "src/b.py")
C = FileRef("", "/tmp/notes")


@pytest.fixture(params=["sqlite", "bolt"])
def graph(request, tmp_path):
    if request.param == "sqlite":
        from baton.graph.sqlite import SqliteConflictGraph

        backend = SqliteConflictGraph(tmp_path / "graph.db", timeout=2)
    else:
        from baton.graph.bolt import BoltConflictGraph

        backend = BoltConflictGraph(request.getfixturevalue("bolt_uri"), timeout=5)
    yield backend
    backend.close()


def test_overlaps_between_active_tickets_only(graph):
    graph.record("T-1", "active", [A, B, C], T0, session_id="s1")
    graph.record("T-2", "active", [A], T0)
    graph.record("T-3", "completed", [B], T0)
    graph.record("T-4", "active", [FileRef("github.com/other/repo", "src/a.py")], T0)
    shared = graph.shared_files("T-1")
    assert isinstance(shared, Found) and shared.value == {"T-2": [A]}
    assert graph.shared_files("T-2").value == {"T-1": [A]}
    assert graph.shared_files_of(["T-1", "T-2", "T-3"], among=True).value == {"T-1": {"T-2": [A]},
                                                                             "T-2": {"T-1": [A]}}
    assert graph.shared_files_of(["T-3", "T-4"]).value == {"T-3": {"T-1": [B]}}, "any ticket's active sharers"
    assert graph.shared_files_of(["T-1", "T-4"], among=True).value == {} and graph.shared_files_of([]).value == {}


def test_summaries_count_files_and_tickets_per_active_ticket(graph):
    graph.record("T-1", "active", [A, B, C], T0)
    graph.record("T-2", "active", [A, B], T0)
    graph.record("T-3", "active", [A], T0)
    graph.record("T-4", "completed", [A, B, C], T0)
    graph.record("T-5", "active", [FileRef("github.com/acme/shop", "src/alone.py")], T0)
    summaries = graph.conflict_summaries(sample=5)
    assert isinstance(summaries, Found) and summaries.value == {
        "T-1": ConflictSummary(files=2, tickets=2, sample=("T-2", "T-3")),
        "T-2": ConflictSummary(files=2, tickets=2, sample=("T-1", "T-3")),
        "T-3": ConflictSummary(files=1, tickets=2, sample=("T-1", "T-2")),
    }
    assert graph.conflict_summaries(sample=1).value["T-1"] == ConflictSummary(files=2, tickets=2, sample=("T-2",))
    assert graph.conflict_summaries(sample=3, task_ids=["T-3", "T-4", "T-5"]).value == {
        "T-3": ConflictSummary(files=1, tickets=2, sample=("T-1", "T-2"))}


def test_summaries_leave_expected_pairs_out(graph):
    graph.record("PARENT-1", "active", [A, B], T0)
    graph.record("FORK-1", "active", [A, B], T0)
    graph.record("OTHER-1", "active", [B], T0)
    summaries = graph.conflict_summaries(sample=3, expected=[("FORK-1", "PARENT-1")]).value
    assert summaries == {"PARENT-1": ConflictSummary(files=1, tickets=1, sample=("OTHER-1",)),
                         "FORK-1": ConflictSummary(files=1, tickets=1, sample=("OTHER-1",)),
                         "OTHER-1": ConflictSummary(files=1, tickets=2, sample=("FORK-1", "PARENT-1"))}


def test_summaries_follow_status_changes(graph):
    graph.record("T-1", "active", [A], T0)
    graph.record("T-2", "active", [A], T0)
    graph.record("T-2", "completed", [], T0)
    assert graph.conflict_summaries(sample=3).value == {}
    assert graph.shared_files("T-1").value == {}
    graph.record("T-2", "stalled", [], T0)
    assert graph.touch("T-2", [B], T0) is True
    assert graph.conflict_summaries(sample=3).value["T-1"] == ConflictSummary(files=1, tickets=1, sample=("T-2",))


def test_summaries_page_through_many_tickets(graph, monkeypatch):
    from baton.graph import bolt

    monkeypatch.setattr(bolt, "SUMMARY_PAGE", 3)  # the Bolt backend asks for pages of 3 tickets
    many = 3 * 2 + 2
    for n in range(many):
        graph.record(f"M-{n:04d}", "active", [A], T0)
    summaries = graph.conflict_summaries(sample=2).value
    assert len(summaries) == many
    assert summaries["M-0000"] == ConflictSummary(files=1, tickets=many - 1, sample=("M-0001", "M-0002"))


def test_shared_files_for_the_first_partners(graph):
    for other in ("T-3", "T-2", "T-4"):
        graph.record(other, "active", [A, B], T0)
    graph.record("T-1", "active", [A, B, C], T0)
    assert graph.shared_files("T-1", partners=2).value == {"T-2": [A, B], "T-3": [A, B]}
    assert sorted(graph.shared_files("T-1").value) == ["T-2", "T-3", "T-4"]


def test_touch_activates_stalled_and_unknown_tickets_but_not_completed_ones(graph):
    assert graph.touch("NEW-1", [A], T0) is True
    graph.record("S-1", "stalled", [], T0)
    assert graph.touch("S-1", [A], T0) is True
    graph.record("D-1", "completed", [], T0)
    assert graph.touch("D-1", [A], T0) is False
    assert sorted(graph.shared_files("NEW-1").value) == ["S-1"]


def test_writes_are_idempotent(graph):
    for _ in range(3):
        graph.record("T-1", "active", [A, A], T0 + timedelta(minutes=1), depends_on=["T-0"])
        graph.touch("T-2", [A], T0)
    assert graph.shared_files("T-1").value == {"T-2": [A]}
    assert graph.describe()["size"] in {"1 touches", "2 touches", "3 tasks"}


def test_an_unreachable_bolt_server_is_unavailable_quickly():
    import time

    from baton.graph.bolt import BoltConflictGraph
    from tests.servers.common import free_port

    graph = BoltConflictGraph(f"bolt://127.0.0.1:{free_port()}", timeout=1)
    started = time.monotonic()
    assert isinstance(graph.shared_files("T-1"), Unavailable)
    assert time.monotonic() - started < 5
    graph.close()


def test_forget_removes_pruned_tickets_and_their_overlaps(graph):
    graph.record("GONE-1", "completed", [A, B], T0, session_id="gone-session")
    graph.record("KEPT-1", "active", [A], T0)
    graph.record("KEPT-2", "active", [B], T0)
    graph.touch("GONE-1", [C], T0)
    graph.forget(["GONE-1", "NEVER-SEEN"])
    assert graph.touch("GONE-1", [A], T0) is True, "a forgotten ticket starts afresh"
    assert graph.shared_files("KEPT-1").value == {"GONE-1": [A]}
    graph.forget(["GONE-1"])
    assert graph.shared_files("KEPT-1").value == {} and graph.shared_files("KEPT-2").value == {}
    graph.forget([])


def test_an_embedded_graph_of_the_first_schema_keeps_its_overlaps(tmp_path):
    """Its tickets move to their repository's project (what a project was before projects
    could be named), where their overlaps hold as before; no other project sees them."""
    from baton.graph import sqlite as embedded
    from baton.graph.projects import ProjectGraph
    from baton.sqlite import SqliteFile

    older = SqliteFile(tmp_path / "graph.db", embedded.MIGRATIONS[:1], timeout=2)
    with older.conn() as conn:
        conn.executemany("INSERT INTO tasks VALUES (?, ?)",
                         [("T-1", "active"), ("T-2", "active"), ("T-3", "completed")])
        conn.executemany("INSERT INTO touches VALUES (?, ?, ?, ?)",
                         [(task, A.repo, A.path, "2026-11-01T12:00:00+00:00") for task in ("T-1", "T-2", "T-3")])
    older.close()
    graph = ProjectGraph(embedded.SqliteConflictGraph(tmp_path / "graph.db", timeout=2), A.repo)
    assert graph.shared_files("T-1").value == {"T-2": [A]}
    assert graph.conflict_summaries(sample=3).value == {"T-1": ConflictSummary(files=1, tickets=1, sample=("T-2",)),
                                                        "T-2": ConflictSummary(files=1, tickets=1, sample=("T-1",))}
    assert not graph.touch("T-3", [A], T0), "T-3 kept its status (completed), so a touch leaves it ended"
    assert graph.shared_files("T-1").value == {"T-2": [A]}
    other = ProjectGraph(graph.graph, "github.com/rival/shop")
    assert other.shared_files("T-1").value == {} and other.conflict_summaries(sample=3).value == {}
    graph.close()


def test_a_batch_write_is_the_writes_one_by_one(graph, tmp_path):
    """record_many (the projector's one write per batch) leaves what record() of each
    ticket would, and shared_files_of answers what shared_files() of each does."""
    from baton.graph.base import TicketRecord
    from baton.graph.sqlite import SqliteConflictGraph

    d = FileRef("github.com/acme/shop", "src/d.py")
    records = [TicketRecord("T-1", "active", [A, B, C], T0, session_id="s1", depends_on=["T-0"]),
               TicketRecord("T-2", "active", [A, d], T0 + timedelta(minutes=1), session_id="s2"),
               TicketRecord("T-3", "completed", [B], T0),
               TicketRecord("T-4", "active", [], T0),
               TicketRecord("T-5", "active", [d, B], T0 + timedelta(minutes=2))]
    one_by_one = SqliteConflictGraph(tmp_path / "one-by-one.db", timeout=2)
    try:
        for r in records:
            one_by_one.record(r.task_id, r.status, r.files, r.at, session_id=r.session_id, depends_on=r.depends_on)
        graph.record_many(records)
        graph.record_many(records)  # a replayed batch changes nothing
        tickets = [r.task_id for r in records] + ["T-404"]
        expected = {t: one_by_one.shared_files(t).value for t in tickets}
        assert {t: graph.shared_files(t).value for t in tickets} == expected
        assert graph.shared_files_of(tickets).value == {t: shared for t, shared in expected.items() if shared}
        assert graph.shared_files_of(tickets, among=True).value == one_by_one.shared_files_of(
            tickets, among=True).value
        assert graph.conflict_summaries(sample=3).value == one_by_one.conflict_summaries(sample=3).value
    finally:
        one_by_one.close()


def _profile(driver, statement: str, params: dict) -> tuple[int, list[str]]:
    """The db hits of one run of statement, and the operators its plan starts from."""
    def leaves(plan: dict) -> list[str]:
        children = plan.get("children", [])
        return [f"{plan['operatorType'].partition('@')[0]} {plan['args'].get('Details', '')}"] if not children else [
            leaf for child in children for leaf in leaves(child)]

    def hits(plan: dict) -> int:
        return plan.get("dbHits", 0) + sum(hits(child) for child in plan.get("children", []))

    with driver.session() as session:
        plan = session.run(f"PROFILE {statement}", params).consume().profile
    return hits(plan), leaves(plan)


@pytest.mark.parametrize("name", ["SHARED_FILES_OF_MANY", "SHARED_FILES_OF_FIRST", "PAIRS_AMONG",
                                  "SUMMARIES_OF", "SUMMARIES_PAGE"])
def test_bolt_project_reads_start_at_their_own_tickets(bolt_uri, name):
    """A project's read starts at its tickets (a unique key, or the range of its ids) and
    walks their touches: its cost stays the same when other projects add tickets. Planned
    on a small graph, as a new server's first reads are, a labelled partner let Neo4j start
    from the status index, every project's active tickets, and keep that plan."""
    import neo4j

    from baton.graph import bolt
    from baton.graph.base import TicketRecord
    from baton.graph.bolt import BoltConflictGraph, _split_credentials
    from baton.graph.projects import ProjectGraph

    backend = BoltConflictGraph(bolt_uri, timeout=30)
    ours = ProjectGraph(backend, "shop")
    others = [ProjectGraph(backend, name) for name in ("elsewhere", "tools")]  # sorting before ours, and after
    shared = [FileRef("github.com/acme/shop", f"src/s{n}.py") for n in range(3)]
    ours.record_many([TicketRecord(f"T-{n}", "active", [shared[n % 3], shared[(n + 1) % 3]], T0) for n in range(4)])
    tickets = [ours._in(f"T-{n}") for n in range(4)]
    after, before = bolt.id_range(ours._scope)
    params = {"task_id": tickets[0], "task_ids": tickets, "partners": 2, "expected": [], "sample": 3,
              "after": after, "before": before, "page": bolt.SUMMARY_PAGE, "scope": ours._scope}
    address, auth = _split_credentials(bolt_uri)
    try:
        with neo4j.GraphDatabase.driver(address, auth=auth) as driver:
            driver.execute_query("CALL db.clearQueryCaches()")  # planned now, on this small graph
            first, starts = _profile(driver, getattr(bolt, name), params)
            assert {start.split()[0] for start in starts} <= {"NodeUniqueIndexSeek", "NodeUniqueIndexSeekByRange",
                                                              "Unwind", "Argument"}, starts
            for chunk in range(4):  # 2,000 active tickets of other projects, overlapping among themselves
                others[chunk % 2].record_many([TicketRecord(f"O-{chunk}-{n}", "active", [FileRef(
                    "github.com/acme/elsewhere", f"src/o{n % 50}.py")], T0) for n in range(500)])
            hits, _ = _profile(driver, getattr(bolt, name), params)
    finally:
        backend.close()
    assert hits == first, f"{first} db hits, {hits} with other projects' 2,000 tickets"


def test_held_says_each_tickets_status_and_files(graph):
    """What `baton doctor --repair` compares with the registry; a project's view sees its own."""
    from baton.graph.projects import ProjectGraph

    graph.record("T-1", "active", [A, C], T0)
    graph.record("T-2", "completed", [], T0)
    assert graph.held(["T-1", "T-2", "T-9"]).value == {"T-1": ("active", {A.key, C.key}), "T-2": ("completed", set())}
    assert graph.held([]).value == {}
    assert graph.held_counts(["T-1", "T-2", "T-9"]).value == {"T-1": ("active", 2), "T-2": ("completed", 0)}
    assert graph.held_counts([]).value == {}
    shop = ProjectGraph(graph, "shop")
    shop.record("T-1", "stalled", [B], T0)
    assert shop.held(["T-1"]).value == {"T-1": ("stalled", {B.key})}
    assert shop.held_counts(["T-1", "T-2"]).value == {"T-1": ("stalled", 1)}


def test_touchers_are_the_other_active_tickets_of_each_file(graph):
    """What an edit is checked against before it happens: a file's active touchers, each with
    when it last touched it; a project's view sees its own tickets only."""
    from baton.graph.projects import ProjectGraph

    later = T0 + timedelta(minutes=5)
    graph.record("T-1", "active", [A], T0)
    graph.record("T-2", "active", [A, B], T0)
    graph.touch("T-2", [A], later)
    graph.record("T-3", "completed", [A, B], T0)
    found = graph.touchers([A, B, C], exclude="T-1")
    assert isinstance(found, Found) and found.value == {A: [("T-2", later)], B: [("T-2", T0)]}
    assert graph.touchers([A, A]).value == {A: [("T-1", T0), ("T-2", later)]}, "a file asked twice counts once"
    assert graph.touchers([]).value == {} and graph.touchers([C]).value == {}
    shop = ProjectGraph(graph, "shop")
    shop.record("T-9", "active", [A], T0)
    assert shop.touchers([A]).value == {A: [("T-9", T0)]}


def test_a_graph_from_before_loses_its_copy_of_the_leases(graph, tmp_path, request):
    """Leases live in the registry alone: an embedded graph drops the table it kept them in,
    a Bolt server its Lease nodes and HOLDS edges, and each keeps its tickets' overlaps."""
    if hasattr(graph, "path"):
        import sqlite3
        from contextlib import closing

        from baton.graph import sqlite as embedded
        from baton.sqlite import SqliteFile

        graph.close()
        older = SqliteFile(tmp_path / "old.db", embedded.MIGRATIONS[:-1], timeout=2)
        with older.conn() as conn:
            conn.execute("INSERT INTO leases VALUES ('T-1', 'L-1', ?, 'src/**', 1, NULL, 600, ?, 0, 0)",
                         (A.repo, T0.isoformat()))
        older.close()
        graph = embedded.SqliteConflictGraph(tmp_path / "old.db", timeout=2)
        graph.record("T-1", "active", [A], T0)
        with closing(sqlite3.connect(tmp_path / "old.db")) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "leases" not in tables and {"tasks", "touches"} <= tables
    else:
        from baton.graph import bolt

        graph.record("T-1", "active", [A], T0)
        graph._call(lambda tx: tx.run("MATCH (t:Task {task_id: 'T-1'}) CREATE (t)-[:HOLDS]->(:Lease {lease_id: 'L-1'}) "
                                      "WITH 1 AS one MATCH (m:BatonSchema) DETACH DELETE m").consume(), write=True)
        graph.close()
        graph = bolt.BoltConflictGraph(request.getfixturevalue("bolt_uri"), timeout=5)
        held = "MATCH (l:Lease) RETURN count(l) AS n"
        assert graph._call(lambda tx: tx.run(held).single(strict=True)["n"], write=False) == 0
    graph.record("T-2", "active", [A], T0)
    assert graph.shared_files("T-1").value == {"T-2": [A]}
    graph.close()


def test_touchers_under_a_path_start_are_the_active_tickets_there(graph):
    """What a lease may cover: the active tickets' touches of a repository's files under
    a path's start; a project's view sees its own tickets only."""
    from baton.graph.projects import ProjectGraph

    api, apiary = FileRef(A.repo, "src/api/db.py"), FileRef(A.repo, "src/apiary.py")
    elsewhere = FileRef("github.com/other/repo", "src/api/db.py")
    graph.record("T-1", "active", [api, apiary, A], T0)
    graph.record("T-2", "active", [api, elsewhere], T0)
    graph.record("T-3", "completed", [api], T0)
    found = graph.touchers_under(A.repo, "src/api/")
    assert isinstance(found, Found) and found.value == {"T-1": ["src/api/db.py"], "T-2": ["src/api/db.py"]}
    assert graph.touchers_under(A.repo, "src/api", exclude="T-2").value == {"T-1": ["src/api/db.py",
                                                                                    "src/apiary.py"]}
    assert graph.touchers_under(A.repo, "").value == {"T-1": ["src/a.py", "src/api/db.py", "src/apiary.py"],
                                                      "T-2": ["src/api/db.py"]}
    assert graph.touchers_under(A.repo, "tests/").value == {}
    shop = ProjectGraph(graph, "shop")
    shop.record("T-9", "active", [api], T0)
    assert shop.touchers_under(A.repo, "src/").value == {"T-9": ["src/api/db.py"]}


def _counted_now(graph) -> dict[str, tuple[int, int]]:
    """Every active ticket's conflicts counted from its touches (conflict_summaries of every
    ticket reads no kept count)."""
    return {task: (s.files, s.tickets) for task, s in graph.conflict_summaries(sample=0).value.items()}


def _files(n: int) -> list[FileRef]:
    return [FileRef("github.com/acme/shop", f"src/f{n}.py")]


def test_kept_counts_follow_every_kind_of_write(graph):
    """Touches, batch writes, ends, reopenings, stalls lifted by a touch and forgotten
    tickets each move the kept counts as a count from the touches would say, and each
    write replayed leaves them as they were."""
    from baton.graph.base import TicketRecord
    from baton.graph.sqlite import SqliteConflictGraph

    if isinstance(graph, SqliteConflictGraph):
        assert graph.counted(), "a new embedded graph keeps its counts from the start"
    d, e = _files(4)[0], _files(5)[0]
    writes = [
        lambda: graph.record("K-1", "active", [A, B, C], T0),
        lambda: graph.touch("K-2", [A], T0),
        lambda: graph.touch("K-2", [A, B], T0 + timedelta(minutes=1)),
        lambda: graph.record_many([TicketRecord("K-3", "active", [B, d], T0), TicketRecord("K-4", "active", [d], T0),
                                   TicketRecord("K-5", "completed", [A, d], T0)]),
        lambda: graph.record("K-1", "completed", [], T0),
        lambda: graph.record("K-6", "stalled", [e, d], T0),
        lambda: graph.touch("K-6", [e], T0),
        lambda: graph.record("K-1", "active", [e], T0),
        lambda: graph.forget(["K-3"]),
        lambda: graph.record("K-4", "active", [A, B, C, d, e], T0),
    ]
    for write in writes:
        write()
        counts = graph.conflict_counts()
        assert isinstance(counts, Found) and counts.value == _counted_now(graph)
        write()  # replayed at once: nothing moves
        assert graph.conflict_counts().value == counts.value
    assert graph.conflict_counts().value["K-4"] == (5, 3), "each of its files shared, with K-1, K-2 and K-6"


def test_kept_counts_end_with_their_tickets(graph):
    for n in range(4):
        graph.record(f"E-{n}", "active", [A, *_files(n)], T0)
    graph.record("E-9", "active", [B, *_files(0)], T0)
    assert graph.conflict_counts().value["E-0"] == (2, 4)
    graph.record("E-1", "completed", [], T0)
    graph.forget(["E-2"])
    graph.record("E-9", "stalled", [], T0)
    assert graph.conflict_counts().value == {"E-0": (1, 1), "E-3": (1, 1)} == _counted_now(graph)
    # Of given tickets (those in conflict among them), or at most so many of every one.
    assert graph.conflict_counts(["E-3", "E-1", "E-9", "NONE"]).value == {"E-3": (1, 1)}
    assert graph.conflict_counts([]).value == {}
    some = graph.conflict_counts(at_most=1).value
    assert len(some) == 1 and some.items() <= {"E-0": (1, 1), "E-3": (1, 1)}.items()
    graph.record("E-3", "completed", [], T0)
    assert graph.conflict_counts().value == {} == _counted_now(graph)


def test_summaries_of_given_tickets_read_the_kept_counts_forks_aside(graph):
    """A page's summaries: the kept counts, a few partners each, and a fork and its parent
    counted without their expected overlap, as the count of every ticket says."""
    graph.record("PARENT-1", "active", [A, B], T0)
    graph.record("FORK-1", "active", [A, B], T0)
    graph.record("OTHER-1", "active", [B], T0)
    for n in range(7):
        graph.record(f"WIDE-{n}", "active", [C], T0)
    expected = [("FORK-1", "PARENT-1")]
    every = graph.conflict_summaries(sample=3, expected=expected).value
    asked = ["PARENT-1", "FORK-1", "OTHER-1", "WIDE-0"]
    page = graph.conflict_summaries(sample=3, expected=expected, task_ids=asked).value
    assert {t: (s.files, s.tickets) for t, s in page.items()} == {
        t: (s.files, s.tickets) for t, s in every.items() if t in asked}
    assert page["FORK-1"] == every["FORK-1"] == ConflictSummary(files=1, tickets=1, sample=("OTHER-1",))
    assert page["OTHER-1"].sample == ("FORK-1", "PARENT-1")
    wide = page["WIDE-0"]
    assert wide.tickets == 6 and len(wide.sample) == 3 and set(wide.sample) < {f"WIDE-{n}" for n in range(1, 7)}
    assert graph.conflict_counts().value["FORK-1"] == (2, 2), "the kept counts hold the fork's overlap"


def test_kept_counts_stay_within_a_project(graph):
    from baton.graph.base import TicketRecord
    from baton.graph.projects import ProjectGraph

    ours, theirs = ProjectGraph(graph, "github.com/acme/shop"), ProjectGraph(graph, "github.com/rival/shop")
    ours.record("P-1", "active", [A], T0)
    ours.record("P-2", "active", [A], T0)
    theirs.record("P-1", "active", [A, B], T0)
    theirs.record("P-3", "active", [B], T0)
    assert ours.conflict_counts().value == {"P-1": (1, 1), "P-2": (1, 1)}
    assert theirs.conflict_counts().value == {"P-1": (1, 1), "P-3": (1, 1)}
    assert ours.conflict_summaries(sample=3, task_ids=["P-1"]).value == {
        "P-1": ConflictSummary(files=1, tickets=1, sample=("P-2",))}
    written = ours.record_many([TicketRecord("P-2", "active", [A, B], T0)])
    assert written in (None, ours.shared_files_of(["P-2"]).value), "the overlaps of its own project only"
    assert written is None or written == {"P-2": {"P-1": [A]}}


def test_an_embedded_graph_from_before_the_kept_counts_counts_on_read_until_recounted(tmp_path):
    """Its counts are not kept yet: reads count from the touches (as before) until a
    recount (doctor --repair, a projector's start), after which they read the kept ones."""
    from baton.graph import sqlite as embedded
    from baton.graph.projects import ProjectGraph
    from baton.sqlite import SqliteFile

    before = SqliteFile(tmp_path / "graph.db", embedded.MIGRATIONS[:4], timeout=2)
    with before.conn() as conn:
        conn.executemany("INSERT INTO tasks VALUES (?, ?)", [(f"{A.repo}\x1fT-{n}", "active") for n in range(3)])
        conn.executemany("INSERT INTO touches VALUES (?, ?, ?, ?, 1)",
                         [(f"{A.repo}\x1fT-{n}", A.repo, A.path, "2026-11-01T12:00:00+00:00") for n in range(3)])
    before.close()
    raw = embedded.SqliteConflictGraph(tmp_path / "graph.db", timeout=2)
    graph = ProjectGraph(raw, A.repo)
    assert not graph.counted()
    assert graph.conflict_counts().value == {f"T-{n}": (1, 2) for n in range(3)}, "counted as it reads"
    graph.record("T-3", "active", [A], T0)  # a write before the recount moves the counts it finds
    assert graph.conflict_summaries(sample=1, task_ids=["T-0"]).value == {
        "T-0": ConflictSummary(files=1, tickets=3, sample=("T-1",))}
    assert graph.recount() == 4 and graph.counted()
    assert graph.conflict_counts().value == {f"T-{n}": (1, 3) for n in range(4)} == _counted_now(graph)
    graph.close()


def test_kept_counts_after_random_batches_are_a_count_from_the_touches(graph):
    """Batches of tickets that share files among themselves and with tickets written
    before, in every status, some written twice in a batch, replayed and forgotten at
    random: the kept counts stay what a count from the touches says, and the overlaps a
    write answers are what a read of them says."""
    import random

    from baton.graph.base import TicketRecord
    from baton.graph.bolt import BoltConflictGraph

    rng = random.Random(28)
    files = [FileRef("github.com/acme/shop", f"src/r{n}.py") for n in range(6)]
    tickets = [f"R-{n}" for n in range(8)]
    answered = 0
    for _ in range(25):
        batch = rng.sample(tickets, rng.randint(1, 4))
        if rng.random() < 0.3:
            batch.append(rng.choice(batch))  # a ticket written twice in one batch: its last status holds
        written = graph.record_many([TicketRecord(task, rng.choice(["active", "active", "completed", "stalled"]),
                                                  rng.sample(files, rng.randint(0, 2)), T0) for task in batch])
        if written is not None:  # the overlaps the write read on its way are what a read answers
            assert written == graph.shared_files_of(batch).value
            answered += 1
        if rng.random() < 0.2:
            graph.touch(rng.choice(tickets), rng.sample(files, 1), T0)
        if rng.random() < 0.1:
            graph.forget([rng.choice(tickets)])
        assert graph.conflict_counts().value == _counted_now(graph)
    assert answered or not isinstance(graph, BoltConflictGraph), "a graph database answers the overlaps it read"
