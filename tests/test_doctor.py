import json
import time

import pytest

from tests import timing
from tests.servers.common import free_port
from tests.stores import use_servers


def test_doctor_on_the_embedded_default(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    code, out, _ = cli(main, "doctor", "--json")
    reports = {r["store"]: r for r in json.loads(out)}
    assert code == 0
    assert set(reports) == {"registry", "graph", "recall", "embedding model", "signals", "data home"}
    assert all(r["state"] == "ok" for r in reports.values())
    assert reports["registry"]["backend"] == "sqlite" and reports["registry"]["size"] == "1 sessions"
    assert reports["recall"]["backend"] == "sqlite vectors + segment index"


def test_doctor_names_a_server_that_does_not_answer(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    started = time.monotonic()
    cli(main, "doctor")
    healthy = time.monotonic() - started  # the floor: every store embedded and answering
    monkeypatch.setenv("BATON_DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/baton")
    started = time.monotonic()
    code, out, _ = cli(main, "doctor")
    assert code == 3 and time.monotonic() - started < timing.bound(healthy, 2)
    assert out.splitlines()[0].startswith("registry         unavailable: PostgreSQL at 127.0.0.1:")
    assert "graph            ok  sqlite" in out


def test_doctor_on_postgres(home, worktrees, cli, monkeypatch, postgres_url):
    main, _ = worktrees
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    reports = {r["store"]: r for r in json.loads(cli(main, "doctor", "--json")[1])}
    assert reports["registry"]["state"] == "ok" and reports["registry"]["version"].startswith("PostgreSQL 15")


@pytest.mark.servers  # use_servers asks for them at run time
def test_doctor_on_every_server(request, home, worktrees, cli, monkeypatch, tmp_path):
    use_servers(request, monkeypatch, tmp_path, qdrant=True)
    code, out, _ = cli(worktrees[0], "doctor", "--json")
    reports = {r["store"]: r for r in json.loads(out)}
    assert code == 0, reports
    assert {name: r["backend"] for name, r in reports.items() if name not in ("embedding model", "data home")} == {
        "registry": "postgresql", "graph": "bolt (neo4j)", "recall": "qdrant", "signals": "kafka", "event log": "kafka"}
    assert reports["graph"]["version"].startswith("Neo4j/5.26")
