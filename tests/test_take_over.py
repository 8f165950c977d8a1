"""One run holds a ticket: a bind in another worktree while a live run holds it is refused
and both sides are told; `--take-over` moves it with a fencing token, and the superseded
run's later writes are kept as that run's, never as the ticket's state, on both registry
backends (and through the Kafka projector, which appends to the same registry)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from baton.files import FileRef
from baton.registry.apply import apply_event, fold
from baton.registry.model import (
    Bound,
    DecisionRecorded,
    FilesTouched,
    NextActionSet,
    Phase,
    PhaseChanged,
    RunStarted,
    TakenOver,
)
from tests.test_claude_hooks import event_count, hook, payload, session_of

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _common(minutes: float, session: str) -> dict:
    return {"event_id": uuid.uuid4(), "task_id": "OMN-1", "session_id": session, "at": _at(minutes)}


def _taken(minutes: float, token: int, holder: str, superseded: str, run: str, old_run: str) -> TakenOver:
    return TakenOver(event_id=uuid.uuid5(uuid.NAMESPACE_URL, f"takeover {token}"), task_id="OMN-1",
                     session_id=holder, at=_at(minutes), token=token, superseded=[superseded], superseded_run=old_run,
                     run_id=run, repo="r", worktree_path=f"/w/{holder}", from_worktree_path=f"/w/{superseded}")


def _history() -> list:
    """sA binds and works; at minute 10 sB takes the ticket over; sA writes on after it."""
    return [
        Bound(**_common(0, "sA"), repo="r", worktree_path="/w/sA", branch="a"),
        RunStarted(**{**_common(0, "sA"), "event_id": uuid.UUID(int=1)}, run_kind="bind"),
        PhaseChanged(**_common(1, "sA"), phase=Phase.implementing),
        NextActionSet(**_common(2, "sA"), text="write the migration"),
        _taken(10, 2, "sB", "sA", str(uuid.UUID(int=2)), str(uuid.UUID(int=1))),
        Bound(**_common(10, "sB"), repo="r", worktree_path="/w/sB", branch="b"),
        RunStarted(**{**_common(10, "sB"), "event_id": uuid.UUID(int=2)}, run_kind="takeover",
                   parent_run_id=str(uuid.UUID(int=1))),
        # Late: the superseded run does not know yet.
        PhaseChanged(**_common(11, "sA"), phase=Phase.reviewing),
        NextActionSet(**_common(12, "sA"), text="merge it"),
        DecisionRecorded(**_common(13, "sA"), text="keep the old schema"),
        FilesTouched(**_common(14, "sA"), files=[FileRef("r", "src/old.py")]),
    ]


def test_a_late_write_of_the_superseded_run_is_kept_as_its_own_and_moves_no_state():
    history = _history()
    session = fold(history)
    assert session.token == 2 and session.bound_session == "sB" and session.worktree_path == "/w/sB"
    assert session.phase is Phase.implementing and session.next_action == "write the migration"
    assert session.decisions == [] and session.files == {}
    assert session.current_run.text == str(uuid.UUID(int=2))
    assert session.last_activity == _at(10), "the superseded run's activity keeps nothing alive"
    assert [(w.kind, w.session_id, w.run_id, w.token) for w in session.late_writes] == [
        ("phase_changed", "sA", str(uuid.UUID(int=1)), 2), ("next_action_set", "sA", str(uuid.UUID(int=1)), 2),
        ("decision_recorded", "sA", str(uuid.UUID(int=1)), 2), ("files_touched", "sA", str(uuid.UUID(int=1)), 2)]
    assert str(uuid.UUID(int=1)) in session.superseded_runs()
    # Replays change nothing; the new holder's writes move the state as ever.
    assert fold(history + history) == session
    moved = apply_event(session, NextActionSet(**_common(15, "sB"), text="review the migration"))
    assert moved.next_action == "review the migration" and moved.late_writes == session.late_writes


def test_a_write_made_before_the_take_over_counts_wherever_it_arrives_and_a_take_back_fences_the_other_side():
    history = _history()
    early = NextActionSet(**_common(5, "sA"), text="made before the take-over")
    delivered_late = fold([*history, early])
    assert delivered_late.next_action == "made before the take-over", "stamped before the take-over: not late"
    assert delivered_late == fold(sorted([*history, early], key=lambda e: e.at)), "a fold in time order agrees"
    # sA takes it back with the next token: its writes count again, sB's are late.
    back = fold([*history, _taken(20, 3, "sA", "sB", str(uuid.UUID(int=3)), str(uuid.UUID(int=2))),
                 PhaseChanged(**_common(21, "sA"), phase=Phase.reviewing),
                 NextActionSet(**_common(22, "sB"), text="late from sB")])
    assert back.token == 3 and back.phase is Phase.reviewing and back.next_action == "write the migration"
    assert back.late_writes[-1].session_id == "sB" and back.late_writes[-1].run_id == str(uuid.UUID(int=2))


def _resume(cli, cwd, *flags: str) -> dict:
    code, out, err = cli(cwd, "resume", "OMN-1", "--json", *flags)
    assert code == 0, err
    return json.loads(out)


def _session(cli, cwd):
    """OMN-1 as the registry holds it once this machine's kept writes are delivered (with
    the registry on a server a write is kept, and delivered by the next reading command)."""
    assert cli(cwd, "deliver")[0] == 0
    return session_of("OMN-1")


def _binding(worktree) -> str | None:
    path = worktree / ".baton" / "active_session.yaml"
    return path.read_text() if path.exists() else None


def test_a_live_holder_refuses_the_bind_tells_both_sides_and_a_take_over_fences_its_late_writes(
        registry_home, worktrees, cli, capsys, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    main, second = worktrees
    assert cli(main, "bind", "OMN-1", "--agent", "claude")[0] == 0
    assert cli(main, "update", "--phase", "implementing", "--next", "write the migration")[0] == 0
    assert cli(main, "touch", "src/db.py")[0] == 0
    held = _binding(main)

    # Another worktree asks while main's run is live: refused, one line naming the holder and the way.
    code, out, err = cli(second, "bind", "OMN-1")
    assert code == 1, (out, err)
    assert f"OMN-1 is held by a live run in {main} (branch main, agent claude) since" in err
    assert "`baton bind OMN-1 --take-over`" in err and err.count("\n") == 1
    assert _binding(second) is None, "nothing written"
    assert _session(cli, main).worktree_path == str(main)
    # The holder is told at its next prompt.
    code, said, _ = hook("user-prompt-submit", payload("user_prompt_submit", main, session="agent-a"), capsys)
    told = said["hookSpecificOutput"]["additionalContext"]
    assert f"contested: {second} asked to bind OMN-1 while this run holds it" in told

    # The take-over: a new run with the next token; the holder's binding file is not touched.
    code, out, err = cli(second, "bind", "OMN-1", "--take-over")
    assert code == 0, err
    assert _binding(main) == held
    taken = _session(cli, second)
    assert taken.token == 2 and taken.worktree_path == str(second)
    old_run = taken.takeovers[0].superseded_run
    assert taken.current_run.kind == "takeover" and taken.current_run.parent_run_id == old_run
    before = event_count("OMN-1")

    # The superseded run writes on: every write is stored, none is the ticket's state.
    assert cli(main, "update", "--phase", "reviewing", "--next", "merge it", "--done", "old step")[0] == 0
    assert cli(main, "touch", "src/old.py")[0] == 0
    assert cli(main, "decide", "keep the old schema")[0] == 0
    assert hook("stop", payload("stop", main, session="agent-a"), capsys)[0] == 0
    after = _session(cli, main)
    assert event_count("OMN-1") > before + 3, "the late writes are stored"
    late = [w for w in after.late_writes if w.run_id == old_run]
    assert {"phase_changed", "next_action_set", "step_completed", "files_touched",
            "decision_recorded"} <= {w.kind for w in late}
    assert all(w.token == 2 for w in late)
    state = _resume(cli, second)
    assert state["bound"] is True and state["superseded"] is None
    session = state["session"]
    assert session["phase"] == "implementing" and session["next_action"] == "write the migration"
    assert "src/old.py" not in session["files_touched"] and "src/db.py" in session["files_touched"]
    assert session["decisions"] == [] and session["completed_steps"] == []
    assert state["run"]["kind"] == "takeover" and state["run"]["run_id"] == after.current_run.text

    # The old side is told: at its next prompt, its session start and its resume, which binds nothing.
    code, said, _ = hook("user-prompt-submit", payload("user_prompt_submit", main, session="agent-a"), capsys)
    assert f"taken over: {second} took OMN-1 over from {main} (token 2)" in \
        said["hookSpecificOutput"]["additionalContext"]
    code, said, _ = hook("session-start", payload("session_start_resume", main, session="agent-a"), capsys)
    assert f"Superseded: this worktree's run of OMN-1 was taken over by {second}" in \
        said["hookSpecificOutput"]["additionalContext"]
    old_side = _resume(cli, main)
    assert old_side["bound"] is False and old_side["superseded"]["token"] == 2
    assert old_side["superseded"]["run_id"] == old_run and old_side["superseded"]["late_writes"] == len(late)
    assert any(f"held by a live run in {second}" in w for w in old_side["warnings"])
    assert _binding(main) == held
    code, out, _ = cli(second, "runs", "--json")
    states = {r["run_id"]: (r["state"], r["late_writes"]) for r in json.loads(out)["runs"]}
    assert states[old_run] == ("superseded", len(late))
    assert states[after.current_run.text] == ("current", 0)


def test_a_take_over_back_and_a_replayed_take_over_grant_each_token_once(registry_home, worktrees, cli):
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(second, "bind", "OMN-1", "--take-over")[0] == 0
    assert cli(second, "bind", "OMN-1", "--take-over")[0] == 0, "held here already: nothing to take"
    assert _session(cli, second).token == 2
    code, out, err = cli(main, "resume", "OMN-1", "--json", "--take-over")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["bound"] is True and answer["superseded"] is None
    back = _session(cli, main)
    assert back.token == 3 and back.worktree_path == str(main)
    assert [t.token for t in back.takeovers] == [2, 3]
    assert cli(second, "update", "--next", "late from second")[0] == 0
    assert _session(cli, second).next_action is None
    assert cli(main, "update", "--next", "from the holder")[0] == 0
    assert _session(cli, main).next_action == "from the holder"


def test_a_holder_that_handed_off_is_not_live_until_it_works_again(registry_home, worktrees, cli):
    """A handoff is written for the next run: that run binds without a take-over, unless
    the holder went on working after it."""
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "touch", "src/cart.py")[0] == 0
    assert cli(main, "handoff")[0] == 0
    assert cli(main, "touch", "src/more.py")[0] == 0, "the holder works on after its handoff"
    assert cli(second, "bind", "OMN-1")[0] == 1
    assert cli(main, "handoff")[0] == 0
    code, _, err = cli(second, "bind", "OMN-1")
    assert code == 0, err
    assert _session(cli, second).worktree_path == str(second)


@pytest.mark.in_process  # the clock is moved in this process
def test_a_holder_idle_past_the_lease_ttl_and_grace_is_not_live(registry_home, worktrees, cli, monkeypatch):
    from baton import clock

    main, second = worktrees
    moment = [clock.now()]
    monkeypatch.setattr(clock, "now", lambda: moment[0])
    assert cli(main, "bind", "OMN-1")[0] == 0
    moment[0] += timedelta(minutes=44)
    assert cli(second, "bind", "OMN-1")[0] == 1
    moment[0] += timedelta(minutes=2)  # past 30 minutes of TTL and 15 of grace
    assert cli(second, "bind", "OMN-1")[0] == 0
    assert _session(cli, second).worktree_path == str(second)


def test_through_kafka_the_take_over_reaches_the_event_log_and_the_projector_fences_the_late_write(
        home, worktrees, cli, request, monkeypatch, tmp_path, kafka_server):
    """With Kafka every write reaches the registry through the projector: the take-over,
    stored in the registry at once, goes to the event log too, and the superseded run's
    write, carrying its session, is kept as that run's there as well."""
    from tests.stores import use_servers
    from tests.test_outages import messages_on

    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "update", "--next", "write the migration")[0] == 0
    assert cli(main, "deliver")[0] == 0  # the next command's projector run brings them to the registry
    assert cli(second, "bind", "OMN-1")[0] == 1
    topic = f"{os.environ['BATON_KAFKA_TOPIC_PREFIX']}session-events.v1"
    before = messages_on(kafka_server, topic)
    assert cli(second, "bind", "OMN-1", "--take-over")[0] == 0
    assert cli(main, "update", "--next", "merge it")[0] == 0
    assert cli(main, "deliver")[0] == 0
    assert cli(second, "deliver")[0] == 0
    assert messages_on(kafka_server, topic) > before + 2, "the take-over, its bind and run, and the late write"
    assert cli(main, "projector", "--once")[0] == 0
    session = session_of("OMN-1")
    assert session.token == 2 and session.worktree_path == str(second)
    assert session.next_action == "write the migration"
    assert "next_action_set" in [w.kind for w in session.late_writes]
    assert {w.session_id for w in session.late_writes} == {session.takeovers[0].superseded[0]}
