"""With servers configured, a hook's touch is only kept locally; a background delivery takes
it to the servers without the agent running another command, then exits."""

import os
import sqlite3
from pathlib import Path

import pytest

from baton.outcome import Found
from baton.skills.runtime.delivery import delivery_running
from tests.stores import SERVER_BUDGET, use_servers
from tests.timing import wait_for
from tests.workspace import run_process

ON = {"BATON_BACKGROUND_DELIVERY": "on"}


def waiting_in(outbox: Path) -> int:
    """Read the outbox without delivering it (a `baton` command would deliver it itself)."""
    with sqlite3.connect(f"file:{outbox}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM outbox").fetchone()[0]


def session_in_postgres(task: str):
    from baton.registry.postgres import PostgresSessionStore

    store = PostgresSessionStore(os.environ["BATON_DATABASE_URL"], timeout=2, project="github.com/acme/shop")
    try:
        found = store.get(task)
    finally:
        store.close()
    return found.value if isinstance(found, Found) else None


def files_in_postgres(task: str) -> list[str]:
    session = session_in_postgres(task)
    return sorted(t.path for t in session.files.values()) if session else []


@pytest.mark.servers  # use_servers asks for them at run time
def test_a_touch_reaches_postgresql_with_no_other_command(request, home, monkeypatch, tmp_path, worktrees, cli):
    use_servers(request, monkeypatch, tmp_path, qdrant=False, kafka=False)
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    result = run_process(main, "touch", "src/a.py", env=ON)
    assert result.returncode == 0, result.stderr
    assert wait_for(lambda: files_in_postgres("OMN-1") == ["src/a.py"], 20, "the touch in PostgreSQL")
    # The graph's write follows the registry's and may wait out the delivery's budget (on 2
    # busy cores neo4j's import and first connection took over 10 s), then be tried again
    # after a backoff: the bound allows two attempts, far below the delivery's own 120 s.
    wait_for(lambda: not delivery_running(home), 2 * SERVER_BUDGET + 15,
             "the background delivery exits once nothing waits")
    assert run_process(main, "deliver").stdout.strip() == "Nothing waits."


@pytest.mark.servers  # use_servers asks for them at run time
def test_a_touch_reaches_kafka_and_the_projector_applies_it(request, home, monkeypatch, tmp_path, worktrees, cli):
    use_servers(request, monkeypatch, tmp_path, qdrant=False, kafka=True)
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    for path in ("src/a.py", "src/b.py"):  # the second touch finds the first delivery running, or starts one
        assert run_process(main, "touch", path, env=ON).returncode == 0
    outbox = home / "kafka-events-outbox.db"
    wait_for(lambda: waiting_in(outbox) == 0 and not delivery_running(home), 30, f"{outbox} drained in the background")
    assert cli(main, "projector", "--once", "--idle", "0.3")[0] == 0
    assert files_in_postgres("OMN-1") == ["src/a.py", "src/b.py"]


def test_deliver_reports_what_still_waits(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    monkeypatch.setenv("BATON_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "0.5")
    assert cli(main, "touch", "src/a.py")[0] == 0
    code, out, err = cli(main, "deliver")
    assert code == 3 and out.strip() == "1 write still waits" and "PostgreSQL at 127.0.0.1:1" in err
    monkeypatch.delenv("BATON_DATABASE_URL")
    code, out, _ = cli(main, "deliver")
    assert code == 0 and out.strip() == "Nothing waits."


@pytest.mark.servers  # use_servers asks for them at run time
def test_resume_keeps_its_bind_for_the_background_delivery(request, home, monkeypatch, tmp_path, worktrees, cli):
    use_servers(request, monkeypatch, tmp_path, qdrant=False, kafka=True)
    main, _ = worktrees
    result = run_process(main, "resume", "OMN-1")  # background delivery off: the bind waits
    assert result.returncode == 0, result.stderr
    # The bind, the run it starts and its checkpoint; one claim signal.
    assert waiting_in(home / "kafka-events-outbox.db") == 3 and waiting_in(home / "kafka-outbox.db") == 1
    result = run_process(main, "resume", "OMN-1", env=ON)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: waiting_in(home / "kafka-events-outbox.db") == 0 and waiting_in(home / "kafka-outbox.db") == 0
             and not delivery_running(home), 30, "the binds and their signals delivered in the background")
    assert cli(main, "projector", "--once", "--idle", "0.3")[0] == 0
    session = session_in_postgres("OMN-1")
    assert session is not None and session.worktree_path == str(main)
    assert run_process(main, "signals", "--task", "OMN-1").stdout.count("claimed") == 1, "one claim per session and run"
