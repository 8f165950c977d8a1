"""Resume's related decisions are found from what the ticket is about (its goal, next action and
files), not only from its own decisions: the indexer embeds the ticket's query, a resume never
does; before it has, a resume answers with what is stored and wants the query embedded. On
either recall backend."""

import json
from datetime import timedelta

import pytest

from baton import clock
from baton.recall import embedding
from baton.recall.ticket_queries import TicketQueries
from baton.registry.model import Session, Touch
from baton.skills.core.commit import apply_events
from baton.skills.core.ticket_query import ticket_query_text
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores
from baton.skills.services.gc import collect_garbage

REDIS = "Cache shopping carts in Redis with a one-hour expiry"
INVOICES = "Render invoices as PDF files with a headless browser"
CARTS_GOAL = "Make the cart page fast by caching carts in Redis"
INVOICES_GOAL = "Let customers download their invoices as PDF documents"


@pytest.fixture(params=["embedded", "qdrant-client"])
def others(request, home, worktrees, cli, tmp_path, monkeypatch):
    """OMN-2 decided REDIS and OMN-3 INVOICES, both indexed; in the embedded index, or in
    Qdrant (qdrant-client's local mode): the ticket queries are kept beside either."""
    if request.param == "qdrant-client":
        monkeypatch.setenv("BATON_QDRANT_URL", f"file://{tmp_path / 'qdrant'}")
    _, second = worktrees
    assert cli(second, "bind", "OMN-2")[0] == 0
    assert cli(second, "decide", REDIS, "--context", "where carts are cached")[0] == 0
    assert cli(second, "bind", "OMN-3")[0] == 0
    assert cli(second, "decide", INVOICES, "--context", "how invoices are produced")[0] == 0
    assert cli(second, "index")[0] == 0


def related(cli, cwd, task) -> list[str]:
    code, out, err = cli(cwd, "resume", task, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["stores"]["recall"] == "ok"
    return [r["text"] for r in answer["related_decisions"]]


def waiting(home) -> int:
    queries = TicketQueries(home / "recall", timeout=2)
    try:
        return queries.waiting_count()
    finally:
        queries.close()


def test_a_ticket_with_a_goal_and_no_decision_finds_related_decisions(home, worktrees, cli, others):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "update", "--goal", CARTS_GOAL)[0] == 0
    related(cli, main, "OMN-1")  # wants the ticket's query embedded
    assert cli(main, "index")[0] == 0

    assert related(cli, main, "OMN-1") == [REDIS]


def test_the_goal_and_next_action_find_what_the_own_decisions_do_not(home, worktrees, cli, others):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "Serve product images from the CDN", "--context", "where images are served")[0] == 0
    assert cli(main, "index")[0] == 0
    assert related(cli, main, "OMN-1") == []  # nothing of the others is about images

    assert cli(main, "update", "--goal", INVOICES_GOAL, "--next", "generate the PDF of an invoice")[0] == 0
    related(cli, main, "OMN-1")
    assert cli(main, "index")[0] == 0
    assert related(cli, main, "OMN-1") == [INVOICES]


def test_before_the_indexer_ran_resume_answers_without_embedding_and_wants_the_query(
        home, worktrees, cli, others, monkeypatch):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "update", "--goal", CARTS_GOAL)[0] == 0
    loads = []
    real_model_dir = embedding.model_dir
    monkeypatch.setattr(embedding, "model_dir", lambda: loads.append(1) or real_model_dir())

    assert related(cli, main, "OMN-1") == []  # no vector yet: the keywords alone never make a decision related
    assert loads == [], "a resume never loads the model"
    assert waiting(home) == 1
    related(cli, main, "OMN-1")
    assert waiting(home) == 1, "wanted once"

    assert cli(main, "index")[0] == 0
    assert waiting(home) == 0
    assert related(cli, main, "OMN-1") == [REDIS]


def test_a_changed_goal_is_embedded_again_by_the_next_indexer_run(home, worktrees, cli, others):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "update", "--goal", INVOICES_GOAL)[0] == 0
    related(cli, main, "OMN-1")
    assert cli(main, "index")[0] == 0
    assert related(cli, main, "OMN-1") == [INVOICES]

    assert cli(main, "update", "--goal", CARTS_GOAL)[0] == 0
    assert related(cli, main, "OMN-1") == [INVOICES], "until the indexer runs, the stored query answers"
    assert waiting(home) == 1
    assert cli(main, "index")[0] == 0
    assert related(cli, main, "OMN-1") == [REDIS]


def stored_query(home, project: str, task_id: str, text: str):
    queries = TicketQueries(home / "recall", timeout=2)
    try:
        return queries.stored(project, task_id, text)
    finally:
        queries.close()


def test_gc_forgets_a_pruned_tickets_query(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "update", "--goal", CARTS_GOAL)[0] == 0
    related(cli, main, "OMN-1")
    assert cli(main, "index")[0] == 0
    assert cli(main, "end", "--status", "completed")[0] == 0
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        assert stored_query(home, stores.project, "OMN-1", CARTS_GOAL).current
        assert collect_garbage(stores, at=clock.now() + timedelta(days=91)).sessions == ["OMN-1"]
        assert stored_query(home, stores.project, "OMN-1", CARTS_GOAL).vector is None
    finally:
        stores.close()


def test_the_query_text_is_the_goal_the_next_action_and_the_files_words():
    def touched(path: str) -> Touch:
        return Touch(repo="r", path=path, last_at="2026-11-01T00:00:00Z")

    at = {"created_at": "2026-11-01T00:00:00Z", "last_activity": "2026-11-01T00:00:00Z"}
    session = Session(task_id="OMN-1", goal="Cache carts", next_action="write the cache", **at,
                      files={"b": touched("src/cart/redis_cache.py"), "a": touched("lib/cart/__init__.py")})
    assert ticket_query_text(session) == "Cache carts\nwrite the cache\ncart redis cache"
    assert ticket_query_text(Session(task_id="OMN-1", **at)) == ""


def test_a_ticket_back_at_a_text_already_embedded_keeps_no_text(tmp_path):
    """The text waits only until it is embedded: going back to it wants nothing embedded and
    keeps no copy of it."""
    import sqlite3

    from baton.recall.ticket_queries import TicketQueries

    queries = TicketQueries(tmp_path / "recall", timeout=2)
    queries.want("p", "OMN-1", "cache carts in redis")
    queries.keep(queries.waiting(10), [[0.5] * 384])
    queries.want("p", "OMN-1", "render invoices as pdf")
    queries.want("p", "OMN-1", "cache carts in redis")
    assert queries.waiting(10) == [] and queries.stored("p", "OMN-1", "cache carts in redis").current
    queries.close()
    with sqlite3.connect(tmp_path / "recall" / "queries.db") as db:
        assert db.execute("SELECT text FROM queries").fetchall() == [(None,)]
