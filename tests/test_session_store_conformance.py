"""One conformance suite for every SessionStore backend."""

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from baton.files import FileRef
from baton.outcome import Found, NotFound, Unavailable
from baton.registry.model import (
    Bound,
    DecisionRecorded,
    DependencyAdded,
    Ended,
    FilesTouched,
    NextActionSet,
    Phase,
    PhaseChanged,
    Status,
)
from tests.stores import record_touch

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


# What the backends' indexed reads must answer, from the validated sessions (a scan of them).
def scanned_sessions(store, include_inactive=False, task_ids=None):
    if task_ids is None:
        return store.list_sessions(include_inactive=include_inactive).value
    found = store.get_many(sorted(set(task_ids))).value.values()
    sessions = sorted((s for s in found if include_inactive or s.status.value == "active"), key=lambda s: s.task_id)
    return sorted(sessions, key=lambda s: s.last_activity, reverse=True)


def scanned_listed(store, include_inactive=False, task_ids=None):
    from baton.registry.base import listed_of

    return [listed_of(s) for s in scanned_sessions(store, include_inactive, task_ids)]


def scanned_order(store, include_inactive=False, offset=0, limit=None):
    from baton.registry.base import outline_of

    outlines = [outline_of(s) for s in scanned_sessions(store, include_inactive)]
    return [(o.task_id, o.status) for o in outlines][offset:None if limit is None else offset + limit]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        from baton.registry.sqlite import SqliteSessionStore

        backend = SqliteSessionStore(tmp_path / "registry.db", timeout=2, project="test")
    else:
        from baton.registry.postgres import PostgresSessionStore

        backend = PostgresSessionStore(request.getfixturevalue("postgres_url"), timeout=2, project="test")
    yield backend
    backend.close()


def event(kind, minutes, task="OMN-1", **fields):
    return kind(event_id=uuid.uuid4(), task_id=task, session_id="s", at=T0 + timedelta(minutes=minutes), **fields)


def test_append_get_and_replay(store):
    bound = event(Bound, 0, repo="r", worktree_path="/w")
    phase = event(PhaseChanged, 1, phase=Phase.implementing)
    decided = event(DecisionRecorded, 2, text="Use Postgres")
    first = store.append([bound, phase, decided])["OMN-1"]
    assert store.append([bound, phase, decided])["OMN-1"] == first, "replayed events change nothing"
    found = store.get("OMN-1")
    assert isinstance(found, Found) and found.value == first
    assert found.value.phase is Phase.implementing and [d.text for d in found.value.decisions] == ["Use Postgres"]
    assert [e.event_id for e in store.events("OMN-1").value] == [bound.event_id, phase.event_id, decided.event_id]
    assert store.get("OMN-404") == NotFound("OMN-404")


def test_a_batch_view_holds_the_batch_not_the_history_and_a_redacted_ticket_whole(store):
    """append(whole=False), as the projection reads its tickets: every field but the lists a
    history grows, and of the decisions only the batch's own (a replayed one too); a ticket
    the batch redacts comes whole, as the whole answer does."""
    from baton.registry.model import HISTORY_LISTS, Rewrite, SecretsRedacted, StepCompleted

    history = [event(Bound, 0, repo="r", worktree_path="/w"), event(DecisionRecorded, 1, text="Use Postgres"),
               event(FilesTouched, 2, files=[FileRef("r", "a.py")]), event(StepCompleted, 3, text="schema"),
               event(Bound, 0, task="OMN-2", repo="r", worktree_path="/w2"),
               event(DecisionRecorded, 1, task="OMN-2", text="token abc123")]
    store.append(history)
    batch = [event(DecisionRecorded, 4, text="Cache the totals"), event(NextActionSet, 5, text="ship it"),
             history[1]]
    viewed = store.append(batch, whole=False)["OMN-1"]
    whole = store.get("OMN-1").value
    assert viewed == whole.batch_view({"Cache the totals", "Use Postgres"})
    assert [d.text for d in viewed.decisions] == ["Use Postgres", "Cache the totals"]
    assert all(not getattr(viewed, name) for name in HISTORY_LISTS)
    assert (viewed.next_action, viewed.status, viewed.repo) == ("ship it", whole.status, "r")
    assert store.append(batch, whole=False)["OMN-1"] == viewed, "a replayed batch answers the same"
    redaction = event(SecretsRedacted, 1, task="OMN-2", rewrites=[Rewrite(
        event_id=history[5].event_id, event_type="decision_recorded", field="text", text="token [redacted]")])
    redacted = store.append([redaction, event(NextActionSet, 6, task="OMN-2", text="rotate")], whole=False)
    assert redacted["OMN-2"] == store.get("OMN-2").value
    assert [d.text for d in redacted["OMN-2"].decisions] == ["token [redacted]"]


