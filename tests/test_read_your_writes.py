"""With Kafka, a command sees the writes of the commands before it on this machine at once,
before any projector applied them (baton.registry.own_writes); the projector applying them
later doubles nothing, and another machine sees them only then. With the registry refused or
stalled the reads still cost one bounded wait, and an event the registry holds is never folded
from the local copy, so a redaction made there stays made."""

import json
import sqlite3

import pytest

from baton.health import HealthRecord
from tests import timing
from tests.servers.outage import REFUSE, STALL, Outage
from tests.stores import use_servers
from tests.test_outages import BUDGET, lines_naming
from tests.test_redaction import SECRETS
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


def remembered(home) -> str:
    """The bodies of the delivered events this data home remembers."""
    with sqlite3.connect(home / "kafka-events-outbox.db") as conn:
        return "\n".join(body for (body,) in conn.execute("SELECT body FROM delivered"))


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


@pytest.mark.servers
@pytest.mark.parametrize("mode", [REFUSE, STALL])
def test_reads_answer_within_the_budget_when_the_registry_is_away_while_writes_wait(
        request, home, monkeypatch, tmp_path, worktrees, postgres_server, mode):
    """Own writes waiting to be folded ask the registry which it holds: with it refused or
    stalled, resume, list and runs still cost one bounded wait and say so in one line (exit 3)."""
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, _ = worktrees
    proxy = Outage(("127.0.0.1", postgres_server.port))
    try:
        url = request.getfixturevalue("postgres_url")
        monkeypatch.setenv("BATON_DATABASE_URL", url.replace(f":{postgres_server.port}/", f":{proxy.port}/"))
        assert run_process(main, "bind", "OMN-1").returncode == 0
        assert run_process(main, "deliver").returncode == 0
        assert run_process(main, "decide", "Keep carts in PostgreSQL").returncode == 0
        assert delivered_remembered(home) > 0, "writes wait to be folded: the registry is asked"
        healthy = timing.floor(lambda: run_process(main, "resume", "OMN-1", "--json"))
        budget = timing.store_budget(healthy, BUDGET)
        monkeypatch.setenv("BATON_STORE_TIMEOUT", f"{budget:g}")
        proxy.switch(mode)
        for args in (("resume", "OMN-1"), ("list",), ("runs", "OMN-1")):
            HealthRecord(home, recheck_after=60).clear()  # each command meets the server itself
            result, elapsed = timing.timed(lambda: run_process(main, *args, "--json"))  # noqa: B023
            assert result.returncode == 3 and "Traceback" not in result.stderr, (args, result.stderr)
            if args[0] == "resume":
                said = json.loads(result.stdout)["stores"]["registry"]
                assert said.startswith("unavailable: PostgreSQL") and result.stderr == "", (said, result.stderr)
            else:
                assert result.stdout == "" and lines_naming(result.stderr, "session registry") == \
                    result.stderr.splitlines() and len(result.stderr.splitlines()) == 1, result.stderr
            assert elapsed < timing.bound(healthy, 0 if mode == REFUSE else budget), \
                f"{args[0]} took {elapsed:.1f}s with PostgreSQL {mode} (floor {healthy:.2f}s)"
    finally:
        proxy.close()


UNREDACTED = ("from baton.skills.runtime.stores import Stores\n"
              "Stores.redact = property(lambda self: lambda text: text)")  # writes as an older Baton did


def project(cwd, env=None) -> None:
    """Apply what Kafka holds (a fresh broker may not name the group's coordinator yet)."""
    timing.wait_for(lambda: run_process(cwd, "projector", "--once", env=env).returncode == 0, 60,
             "the projector to apply the log")


@pytest.mark.servers
def test_a_local_copy_never_undoes_a_redaction_the_registry_made(request, home, monkeypatch, tmp_path, worktrees):
    """The registry holds an event and another machine's `baton redact --scan` rewrote it
    there, while this data home still remembers the event as it delivered it: what it shows
    is the registry's redacted text, and the copy is forgotten."""
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, _ = worktrees
    other_machine = {"BATON_HOME": str(tmp_path / "other-machine")}
    text, key = SECRETS["aws-access-key"]
    assert run_process(main, "bind", "OMN-1").returncode == 0
    assert run_process(main, "decide", f"deploy keys: {text}", prelude=UNREDACTED).returncode == 0
    assert run_process(main, "deliver").returncode == 0
    project(main)
    assert run_process(main, "redact", "--scan", env=other_machine).returncode == 0
    assert run_process(main, "deliver", env=other_machine).returncode == 0
    project(main, other_machine)
    assert key in remembered(home), "this data home still remembers the decision as it delivered it"

    shown = [run_process(main, *args, "--json") for args in (("resume", "OMN-1"), ("runs", "OMN-1"), ("list",))]
    assert [r.returncode for r in shown] == [0, 0, 0], [r.stderr for r in shown]
    assert all(key not in r.stdout + r.stderr for r in shown), "the local copy brought the secret back"
    decisions = json.loads(shown[0].stdout)["session"]["decisions"]
    assert [d["text"] for d in decisions] == ["deploy keys: bucket reads with [REDACTED:aws-access-key] now"]
    assert key not in remembered(home), "the copy of what the registry holds is forgotten"


@pytest.mark.servers
def test_a_scan_on_this_machine_forgets_the_copies_it_kept(request, home, monkeypatch, tmp_path, worktrees):
    """`baton redact --scan` before the projector ran: the decision it rewrites is still only
    a copy this data home kept for reading its own writes; the scan forgets that copy, so the
    scrub leaves no byte of the secret in the data home."""
    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, _ = worktrees
    text, key = SECRETS["aws-access-key"]
    assert run_process(main, "bind", "OMN-1").returncode == 0
    assert run_process(main, "decide", f"deploy keys: {text}", prelude=UNREDACTED).returncode == 0
    assert run_process(main, "deliver").returncode == 0
    assert key in remembered(home)  # the test can fail: the copy is there

    scan = run_process(main, "redact", "--scan", "--json")
    assert scan.returncode == 0 and json.loads(scan.stdout)["rewritten"], scan.stderr
    assert key not in (home / "kafka-events-outbox.db").read_bytes().decode("latin-1")
