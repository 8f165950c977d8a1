"""Retention: `baton gc` removes old ended sessions from every store, keeps everything an
active ticket needs, and a pruned ticket's replayed events bring nothing back."""

import json
from datetime import timedelta

from baton import clock
from baton.outcome import Found, NotFound
from baton.skills.core.commit import apply_events
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores
from baton.skills.services.gc import collect_garbage
from tests.stores import ticket_vectors


def test_gc_removes_old_ended_tickets_everywhere_and_keeps_active_ones(any_home, worktrees, cli):
    main, second = worktrees
    assert cli(main, "bind", "OLD-1")[0] == 0
    assert cli(main, "touch", "src/shared.py")[0] == 0
    assert cli(main, "decide", "use the ledger table for refunds")[0] == 0
    assert cli(main, "end", "--status", "completed")[0] == 0
    assert cli(second, "bind", "LIVE-1")[0] == 0
    assert cli(second, "touch", "src/shared.py")[0] == 0
    assert cli(second, "decide", "refunds go through the ledger")[0] == 0
    assert cli(main, "index")[0] == 0

    dry = json.loads(cli(main, "gc", "--dry-run", "--json")[1])
    assert dry["sessions"] == [], "nothing is old yet"

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        later = clock.now() + timedelta(days=91)
        assert collect_garbage(stores, dry_run=True, at=later).sessions == ["OLD-1"]
        assert isinstance(stores.registry.get("OLD-1"), Found), "a dry run removes nothing"
        report = collect_garbage(stores, at=later)
        assert report.sessions == ["OLD-1"] and report.decisions == 1 and not report.warnings
        assert stores.registry.get("OLD-1") == NotFound("OLD-1")
        assert isinstance(stores.registry.get("LIVE-1"), Found)
        assert stores.graph.shared_files("LIVE-1").value == {}
        assert ticket_vectors(stores.decision_index(), stores.project, "OLD-1") == {}
        assert ticket_vectors(stores.decision_index(), stores.project, "LIVE-1")
        assert collect_garbage(stores, at=later).sessions == [], "a second gc finds nothing more"
    finally:
        stores.close()
    resumed = json.loads(cli(second, "resume", "LIVE-1", "--json")[1])
    assert resumed["session"]["decisions"] and not resumed["conflicts"]
    assert all(d["task_id"] != "OLD-1" for d in resumed["related_decisions"])


def test_gc_gives_back_the_space_of_what_it_removed(home):
    """SQLite keeps a removed row's pages for its next rows: a gc that removed most of a
    file rebuilds it, so the data home shrinks (bench/retention.py measures a year's)."""
    import uuid

    from baton.registry.model import Bound, Ended, Status, StepCompleted

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        old = clock.now() - timedelta(days=200)
        events = []
        for n in range(300):
            common = {"task_id": f"OLD-{n}", "session_id": "s", "at": old}
            events += [Bound(event_id=uuid.uuid4(), **common, repo="r", worktree_path="/w"),
                       *(StepCompleted(event_id=uuid.uuid4(), **common, text=f"step {k} " + "x" * 200)
                         for k in range(5)),
                       Ended(event_id=uuid.uuid4(), **{**common, "at": old + timedelta(minutes=1)},
                             status=Status.completed)]
        stores.registry.append(events)
        stores.registry.append([Bound(event_id=uuid.uuid4(), task_id="LIVE-1", session_id="s", at=clock.now(),
                                      repo="r", worktree_path="/w")])
        registry = home / "registry.db"
        before = registry.stat().st_size + (home / "registry.db-wal").stat().st_size
        report = collect_garbage(stores)
        assert len(report.sessions) == 300 and report.reclaimed > 0, report
        after = registry.stat().st_size + (home / "registry.db-wal").stat().st_size
        assert after < before / 4, (before, after)
        assert isinstance(stores.registry.get("LIVE-1"), Found)
    finally:
        stores.close()
