"""The projection is pure and replay-safe: duplicates and any order give the same session."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from baton.files import FileRef
from baton.registry.apply import apply_event
from baton.registry.model import (
    Bound,
    DecisionRecorded,
    DecisionSuperseded,
    DependencyAdded,
    Ended,
    FailureRecorded,
    FilesTouched,
    NextActionSet,
    Phase,
    PhaseChanged,
    Status,
    StepCompleted,
)

DECISION = uuid.UUID(int=99)  # the decision the lifecycle's supersede links name
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def common(minutes: int, task: str = "OMN-1", session: str = "s1") -> dict:
    return {"event_id": uuid.uuid4(), "task_id": task, "session_id": session, "at": at(minutes)}


def project(events):
    session = None
    for event in events:
        session = apply_event(session, event)
    return session


def lifecycle_events():
    return [
        Bound(**common(0), repo="r", worktree_path="/w", branch="b"),
        FilesTouched(**common(1), files=[FileRef("r", "a.py"), FileRef("r", "b.py")]),
        PhaseChanged(**common(2), phase=Phase.implementing),
        DecisionRecorded(**{**common(3, session="s2"), "event_id": DECISION}, text="Use Postgres", context="writers"),
        FilesTouched(**common(4), files=[FileRef("r", "a.py")]),
        StepCompleted(**common(5), text="schema"),
        FailureRecorded(**common(6), text="migration failed"),
        NextActionSet(**common(7), text="fix migration"),
        DependencyAdded(**common(8), depends_on=["OMN-0"]),
        PhaseChanged(**common(9), phase=Phase.reviewing),
        DecisionSuperseded(**common(3), decision_event_id=DECISION, by_task_id="OMN-7", by_event_id=uuid.UUID(int=1)),
        DecisionSuperseded(**common(3), decision_event_id=DECISION, by_task_id="OMN-8", by_event_id=uuid.UUID(int=2)),
    ]


def test_applying_every_event_twice_changes_nothing():
    events = lifecycle_events()
    once = project(events)
    assert project(events + events) == once
    assert project([e for e in events for _ in (0, 1)]) == once


@pytest.mark.parametrize("seed", range(20))
def test_any_order_gives_the_same_projection(seed):
    import random

    events = lifecycle_events()
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    assert project(shuffled) == project(events)


def test_projection_fields():
    session = project(lifecycle_events())
    assert session.phase is Phase.reviewing
    assert session.status is Status.active
    assert sorted(session.files) == ["r:a.py", "r:b.py"]
    assert session.files["r:a.py"].last_at == at(4)
    assert [d.text for d in session.decisions] == ["Use Postgres"]
    assert session.session_ids == ["s1", "s2"]
    assert session.depends_on == ["OMN-0"]
    assert session.next_action == "fix migration"
    assert session.created_at == at(0) and session.last_activity == at(9)
    assert session.superseders("Use Postgres") == [("OMN-7", str(uuid.UUID(int=1))), ("OMN-8", str(uuid.UUID(int=2)))]


def test_an_older_phase_change_never_moves_the_phase_back():
    newer = PhaseChanged(**common(5), phase=Phase.reviewing)
    older = PhaseChanged(**common(1), phase=Phase.planning)
    assert project([newer, older]).phase is Phase.reviewing
    assert project([older, newer]).phase is Phase.reviewing


def test_completed_absorbs_later_activity_until_an_explicit_reopen():
    events = [Bound(**common(0), repo="r", worktree_path="/w"), Ended(**common(5), status=Status.completed),
              FilesTouched(**common(6), files=[FileRef("r", "c.py")])]
    done = project(events)
    assert done.status is Status.completed and done.phase is Phase.completed and done.runs == 1
    replayed_bind = project([*events, events[0]])
    assert replayed_bind == done
    reopened = project([*events, Bound(**common(7), repo="r", worktree_path="/w", reopens=True)])
    assert reopened.status is Status.active and reopened.phase is Phase.planning and reopened.runs == 2


def test_stalled_turns_active_on_later_activity_only():
    stalled = project([Bound(**common(0), repo="r", worktree_path="/w"), Ended(**common(5), status=Status.stalled)])
    assert stalled.status is Status.stalled
    late_replay = apply_event(stalled, FilesTouched(**common(3), files=[FileRef("r", "a.py")]))
    assert late_replay.status is Status.stalled
    assert apply_event(stalled, FilesTouched(**common(6), files=[FileRef("r", "a.py")])).status is Status.active


def test_a_decision_recorded_twice_is_one_entry():
    first = DecisionRecorded(**common(1), text="Use Postgres")
    again = DecisionRecorded(**common(2), text="Use Postgres")
    assert [d.at for d in project([again, first]).decisions] == [at(1)]


@pytest.mark.parametrize("bad", ["", "a" * 65, "OMN 1", "OMN/1", "ticket#1", "é", "x\x00"])
def test_invalid_task_ids_are_rejected(bad):
    with pytest.raises(ValidationError):
        PhaseChanged(**{**common(0), "task_id": bad}, phase=Phase.planning)


def test_models_forbid_unknown_fields_and_naive_times():
    with pytest.raises(ValidationError):
        NextActionSet(**common(0), text="x", surprise=1)
    with pytest.raises(ValidationError):
        NextActionSet(**{**common(0), "at": datetime(2026, 1, 1)}, text="x")  # noqa: DTZ001 -- refused, as it should be


def test_every_session_field_declares_how_it_merges():
    from baton.registry.model import SESSION_MERGE, Session

    plain = {name for kind, names in SESSION_MERGE.items() if kind != "registers" for name in names}
    registers = {name for stamp, values in SESSION_MERGE["registers"].items() for name in (stamp, *values)}
    assert plain | registers == set(Session.model_fields)


def test_a_bind_without_an_agent_keeps_the_recorded_agent_in_any_order():
    named = Bound(**common(0), repo="r", worktree_path="/w", agent="claude")
    unnamed = Bound(**common(5), repo="r", worktree_path="/w2", branch="fix")
    for events in ([named, unnamed], [unnamed, named]):
        session = project(events)
        assert (session.agent, session.worktree_path, session.branch) == ("claude", "/w2", "fix")
    renamed = Bound(**common(7), repo="r", worktree_path="/w2", agent="codex")
    assert project([renamed, unnamed, named]).agent == "codex", "a later named agent wins"
