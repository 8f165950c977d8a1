"""With Kafka, a command sees the writes of the commands before it on this machine at once,
before any projector applied them (baton.registry.own_writes); the projector applying them
later doubles nothing, and another machine sees them only then."""

import json
import sqlite3

import pytest

from tests.stores import use_servers
from tests.workspace import run_process


def answer(cwd, *args, env=None) -> dict:
    result = run_process(cwd, *args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def seen(cwd, env=None) -> dict:
    """What a command shows: the ticket's decisions (resume, unless on another machine: its
    resume would bind the worktree there), runs and leases, and the list's tickets."""
    return {"decisions": [d["text"] for d in answer(cwd, "resume", "OMN-1")["session"]["decisions"]] if env is None
            else None,
            "runs": [(r["kind"], r["state"]) for r in answer(cwd, "runs", "OMN-1", env=env)["runs"]],
            "leases": [(lease["task_id"], lease["pattern"]) for lease in answer(cwd, "leases", env=env)["leases"]],
            "listed": [row["task_id"] for row in answer(cwd, "list", "--all", env=env)]}


def delivered_remembered(home) -> int:
    with sqlite3.connect(home / "kafka-events-outbox.db") as conn:
        return conn.execute("SELECT count(*) FROM delivered").fetchone()[0]


@pytest.mark.servers
def test_a_command_sees_its_own_writes_before_the_projector_and_the_projector_doubles_nothing(
        request, home, monkeypatch, tmp_path, worktrees):
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, second = worktrees
    other_machine = {"BATON_HOME": str(tmp_path / "other-machine")}
    assert run_process(second, "bind", "OMN-2").returncode == 0  # a ticket the registry learns of from Kafka alone
    assert run_process(main, "bind", "OMN-1").returncode == 0
    assert run_process(main, "deliver").returncode == 0  # Kafka took the bind; no projector runs
    assert delivered_remembered(home) > 0
    assert run_process(main, "decide", "Keep carts in PostgreSQL").returncode == 0  # waits in the outbox
    assert answer(main, "restore", "OMN-1", "--into", str(tmp_path / "restored"))["run"]["kind"] == "restore"
    assert run_process(main, "claim", "src/db/**").returncode == 0
    mine = seen(main)
    assert mine == {"decisions": ["Keep carts in PostgreSQL"], "runs": [("bind", "earlier"), ("restore", "current")],
                    "leases": [("OMN-1", "src/db/**")], "listed": ["OMN-1", "OMN-2"]}
    # The claim's grant the registry decided at once; the rest waits for the projector.
    assert seen(main, other_machine) == {"decisions": None, "runs": [], "leases": [("OMN-1", "src/db/**")],
                                         "listed": ["OMN-1"]}, "nothing was projected: another machine sees none"

    assert run_process(main, "deliver").returncode == 0
    assert run_process(main, "projector", "--once").returncode == 0
    assert seen(main) == mine, "the projector's events fold in once"
    assert seen(main, other_machine) == {**mine, "decisions": None}
    assert delivered_remembered(home) == 0, "what the registry holds is forgotten"
