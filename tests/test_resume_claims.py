"""A resume binds the worktree again: it keeps the recorded agent and claims the ticket
only once per run, on the embedded default and through Kafka (where the first resume's
bind is still in the outbox when the second one reads the registry)."""

import json
from pathlib import Path

import pytest

from tests.stores import use_servers


@pytest.fixture(params=["embedded", "servers"])
def claim_home(request, home, monkeypatch, tmp_path) -> Path:
    if request.param == "servers":
        use_servers(request, monkeypatch, tmp_path, qdrant=False)
    return home


def resumed(cli, worktree: Path, task: str, *flags: str) -> dict:
    code, out, err = cli(worktree, "resume", task, "--json", *flags)
    assert code == 0, err
    return json.loads(out)


def settled(cli, worktree: Path, task: str) -> tuple[dict, list[dict]]:
    """Deliver what resume kept for later, then (the session, its ticket_claimed signals)."""
    assert cli(worktree, "deliver")[0] == 0
    code, out, err = cli(worktree, "resume", task, "--json")
    assert code == 0, err
    code, signals, err = cli(worktree, "signals", "--task", task, "--json")
    assert code == 0, err
    return json.loads(out)["session"], [s for s in json.loads(signals) if s["signal_type"] == "ticket_claimed"]


def test_resume_keeps_the_agent_and_claims_once_per_run(claim_home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1", "--agent", "claude")[0] == 0
    resumed(cli, main, "OMN-1")
    resumed(cli, main, "OMN-1")
    session, claims = settled(cli, main, "OMN-1")
    assert session["agent"] == "claude", "a resume without --agent keeps the recorded agent"
    assert "agent: \"claude\"" in (main / ".baton" / "active_session.yaml").read_text()
    assert session["runs"] == 1 and len(claims) == 1, claims

    assert cli(main, "end", "--status", "completed")[0] == 0
    assert cli(main, "deliver")[0] == 0
    resumed(cli, main, "OMN-1")  # reopens: a new run, claimed once
    resumed(cli, main, "OMN-1")
    session, claims = settled(cli, main, "OMN-1")
    assert session["status"] == "active" and session["runs"] == 2, session
    assert [c["payload"]["reason"] for c in claims] == ["", "reopened"]
    assert session["agent"] == "claude"


def test_another_worktree_claims_the_ticket_for_itself(claim_home, worktrees, cli):
    main, second = worktrees
    resumed(cli, main, "OMN-1")
    # Main's run is live (where the registry knows it yet): the other worktree takes it over.
    resumed(cli, second, "OMN-1", "--take-over")
    session, claims = settled(cli, second, "OMN-1")
    claims = [c for c in claims if not c["payload"]["reason"]]  # the binds' own, not what the holder is told
    assert len(claims) == 2 and len({c["session_id"] for c in claims}) == 2
    assert session["runs"] == 2, "the bind and the take-over each started one"
