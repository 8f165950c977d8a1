"""Moving an embedded data set onto servers is a copy, and a second copy changes nothing."""

import json

from tests.stores import unscope_recall
from tests.workspace import two_agents


def test_migrate_registry_and_recall(home, worktrees, cli, monkeypatch, postgres_url, tmp_path):
    main = two_agents(worktrees, cli)
    embedded = json.loads(cli(main, "resume", "OMN-1", "--json")[1])

    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    monkeypatch.setenv("BATON_QDRANT_URL", f"file://{tmp_path / 'qdrant'}")
    code, out, _ = cli(main, "migrate")
    assert code == 0 and "registry: copied" in out and "recall: copied 2 decisions" in out
    assert cli(main, "migrate")[0] == 0
    on_servers = json.loads(cli(main, "resume", "OMN-1", "--json")[1])
    assert on_servers["stores"] == {"registry": "ok", "graph": "ok", "recall": "ok", "signals": "ok"}
    for field in ("files_touched", "decisions", "repo", "phase", "runs"):
        assert on_servers["session"][field] == embedded["session"][field]
    assert [r["task_id"] for r in on_servers["related_decisions"]] == ["OMN-2"]
    doctor = {r["store"]: r for r in json.loads(cli(main, "doctor", "--json")[1])}
    assert doctor["recall"]["size"] == "2 decisions"


def test_migrate_needs_a_server(home, worktrees, cli):
    code, _, err = cli(worktrees[0], "migrate")
    assert code == 2 and "no server configured" in err


def test_migrate_copies_recall_indexed_before_projects_into_its_project(home, worktrees, cli, monkeypatch,
                                                                         postgres_url, tmp_path):
    """Points from before projects are stored again in their project, with their vectors
    (no model needed), before the copy: they reach the server scoped, and none unscoped."""
    main = two_agents(worktrees, cli)
    unscope_recall(home)
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    monkeypatch.setenv("BATON_QDRANT_URL", f"file://{tmp_path / 'qdrant'}")
    code, out, _ = cli(main, "migrate")
    assert code == 0 and "recall: copied 2 decisions" in out, out
    resumed = json.loads(cli(main, "resume", "OMN-1", "--json")[1])
    assert [r["task_id"] for r in resumed["related_decisions"]] == ["OMN-2"]
    from baton.recall.qdrant_server import QdrantServerIndex

    index = QdrantServerIndex(f"file://{tmp_path / 'qdrant'}", timeout=5)
    assert (index.count(), index.unscoped_count()) == (2, 0)
    index.close()
