import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from baton import clock
from baton.files import WorktreeLocator
from baton.signals.model import Signal, SignalPayload, SignalType
from baton.skills.core.binding import place_of
from baton.skills.core.commit import apply_events
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores
from baton.skills.services.listing import list_sessions


def test_signals_need_an_emission_time_and_round_trip():
    fields = {"signal_id": uuid.uuid4(), "signal_type": "pr_merged", "task_id": "OMN-1", "session_id": "s",
              "repo": "github.com/a/b", "payload": {"pr_number": 47, "reason": "merged PR #47"}}
    with pytest.raises(ValidationError):
        Signal(**fields)
    signal = Signal(**fields, emitted_at=datetime(2026, 11, 1, tzinfo=UTC))
    assert Signal.model_validate(signal.model_dump(mode="json")) == signal
    assert signal.signal_type is SignalType.pr_merged and signal.payload == SignalPayload(pr_number=47,
                                                                                          reason="merged PR #47")
    with pytest.raises(ValidationError):
        Signal(**{**fields, "payload": {"surprise": 1}}, emitted_at=datetime(2026, 11, 1, tzinfo=UTC))


def test_signal_publication_is_idempotent(home):
    from baton.signals.sqlite import SqliteSignalBus

    bus = SqliteSignalBus(home / "signals.db", timeout=2, project="r")
    signal = Signal(signal_id=uuid.uuid4(), signal_type="rebase_needed", task_id="OMN-2", session_id="s", repo="r",
                    emitted_at=clock.now(), payload=SignalPayload(related_task_id="OMN-1", file_paths=["a.py"]))
    assert bus.publish([signal, signal]) == [True, False]
    assert bus.publish([signal]) == [False]
    about_one = bus.concerning(["task:OMN-1"], after=None, limit=10).value
    about_file = bus.concerning(["file:r:a.py"], after=None, limit=10).value
    assert about_one == about_file == [signal]
    assert bus.concerning(["task:OMN-1"], after=signal.emitted_at, limit=10).value == []
    bus.close()


def test_idle_sessions_are_marked_stale(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OLD-1")
    monkeypatch.setenv("BATON_STALE_AFTER", "2h")
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        now = clock.now()
        assert [line.stale for line in list_sessions(stores, at=now).lines] == [False]
        assert [line.stale for line in list_sessions(stores, at=now + timedelta(hours=3)).lines] == [True]
    finally:
        stores.close()
    assert "[stale]" not in cli(main, "list")[1]


def test_an_unavailable_registry_still_binds_locally(home, worktrees, cli):
    main, _ = worktrees
    home.mkdir(parents=True)
    (home / "registry.db").write_bytes(b"not a database" * 50)
    code, out, _ = cli(main, "resume", "OMN-9")
    assert code == 3 and out.startswith("Session registry unavailable: ")
    assert 'task_id: "OMN-9"' in (main / ".baton" / "active_session.yaml").read_text()
    assert place_of(main, WorktreeLocator()).root == main.resolve()


def test_ending_an_unknown_ticket_is_bad_input(home, worktrees, cli):
    main, _ = worktrees
    code, _, err = cli(main, "end", "NOPE-1")
    assert code == 2 and "nothing to end" in err


def test_a_ticket_sharing_a_file_with_many_is_counted_not_listed_in_full(home, worktrees, cli):
    """25 tickets on one file: list names five of each one's conflicts and counts 24;
    resume names 20 and says how many more."""
    import json

    from baton.files import FileRef
    from baton.skills.services.resume import CONFLICT_LIMIT

    main, _ = worktrees
    cli(main, "bind", "T-00")
    cli(main, "touch", "src/db.py")
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        repo = json.loads(cli(main, "resume", "T-00", "--json")[1])["session"]["repo"]
        shared = FileRef(repo, "src/db.py")
        now = clock.now()
        _active_tickets(stores, "T", repo, lambda n: (shared, now))
    finally:
        stores.close()
    rows = {row["task_id"]: row for row in json.loads(cli(main, "list", "--json")[1])}
    assert (rows["T-00"]["conflicting_tickets"], rows["T-00"]["conflicting_files"]) == (24, 1)
    assert rows["T-00"]["conflicts_with"] == ["T-01", "T-02", "T-03", "T-04", "T-05"]
    assert "CONFLICTS with T-00, T-01, T-02, T-03, T-04 and 19 more over 1 file" in cli(main, "list")[1]
    answer = json.loads(cli(main, "resume", "T-00", "--json")[1])
    assert len(answer["conflicts"]) == CONFLICT_LIMIT == 20 and answer["conflicts_more"] == 4
    assert "and 4 more tickets share files with this one" in cli(main, "resume", "T-00")[1]


def test_past_its_limit_the_list_shows_a_page_in_conflict_first(home, worktrees, cli):
    """25 tickets, the five oldest sharing a file: a page of 8 shows those five (newest
    first), then the three newest of the rest, and says how many there are in all;
    --limit 0 shows every one, newest first."""
    import json

    from baton.files import FileRef

    main, _ = worktrees
    cli(main, "bind", "P-00")
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        repo = stores.registry.get("P-00").value.repo
        start = clock.now() - timedelta(hours=1)
        _active_tickets(stores, "P", repo, lambda n: (FileRef(repo, "src/db.py" if n <= 5 else f"src/own{n}.py"),
                                                      start + timedelta(minutes=n)))
    finally:
        stores.close()
    code, out, err = cli(main, "list", "--json", "--limit", "8")
    assert code == 0, err
    rows = json.loads(out)
    assert [row["task_id"] for row in rows] == ["P-05", "P-04", "P-03", "P-02", "P-01", "P-00", "P-24", "P-23"]
    assert [row["conflicting_tickets"] for row in rows[:5]] == [4] * 5 and rows[5]["conflicting_tickets"] == 0
    assert rows[0]["conflicts_with"] == ["P-01", "P-02", "P-03", "P-04"]
    assert "8 of 25 sessions shown (in conflict first, then newest); --limit N shows N, --limit 0 every one" in err
    assert "8 of 25 sessions shown" in cli(main, "list", "--limit", "8")[1]
    # More tickets in conflict than the page reads at once: each chunk of the order, newest
    # first, is asked about, through the twenty quiet ones.
    assert [row["task_id"] for row in json.loads(cli(main, "list", "--json", "--limit", "2")[1])] == ["P-05", "P-04"]
    every = json.loads(cli(main, "list", "--json", "--limit", "0")[1])
    assert [row["task_id"] for row in every][:3] == ["P-00", "P-24", "P-23"] and len(every) == 25
    assert {row["task_id"]: row["conflicting_tickets"] for row in every if row["conflicting_tickets"]} == {
        f"P-{n:02d}": 4 for n in range(1, 6)}
    assert "sessions shown" not in cli(main, "list")[2], "25 is within the default page"
    code, _, err = cli(main, "list", "--limit", "-1")
    assert code == 2 and "--limit" in err


def _active_tickets(stores, prefix, repo, touched):
    """Tickets {prefix}-01 .. {prefix}-24 bound and active, each touching the file touched(n) gives at its time."""
    from baton.registry.model import Bound, FilesTouched

    for n in range(1, 25):
        file, at = touched(n)
        common = {"task_id": f"{prefix}-{n:02d}", "session_id": "s", "at": at}
        stores.registry.append([Bound(event_id=uuid.uuid4(), repo=repo, worktree_path=f"/w/{n}", **common),
                                FilesTouched(event_id=uuid.uuid4(), files=[file], **common)])
        stores.graph.record(f"{prefix}-{n:02d}", "active", [file], at)