def test_pending_touches_are_projected_before_the_next_read(store):
    store.append([event(Bound, 0, repo="r", worktree_path="/w")])
    touch = str(uuid.uuid4())
    record_touch(store, "OMN-1", "s", T0 + timedelta(minutes=5), [FileRef("r", "a.py"), FileRef("r", "b.py")],
                        event_id=touch)
    record_touch(store, "OMN-1", "s", T0 + timedelta(minutes=3), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    session = store.get("OMN-1").value
    assert sorted(session.files) == ["r:a.py", "r:b.py"]
    assert session.files["r:a.py"].last_at == T0 + timedelta(minutes=5)
    assert session.last_activity == T0 + timedelta(minutes=5)
    record_touch(store, "OMN-1", "s", T0 + timedelta(minutes=5), [FileRef("r", "a.py")], event_id=touch)
    assert store.get("OMN-1").value == session, "a replayed touch changes nothing"


def test_get_many_answers_as_each_get_with_pending_touches_projected(store):
    store.append([event(Bound, 0, repo="r", worktree_path="/w"),
                  event(Bound, 1, task="OMN-2", repo="r", worktree_path="/w2")])
    record_touch(store, "OMN-2", "s", T0 + timedelta(minutes=2), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    many = store.get_many(["OMN-1", "OMN-2", "OMN-404"]).value
    assert many == {"OMN-1": store.get("OMN-1").value, "OMN-2": store.get("OMN-2").value}
    assert sorted(many["OMN-2"].files) == ["r:a.py"]
    assert store.get_many([]).value == {}


def test_list_sessions_active_first_by_activity(store):
    store.append([event(Bound, 0, task="A-1", repo="r", worktree_path="/a"),
                  event(Bound, 5, task="B-1", repo="r", worktree_path="/b"),
                  event(Bound, 1, task="C-1", repo="r", worktree_path="/c"),
                  event(Ended, 2, task="C-1", status=Status.completed)])
    assert [s.task_id for s in store.list_sessions().value] == ["B-1", "A-1"]
    assert [s.task_id for s in store.list_sessions(include_inactive=True).value] == ["B-1", "C-1", "A-1"]


def test_an_unreachable_server_is_unavailable_within_the_timeout():
    from baton.registry.postgres import PostgresSessionStore
    from tests.servers.common import free_port

    store = PostgresSessionStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", timeout=1, project="test")
    started = time.monotonic()
    answer = store.get("OMN-1")
    assert isinstance(answer, Unavailable) and "PostgreSQL at 127.0.0.1" in answer.reason
    assert time.monotonic() - started < 4
    store.close()


def test_a_killed_server_is_unavailable_then_answers_again(postgres_server, postgres_url):
    from baton.registry.postgres import PostgresSessionStore

    store = PostgresSessionStore(postgres_url, timeout=1, project="test")
    store.append([event(Bound, 0, repo="r", worktree_path="/w")])
    postgres_server.kill()
    try:
        started = time.monotonic()
        assert isinstance(store.get("OMN-1"), Unavailable)
        assert time.monotonic() - started < 4
    finally:
        postgres_server.start()
    assert isinstance(store.get("OMN-1"), Found), "the same store object recovers without a restart"
    store.close()


def varied_events(task="OMN-7"):
    """Every event type, with ties (same instant), a stall, a completion and a reopen."""
    from baton.registry.model import (
        CheckpointTaken,
        CheckRecorded,
        ConstraintAdded,
        DependencyAdded,
        EvidenceRecorded,
        FailureRecorded,
        FilesTouched,
        GoalSet,
        HandoffVerified,
        HandoffWritten,
        NextActionSet,
        Provenance,
        RunStarted,
        StageRecorded,
        StepCompleted,
        WorkRemaining,
    )

    same = 4  # several events share this instant: the stamp's rank and event id order them
    return [
        event(Bound, 0, task, repo="r", worktree_path="/w", branch="main", agent="a"),
        event(FilesTouched, 1, task, files=[FileRef("r", "a.py"), FileRef("r", "b.py")]),
        event(PhaseChanged, same, task, phase=Phase.implementing),
        event(PhaseChanged, same, task, phase=Phase.reviewing),
        event(NextActionSet, same, task, text="first"),
        event(NextActionSet, same, task, text="second"),
        event(DecisionRecorded, 5, task, text="Use Postgres", context="writers"),
        event(DecisionRecorded, 6, task, text="Use Postgres", context="again"),
        event(StepCompleted, 7, task, text="schema"),
        event(FailureRecorded, 8, task, text="migration failed"),
        event(FilesTouched, 9, task, files=[FileRef("r", "a.py")]),
        event(DependencyAdded, 10, task, depends_on=["OMN-2", "OMN-1"]),
        event(Ended, 11, task, status=Status.stalled),
        event(FilesTouched, 12, task, files=[FileRef("r", "c.py")]),
        event(Ended, 13, task, status=Status.completed),
        event(Bound, 14, task, repo="r", worktree_path="/w2", branch="fix", reopens=True),
        # The work journal and handoffs.
        event(GoalSet, same, task, text="ship carts"),
        event(GoalSet, same, task, text="ship carts and payments"),
        event(ConstraintAdded, 15, task, text="no new services"),
        event(WorkRemaining, 15, task, text="migration"),
        event(EvidenceRecorded, 16, task, text="HEAD 1a2b3c", provenance=Provenance.observed),
        event(EvidenceRecorded, 16, task, text="HEAD 1a2b3c", provenance=Provenance.reported),
        event(CheckRecorded, 17, task, command="pytest -q", exit_status=1, summary="1 failed",
              provenance=Provenance.observed),
        event(CheckRecorded, 18, task, command="pytest -q", exit_status=0, summary="2 passed",
              provenance=Provenance.observed),
        event(CheckRecorded, 18, task, command="make lint", exit_status=None, provenance=Provenance.reported),
        event(HandoffWritten, 19, task, path="docs/handoffs/a.md", claims=4),
        event(HandoffWritten, 19, task, path="docs/handoffs/b.md", claims=5),
        event(HandoffVerified, 20, task, path="docs/handoffs/b.md", written_at=T0, verified=3, changed=1, stale=1),
        event(HandoffVerified, 21, task, path="docs/handoffs/b.md", verified=5),
        # Workflow stages: a register (the later transition wins, its evidence and history along).
        event(CheckRecorded, 22, task, command="pytest -q tests", exit_status=0, provenance=Provenance.observed,
              snapshot={"head": "1a2b3c4d", "changed": {"src/db.py": "ab12", "gone.py": None}}),
        event(StageRecorded, same, task, status="PLAN_READY", state={"status": "PLAN_READY", "next_stage": "implement"},
              history=[{"status": "PLAN_READY"}]),
        event(StageRecorded, 23, task, status="IMPLEMENTED", evidence={"kind": "artifact", "path": "plan.md"},
              state={"status": "IMPLEMENTED", "next_stage": "code-review"}, proofs={"plan": {"kind": "artifact"}},
              history=[{"status": "PLAN_READY"}, {"status": "IMPLEMENTED"}]),
        # Runs and checkpoints: two at one instant, and inherited journal entries.
        event(RunStarted, 0, task, run_kind="bind"),
        event(RunStarted, 14, task, run_kind="reopen", parent_run_id="r1"),
        event(RunStarted, 22, task, run_kind="fresh", parent_run_id="r2", base="c" * 40, environment="e" * 64),
        event(CheckpointTaken, 23, task, checkpoint_id="a" * 64, boundary="bind", base="c" * 40, staged_tree="d" * 40,
              worktree_tree="d" * 40, run_id="r3", repo="r", worktree_path="/w2"),
        event(CheckpointTaken, 23, task, checkpoint_id="b" * 64, boundary="stop", label="x", staged_tree="d" * 40,
              worktree_tree="f" * 40, environment="e" * 64, repo="r", worktree_path="/w2"),
        event(GoalSet, 24, task, text="ship carts", inherited_from="OMN-1"),
        event(ConstraintAdded, 24, task, text="inherited rule", inherited_from="OMN-1"),
        event(DecisionRecorded, 24, task, text="Use Kafka", inherited_from="OMN-1"),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_the_stored_projection_is_the_pure_fold_in_any_order(store, seed):
    import random

    from baton.registry.apply import apply_event

    events = varied_events()
    expected = None
    for item in events:
        expected = apply_event(expected, item)
    shuffled = events + events[:4]
    random.Random(seed).shuffle(shuffled)
    for item in shuffled:
        store.append([item])
    assert store.get("OMN-7").value == expected
    assert [s.task_id for s in store.list_sessions().value] == ["OMN-7"]


@pytest.mark.parametrize("seed", range(5))
def test_batches_store_the_pure_fold_whatever_their_cut(store, seed):
    """The projector appends a batch at a time (PostgreSQL folds each ticket's new events
    and merges the fold): batches cut anywhere, repeating events within and across them,
    two tickets interleaved, store what the events one by one would."""
    import random

    from baton.registry.apply import apply_event

    rng = random.Random(seed)
    events = varied_events() + [item.model_copy(update={"task_id": "OMN-8", "event_id": uuid.uuid4()})
                                for item in varied_events()]
    expected = {}
    for item in events:
        expected[item.task_id] = apply_event(expected.get(item.task_id), item)
    stream = events + rng.sample(events, 10)
    rng.shuffle(stream)
    settled = {}
    while stream:
        cut = rng.randint(1, 12)
        batch, stream = stream[:cut], stream[cut:]
        batch += rng.sample(batch, min(2, len(batch)))  # a redelivery repeats events within a batch
        answered = store.append(batch)
        assert set(answered) == {item.task_id for item in batch}, "every ticket of the batch is answered"
        settled |= answered
    assert settled == expected
    assert {task: store.get(task).value for task in expected} == expected


def test_a_bind_without_an_agent_keeps_the_recorded_one(store):
    named = event(Bound, 0, "OMN-9", repo="r", worktree_path="/w", agent="claude")
    unnamed = event(Bound, 5, "OMN-9", repo="r", worktree_path="/w2")
    store.append([unnamed])
    store.append([named])
    session = store.get("OMN-9").value
    assert (session.agent, session.worktree_path) == ("claude", "/w2")
    store.append([event(Bound, 6, "OMN-9", repo="r", worktree_path="/w2")])
    assert store.get("OMN-9").value.agent == "claude"


def test_the_signal_scope_is_the_sessions_with_its_pending_touches(store):
    """What the prompt hook reads (SessionStore.signal_scope) agrees with the full projection."""
    from baton.registry.base import SignalScope
    from baton.registry.model import DependencyAdded, FilesTouched
    from baton.registry.wire import event_adapter, event_body

    assert store.signal_scope("OMN-10") == NotFound("OMN-10")
    store.append([event(Bound, 0, "OMN-10", repo="r", worktree_path="/w"),
                  event(FilesTouched, 1, "OMN-10", files=[FileRef("r", "a.py")]),
                  event(DependencyAdded, 2, "OMN-10", depends_on=["OMN-9"])])
    record_touch(store, "OMN-10", "s", T0 + timedelta(minutes=3), [FileRef("r", "b.py"), FileRef("", "/tmp/c")],
                        event_id=str(uuid.uuid4()))
    decided = str(uuid.uuid4())
    store.append_body(decided, "OMN-10", T0 + timedelta(minutes=4), "decision_recorded", event_body(
        "decision_recorded", event_id=decided, task_id="OMN-10", session_id="s", at=T0 + timedelta(minutes=4),
        text="Use carts", context="", repo="r", inherited_from=None, replaces=[]))
    scope = store.signal_scope("OMN-10").value
    assert scope == SignalScope(T0, ("OMN-9",), (FileRef("", "/tmp/c"), FileRef("r", "a.py"), FileRef("r", "b.py")))
    session = store.get("OMN-10").value
    assert set(scope.files) == {FileRef(t.repo, t.path) for t in session.files.values()}
    assert store.signal_scope("OMN-10").value == scope, "the same once the pending events are projected"
    added = event(DependencyAdded, 5, "OMN-10", depends_on=["OMN-8"])
    store.append_body(str(added.event_id), "OMN-10", added.at, added.type, event_adapter().dump_json(added).decode())
    assert store.signal_scope("OMN-10").value.depends_on == ("OMN-8", "OMN-9"), "a pending dependency counts"


def test_status_follows_a_stall_and_later_activity(store):
    from baton.registry.model import FilesTouched

    store.append([event(Bound, 0, "OMN-8", repo="r", worktree_path="/w"),
                  event(Ended, 1, "OMN-8", status=Status.stalled)])
    assert store.list_sessions().value == []
    store.append([event(FilesTouched, 2, "OMN-8", files=[FileRef("r", "a.py")])])
    assert [s.status for s in store.list_sessions().value] == [Status.active]


def test_session_outlines_agree_with_the_sessions_and_their_pending_events(store):
    """What `baton recover` reads (SessionStore.session_outlines) is list_sessions' view,
    pending touches and a stall that later activity lifts included."""
    from baton.registry.base import SessionOutline, outline_of
    from baton.registry.model import StageRecorded
    from baton.registry.wire import event_adapter

    def outlines(include_inactive=False):
        return store.session_outlines(include_inactive=include_inactive).value

    def from_sessions(include_inactive=False):
        return [outline_of(s) for s in scanned_sessions(store, include_inactive)]

    store.append([event(Bound, 0, "OMN-20", repo="r", worktree_path="/a", branch="a", agent="claude"),
                  event(StageRecorded, 1, "OMN-20", status="IMPLEMENTED",
                        state={"status": "IMPLEMENTED", "next_stage": "code-review"}),
                  event(Bound, 2, "OMN-21", repo="r", worktree_path="/b", branch="b"),
                  event(PhaseChanged, 3, "OMN-21", phase=Phase.reviewing),
                  event(Bound, 4, "OMN-22", repo="r", worktree_path="/c"),
                  event(Ended, 5, "OMN-22", status=Status.stalled),
                  event(Bound, 6, "OMN-23", repo="r", worktree_path="/d"),
                  event(Ended, 7, "OMN-23", status=Status.completed)])
    assert outlines() == [
        SessionOutline("OMN-21", "active", "reviewing", "r", "/b", "b", None, T0 + timedelta(minutes=3), None, None),
        SessionOutline("OMN-20", "active", "planning", "r", "/a", "a", "claude", T0 + timedelta(minutes=1),
                       "IMPLEMENTED", "code-review")]
    assert outlines() == from_sessions()
    assert [o.task_id for o in outlines(True)] == ["OMN-23", "OMN-22", "OMN-21", "OMN-20"]
    assert outlines(True) == from_sessions(True)
    record_touch(store, "OMN-22", "s", T0 + timedelta(minutes=9), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    record_touch(store, "OMN-20", "s", T0 + timedelta(minutes=8), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    pending = outlines()
    assert [(o.task_id, o.status, o.last_activity) for o in pending] == [
        ("OMN-22", "active", T0 + timedelta(minutes=9)), ("OMN-20", "active", T0 + timedelta(minutes=8)),
        ("OMN-21", "active", T0 + timedelta(minutes=3))], "pending touches move the activity and lift the stall"
    assert pending == from_sessions(), "the same once the pending events are projected"
    moved = event(Bound, 10, "OMN-21", repo="r", worktree_path="/e", branch="e")
    store.append_body(str(moved.event_id), "OMN-21", moved.at, moved.type, event_adapter().dump_json(moved).decode())
    assert (outlines()[0].task_id, outlines()[0].worktree_path) == ("OMN-21", "/e"), "a pending bind is projected"


def test_prune_removes_old_ended_sessions_and_their_events_and_keeps_the_rest(store):
    def ended(task, minutes, status=Status.completed):
        return [event(Bound, minutes, task=task, repo="r", worktree_path=f"/{task}"),
                event(Ended, minutes + 1, task=task, status=status)]
    from baton.registry.model import RunStarted

    store.append([*ended("OLD-1", 0), *ended("OLD-2", 2, Status.stalled), *ended("NEEDED-1", 4),
                  *ended("PARENT-1", 5), *ended("RECENT-1", 600),
                  event(Bound, 0, task="LIVE-1", repo="r", worktree_path="/live"),
                  event(DependencyAdded, 1, task="LIVE-1", depends_on=["NEEDED-1"]),
                  event(Bound, 6, task="FORK-1", repo="r", worktree_path="/fork"),
                  event(RunStarted, 6, task="FORK-1", run_kind="fork", parent_run_id="r1", parent_task_id="PARENT-1")])
    cutoff = T0 + timedelta(hours=1)
    assert store.prune(cutoff, dry_run=True) == ["OLD-1", "OLD-2"]
    assert isinstance(store.get("OLD-1"), Found), "a dry run removes nothing"
    assert store.prune(cutoff) == ["OLD-1", "OLD-2"]
    assert store.get("OLD-1") == NotFound("OLD-1") and store.events("OLD-2").value == []
    kept = {s.task_id for s in store.list_sessions(include_inactive=True).value}
    assert kept == {"NEEDED-1", "PARENT-1", "RECENT-1", "LIVE-1", "FORK-1"}, \
        "an active ticket's dependency, an active fork's parent and recent ones stay"
    assert store.pruned().value == {"OLD-1", "OLD-2"}
    assert store.prune(cutoff) == [], "pruning again removes nothing more"


def test_a_pruned_tickets_old_events_are_not_taken_again_but_a_new_bind_is(store):
    old = [event(Bound, 0, task="GONE-1", repo="r", worktree_path="/g"), event(Ended, 1, task="GONE-1",
                                                                                   status=Status.completed)]
    store.append(old)
    store.prune(T0 + timedelta(hours=1))
    late_touch = event(FilesTouched, 0, task="GONE-1", files=[FileRef("r", "a.py")])
    assert store.append([*old, late_touch]) == {}, "a replay of pruned events brings nothing back"
    record_touch(store, "GONE-1", "s", T0, [FileRef("r", "b.py")], event_id=str(uuid.uuid4()))
    assert store.get("GONE-1") == NotFound("GONE-1")
    again = store.append([event(Bound, 60 * 24, task="GONE-1", repo="r", worktree_path="/g")])["GONE-1"]
    assert again.status is Status.active and not again.files


def test_postgresql_reads_back_times_in_utc_whatever_its_zone(postgres_url):
    """A list line's and an outline's times come from the server's columns: in the
    projections' own UTC, even where the database's time zone is another."""
    import psycopg
    from psycopg import sql

    from baton.registry.postgres import PostgresSessionStore

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        database = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(sql.SQL("ALTER DATABASE {} SET TimeZone = {}").format(sql.Identifier(database),
                                                                           sql.Literal("Asia/Tokyo")))
    store = PostgresSessionStore(postgres_url, timeout=2, project="test")
    try:
        store.append([event(Bound, 5, repo="r", worktree_path="/w")])
        [listed] = store.listed_sessions().value
        [outline] = store.session_outlines().value
        assert listed.outline.last_activity.isoformat() == (T0 + timedelta(minutes=5)).isoformat()
        assert outline.last_activity.isoformat() == (T0 + timedelta(minutes=5)).isoformat()
    finally:
        store.close()


def test_listed_sessions_are_what_the_validated_sessions_show(store):
    """What `baton list` reads (SessionStore.listed_sessions, without pydantic on SQLite) is
    what the validated sessions give: files newest first, the handoff verification, runs,
    the fork's parent, the checkpoint, the stage; pending touches included."""
    from baton.registry.model import RunStarted

    store.append(varied_events("OMN-7"))
    store.append([event(Bound, 30, "OMN-9", repo="r", worktree_path="/f"),
                  event(RunStarted, 30, "OMN-9", run_kind="fork", parent_run_id="r3", parent_task_id="OMN-7"),
                  event(FilesTouched, 31, "OMN-9", files=[FileRef("r", "z.py"), FileRef("r", "a.py")]),
                  event(Bound, 32, "OMN-10", repo="r", worktree_path="/g"),
                  event(Ended, 33, "OMN-10", status=Status.completed)])
    record_touch(store, "OMN-9", "s", T0 + timedelta(minutes=40), [FileRef("r", "b.py")], event_id=str(uuid.uuid4()))

    def listed(include_inactive=False):
        return store.listed_sessions(include_inactive=include_inactive).value

    by_task = {s.outline.task_id: s for s in listed()}
    assert list(by_task) == ["OMN-9", "OMN-7"]
    fork, varied = by_task["OMN-9"], by_task["OMN-7"]
    assert (fork.files, fork.fork_of, fork.runs, fork.checkpoint, fork.uses_stages) == (
        ("b.py", "a.py", "z.py"), "OMN-7", 1, None, False), "the pending touch is the newest, then by path"
    latest = store.get("OMN-7").value.checkpoint  # two at one instant: the event ids decide
    assert (varied.fork_of, varied.runs, varied.checkpoint, varied.uses_stages, varied.outline.stage) == (
        None, 3, (latest.id, latest.boundary), True, "IMPLEMENTED"), "a bind, a reopening and a fresh start: 3 runs"
    assert varied.handoff is not None and varied.handoff["held"] and varied.handoff["verified"] == 5
    assert listed() == scanned_listed(store)
    assert [s.outline.task_id for s in listed(True)] == ["OMN-9", "OMN-10", "OMN-7"]
    assert listed(True) == scanned_listed(store, include_inactive=True)
    assert store.listed_sessions(task_ids=["OMN-7", "OMN-10", "OMN-404"]).value == [by_task["OMN-7"]]
    assert store.listed_sessions(include_inactive=True, task_ids={"OMN-10", "OMN-9"}).value == [
        s for s in listed(True) if s.outline.task_id in {"OMN-10", "OMN-9"}]
    assert store.listed_sessions(task_ids=["OMN-9"]).value == scanned_listed(store, task_ids=["OMN-9"])


def test_the_session_order_is_the_listings_read_from_the_index(store):
    """What `baton list` pages by: each session's ticket and status in list_sessions'
    order, pending touches (which move the last activity, or lift a stall) projected first."""
    store.append([event(Bound, n, f"OMN-{n}", repo="r", worktree_path=f"/w{n}") for n in range(4)])
    store.append([event(Ended, 5, "OMN-2", status=Status.completed), event(Ended, 6, "OMN-3", status=Status.stalled)])
    record_touch(store, "OMN-0", "s", T0 + timedelta(minutes=9), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    record_touch(store, "OMN-3", "s", T0 + timedelta(minutes=8), [FileRef("r", "a.py")], event_id=str(uuid.uuid4()))
    order = store.session_order().value
    assert order == [("OMN-0", "active"), ("OMN-3", "active"), ("OMN-1", "active")]
    every = store.session_order(include_inactive=True).value
    assert every == [("OMN-0", "active"), ("OMN-3", "active"), ("OMN-2", "completed"), ("OMN-1", "active")]
    assert every == scanned_order(store, include_inactive=True)
    # Read a chunk at a time, and counted, from the same index.
    assert store.session_order(include_inactive=True, offset=1, limit=2).value == every[1:3]
    assert store.session_order(include_inactive=True, offset=3, limit=5).value == every[3:]
    assert store.session_order(offset=3, limit=1).value == []
    assert scanned_order(store, include_inactive=True, offset=1, limit=2) == every[1:3]
    assert (store.session_count().value, store.session_count(include_inactive=True).value) == (3, 4)
    assert len(scanned_order(store, include_inactive=True)) == 4



# Lease patterns of every form gitignore reads, each granted to one of four tickets; and
# files, some under them, some not.
LEASED = ["src/db/**", "src/db/", "/src/db.py", "src/db.py", "*.md", "docs/", "docs", "**/models/*.py",
          "src/*/user.py", "src/ui/*.py", "src/d?/x.py", "src/[dx]b/**", "lib/t1/**", "src\\ db/x", "/README.md",
          "src/ui", "lib/**/deep/*.py"]
CHECKED = ["src/db/models/user.py", "src/db.py", "README.md", "docs/guide.md", "a/docs/x.py", "src/ui/app.py",
           "src/d1/x.py", "lib/t1/m0.py", "src db/x", "src/xb/y", "other.py", "src", "src/db", "lib/a/b/deep/c.py",
           "src/ui/app.py/inner"]
ANYWHERE = ["**/models/*.py", "*.md", "docs", "docs/", "src\\ db/x"]  # anchored nowhere: read for every file


def _leased(store):
    """LEASED granted to OMN-0..3 in repository r; besides, a released lease, a lease of an
    ended ticket and one in repository q."""
    from baton.registry.model import LeaseGranted, LeaseReleased
    from baton.skills.core.path_patterns import normal_pattern

    assert [normal_pattern(p) for p in LEASED] == LEASED
    bound = [event(Bound, 0, f"OMN-{n}", repo="r", worktree_path=f"/w{n}") for n in range(5)]
    grants = [event(LeaseGranted, 1 + i, f"OMN-{i % 4}", repo="r", pattern=p, exclusive=i % 2 == 0, ttl_seconds=3600)
              for i, p in enumerate(LEASED)]
    released = event(LeaseGranted, 30, "OMN-1", repo="r", pattern="other.py", exclusive=True, ttl_seconds=3600)
    ended = event(LeaseGranted, 31, "OMN-4", repo="r", pattern="src/**", exclusive=True, ttl_seconds=3600)
    elsewhere = event(LeaseGranted, 32, "OMN-2", repo="q", pattern="src/**", exclusive=True, ttl_seconds=3600)
    store.append([*bound, *grants, released, ended, elsewhere,
                  event(LeaseReleased, 33, "OMN-1", lease_id=released.event_id, released_at=T0, by="OMN-1"),
                  event(Ended, 34, "OMN-4", status=Status.completed)])


def _near_is_the_scan(store):
    """leases_near of each of CHECKED (and of all) answers what the scan of every listed
    session answers, and holds every lease whose pattern matches the path."""
    from baton.registry.base import near_leases
    from baton.skills.core.path_patterns import matches

    def scanned(paths):
        return near_leases(((s.outline.task_id, s.leases) for s in scanned_listed(store)), "r", paths)

    every = [(s.outline.task_id, lease) for s in store.listed_sessions().value for lease in s.leases
             if lease.repo == "r"]
    assert sorted(lease.pattern for _, lease in every) == sorted(LEASED), "no released or ended lease, none of q"
    for path in CHECKED:
        found = store.leases_near("r", [path]).value
        assert found == scanned([path]), path
        assert {(t, lease.pattern) for t, lease in every if matches(lease.pattern, path)} <= {
            (t, lease.pattern) for t, lease in found}, path
    assert store.leases_near("r", CHECKED).value == scanned(CHECKED)
    holding = {task for task, _ in every}
    assert holding <= store.lease_holders().value <= holding | {"OMN-4"}, "the ended ticket's may be there"


def test_the_leases_near_a_file_are_the_scans_and_miss_none_that_covers_it(store):
    """SessionStore.leases_near reads through the lease anchors' index (a pattern's anchor
    leads every path it matches): only the leases that may cover the file, as the scan of
    every session finds them, pending activity included."""
    from baton.registry.base import ListedLease

    _leased(store)
    record_touch(store, "OMN-0", "s", T0 + timedelta(minutes=50), [FileRef("r", "x.py")], event_id=str(uuid.uuid4()))
    _near_is_the_scan(store)
    [lease_id] = [lease.lease_id for s in store.listed_sessions().value for lease in s.leases if lease.repo == "q"]
    assert sorted(lease.pattern for _, lease in store.leases_near("r", ["other.py"]).value) == ANYWHERE
    assert {(t, lease.ends) for t, lease in store.leases_near("r", ["lib/t1/a.py"]).value
            if lease.pattern == "lib/t1/**"} == {("OMN-0", T0 + timedelta(minutes=50, hours=1))}, \
        "a pending touch moves its ticket's leases' end"
    assert store.leases_near("q", ["src/a.py"]).value == [
        ("OMN-2", ListedLease("src/**", True, T0 + timedelta(minutes=32, hours=1), "q", None, None,
                              lease_id, T0 + timedelta(minutes=32)))]


# What claims ask about: LEASED, and patterns above, below and beside them.
CLAIMED = [*LEASED, "src/**/*.py", "src/db/models/user.py", "src", "lib/t1/deep/**", "lib/t2/**", "README.md",
           "src/ui/app.py", "**", "other.py", "srcx/**", "src/d1/x.py", "/src/db/"]


def _meeting_is_the_scan(store):
    """The leases append_unless hands a claim's decision are meeting_leases of every listed
    session's (pending events projected first), and hold every lease the claim overlaps; a
    refusal stores nothing."""
    from baton.registry.base import meeting_leases
    from baton.skills.core.path_patterns import overlap

    listed = [(s.outline.task_id, s.leases) for s in store.listed_sessions().value]
    every = [(task_id, lease) for task_id, leases in listed for lease in leases]
    for claimed in [[pattern] for pattern in CLAIMED] + [["lib/t1/**", "src/ui/*.py"], CLAIMED]:
        handed: list = []

        def refusal(near, handed=handed):
            handed.append(near)
            return "refused"

        assert store.append_unless([event(NextActionSet, 60, "OMN-0", text="never stored")], "r", claimed,
                                   refusal) == "refused"
        [near] = handed
        assert [task_id for task_id, _ in near] == sorted(task_id for task_id, _ in near), "by ticket"
        assert set(near) == set(meeting_leases(listed, "r", claimed)), claimed
        assert {(t, lease.pattern) for t, lease in every if lease.repo == "r"
                and any(overlap(lease.pattern, pattern) for pattern in claimed)} <= {
            (t, lease.pattern) for t, lease in near}, claimed
    assert store.get("OMN-0").value.next_action != "never stored", "a refusal stores nothing"


def test_a_claims_decision_reads_the_leases_it_may_overlap_and_misses_none(store):
    """append_unless reads through the lease anchors' index (two overlapping patterns have
    anchors one of which leads the other): only the leases a claim may overlap, as the scan
    of every session finds them, a pending touch's activity included."""
    _leased(store)
    record_touch(store, "OMN-0", "s", T0 + timedelta(minutes=50), [FileRef("r", "x.py")], event_id=str(uuid.uuid4()))
    _meeting_is_the_scan(store)
    handed: list = []
    store.append_unless([], "r", ["lib/t1/x.py"], lambda near: handed.append(near))
    assert sorted(lease.pattern for _, lease in handed[0]) == sorted([*ANYWHERE, "lib/t1/**", "lib/**/deep/*.py"])
    assert {lease.ends for t, lease in handed[0] if t == "OMN-0"} == {T0 + timedelta(minutes=50, hours=1)}, \
        "a pending touch moves its ticket's leases' end"


def test_leases_granted_before_the_anchors_are_found_as_before(store, request):
    """A store of the schema before the lease anchors: its leases get the empty anchor (read
    for every file, then matched) until their ticket is stored again; the answers are the
    scan's all along."""
    _leased(store)
    store.close()
    if request.node.callspec.params["store"] == "sqlite":
        import sqlite3

        from baton.registry import sqlite as embedded

        conn = sqlite3.connect(store.path)
        with conn:
            conn.execute("DROP TABLE lease_anchors")
            conn.execute(f"PRAGMA user_version = {len(embedded.MIGRATIONS) - 1}")
        conn.close()
        older = embedded.SqliteSessionStore(store.path, timeout=2, project="test")
    else:
        import psycopg

        from baton.registry import postgres as server

        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("DROP TABLE baton_lease_anchors")
            conn.execute("DELETE FROM baton_schema_migrations WHERE version = %s", (len(server.MIGRATIONS) - 1,))
        older = server.PostgresSessionStore(store.url, timeout=2, project="test")
    try:
        _near_is_the_scan(older)
        _meeting_is_the_scan(older)
        older.append([event(NextActionSet, 40, f"OMN-{n}", text="go on") for n in range(4)])
        _near_is_the_scan(older)
        _meeting_is_the_scan(older)
    finally:
        older.close()


def test_holder_notes_are_what_the_sessions_say(store):
    """What the check before an edit names of each holder (read without validating the
    sessions where the backend can) is what each validated session says."""
    from baton.registry.base import HolderNote

    store.append([event(Bound, 0, "OMN-1", repo="r", worktree_path="/a", branch="carts", agent="claude"),
                  event(NextActionSet, 1, "OMN-1", text="split the db module"),
                  event(Bound, 2, "OMN-2", repo="r", worktree_path="/b")])
    asked = ["OMN-2", "OMN-1", "OMN-404", "OMN-1"]
    assert store.holder_notes(asked).value == {"OMN-1": HolderNote("claude", "carts", "split the db module"),
                                               "OMN-2": HolderNote(None, None, None)}
    sessions = store.get_many(asked).value
    assert store.holder_notes(asked).value == {
        task: HolderNote(s.agent, s.branch, s.next_action) for task, s in sessions.items()}
