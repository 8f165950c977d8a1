"""Decisions that age: `baton decide --supersedes` links a decision to the one it replaces,
on either registry and through the projector; recall shows a superseded decision with the
newest of its chain, that one first, as one result of the limit, ranks abandoned and old
decisions below current ones, marked, and resume leaves them out unless asked."""

import json
from datetime import timedelta

import pytest

from baton import clock
from baton.skills.core.commit import apply_events
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores

OLD = "Keep shopping carts in Redis with a one-day expiry"
NEW = "Keep shopping carts in PostgreSQL rows so they survive restarts"


def two_carts(cli, main, second) -> None:
    """OMN-1 decided OLD; OMN-2 decided NEW, replacing it."""
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "Serve product images from the CDN")[0] == 0
    assert cli(main, "decide", OLD, "--context", "where carts are stored")[0] == 0
    assert cli(second, "bind", "OMN-2")[0] == 0
    code, _, err = cli(second, "decide", NEW, "--context", "where carts are stored", "--supersedes", "OMN-1#2")
    assert code == 0, err


def flat(hits: list[dict]) -> list[dict]:
    """`baton recall --json`'s results, each followed by the superseded decisions shown with it."""
    return [shown for hit in hits for shown in (hit, *hit["replaces"])]


def decisions_of(cli, cwd, task) -> list[dict]:
    resumed = json.loads(cli(cwd, "resume", task, "--json")[1])
    return resumed["session"]["decisions"]


def test_a_superseded_decision_is_linked_ranked_below_and_marked(registry_home, worktrees, cli):
    main, second = worktrees
    two_carts(cli, main, second)
    decisions = decisions_of(cli, main, "OMN-1")
    assert [d.get("superseded_by") for d in decisions] == [None, ["OMN-2"]]
    assert cli(main, "index")[0] == 0

    hits = json.loads(cli(main, "recall", "where are shopping carts stored", "--json")[1])
    new = next(h for h in hits if h["text"] == NEW)
    assert [h["text"] for h in new["replaces"]] == [OLD], "one result: the replacement, what it replaced in it"
    assert OLD not in [h["text"] for h in hits]
    old = new["replaces"][0]
    assert not old["current"] and old["marks"] == [f"superseded by OMN-2: {NEW}"] and old["replaces"] == []
    assert new | {"marks": [], "current": True} == new
    shown = cli(main, "recall", "where are shopping carts stored")[1]
    assert f"{NEW}\n  - OMN-1 (" in shown and f"{OLD} [superseded by OMN-2: {NEW}]" in shown, \
        "shown indented under its replacement, marked, never dropped"


def test_supersede_without_n_takes_the_latest(registry_home, worktrees, cli):
    main, second = worktrees
    two_carts(cli, main, second)
    assert cli(main, "bind", "OMN-5")[0] == 0
    assert cli(main, "decide", "Expire carts after 30 days", "--supersedes", "OMN-1",
               "--supersedes", "OMN-2#1", "--supersedes", "OMN-1#2")[0] == 0
    decisions = decisions_of(cli, main, "OMN-1")
    assert decisions[1]["superseded_by"] == ["OMN-2", "OMN-5"], "OMN-1's latest, named twice"
    assert decisions[0].get("superseded_by") is None
    assert decisions_of(cli, main, "OMN-2")[0]["superseded_by"] == ["OMN-5"]


@pytest.mark.parametrize("reference,says", [
    ("NOPE-9", "no ticket NOPE-9"),
    ("OMN-1#3", "OMN-1 has 2 decisions, not 3"),
    ("OMN-1#0", "N in TICKET#N must be a positive whole number"),
    ("OMN-1#x", "N in TICKET#N must be a positive whole number"),
    ("OMN-3", "OMN-3 has no decision recorded"),
    ("bad id!", "invalid task id"),
])
def test_a_bad_supersedes_is_one_line_and_exit_2_and_records_nothing(home, worktrees, cli, reference, says):
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "first")[0] == 0
    assert cli(main, "decide", "second")[0] == 0
    assert cli(second, "bind", "OMN-3")[0] == 0
    code, out, err = cli(second, "decide", "replacement", "--supersedes", reference)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert decisions_of(cli, second, "OMN-3") == [], "nothing was recorded"


def test_resume_shows_current_related_decisions_unless_asked(home, worktrees, cli):
    main, second = worktrees
    two_carts(cli, main, second)
    assert cli(main, "bind", "OMN-4")[0] == 0
    assert cli(main, "decide", "Store shopping carts durably", "--context", "where carts are stored")[0] == 0
    assert cli(main, "index")[0] == 0

    related = json.loads(cli(main, "resume", "OMN-4", "--json")[1])["related_decisions"]
    assert NEW in [r["text"] for r in related] and OLD not in [r["text"] for r in related]
    related = json.loads(cli(main, "resume", "OMN-4", "--json", "--all-decisions")[1])["related_decisions"]
    texts = [r["text"] for r in related]
    assert texts.index(OLD) == texts.index(NEW) + 1, "directly under its replacement"
    assert related[texts.index(OLD)]["marks"] == [f"superseded by OMN-2: {NEW}"]
    related = json.loads(cli(main, "resume", "OMN-4", "--json", "--all-decisions", "--limit", "1")[1])
    assert [r["text"] for r in related["related_decisions"]] == [NEW, OLD], "the pair takes one place of the limit"
    related = json.loads(cli(second, "resume", "OMN-2", "--json", "--all-decisions")[1])["related_decisions"]
    assert OLD in [r["text"] for r in related] and "OMN-2" not in [r["task_id"] for r in related], \
        "the replacement is the ticket's own: never among its related decisions"


def test_abandoned_and_old_decisions_are_marked_and_ranked_below(home, worktrees, cli, monkeypatch):
    from baton.skills.services.decision_age import aged

    main, second = worktrees
    assert cli(main, "bind", "OMN-5")[0] == 0
    assert cli(main, "decide", "Cache carts in memcached")[0] == 0
    assert cli(main, "end", "--status", "stalled")[0] == 0
    assert cli(second, "bind", "OMN-6")[0] == 0
    assert cli(second, "decide", "Cache carts in the application process")[0] == 0
    assert cli(main, "index")[0] == 0
    hits = json.loads(cli(main, "recall", "Cache carts in memcached", "--json")[1])
    assert [(h["task_id"], h["marks"]) for h in hits] == [("OMN-6", []), ("OMN-5", ["abandoned"])]

    monkeypatch.setenv("BATON_RECALL_HORIZON", "30d")
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        found = stores.recall().search_text("Cache carts", 5)
        later = aged(stores, found, clock.now() + timedelta(days=31))
    finally:
        stores.close()
    assert [(a.hit.record.task_id, a.marks) for a in later] == [
        ("OMN-6", ("older than 30 days",)), ("OMN-5", ("abandoned", "older than 30 days"))]


def test_supersede_links_go_through_the_projector_and_replays_change_nothing(home, worktrees, cli, monkeypatch,
                                                                              kafka_server):
    import uuid

    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", kafka_server.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    main, second = worktrees
    two_carts(cli, main, second)  # the cli fixture runs the projector before each command
    first = decisions_of(cli, main, "OMN-1")
    assert first[1]["superseded_by"] == ["OMN-2"]
    assert cli(main, "projector", "--once", "--idle", "0.3", "--group", "replay-from-the-start")[0] == 0
    assert decisions_of(cli, main, "OMN-1") == first, "applying every event again changes nothing"
    assert cli(main, "index")[0] == 0
    hits = json.loads(cli(main, "recall", OLD, "--json")[1])
    assert [h["text"] for h in flat(hits)[:2]] == [NEW, OLD], "the link read from the projected registry pairs them"


def test_the_hand_built_supersede_link_is_the_model_event():
    import uuid
    from datetime import UTC, datetime

    from baton.registry.wire import event_adapter
    from baton.skills.core.commit import wire_event

    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    body = wire_event("decision_superseded", "OMN-1", "s1", at, event_id=ids[0], decision_event_id=ids[1],
                      by_task_id="OMN-2", by_event_id=ids[2]).body
    event = event_adapter().validate_json(body)
    assert (event.type, str(event.decision_event_id), event.by_task_id, str(event.by_event_id), event.at) == \
        ("decision_superseded", ids[1], "OMN-2", ids[2], at)
    assert json.loads(event_adapter().dump_json(event)) == {**json.loads(body), "at": "2026-11-01T12:00:00.123456Z"}


def test_resume_shows_no_related_decision_below_the_threshold(home, worktrees, cli, monkeypatch):
    """The default threshold (0.4, from bench/recall_eval.py) keeps a decision scoring 0.33
    against the ticket's own out of resume, and one scoring 0.52 in."""
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", NEW, "--context", "where carts are stored")[0] == 0
    assert cli(second, "bind", "OMN-2")[0] == 0
    assert cli(second, "decide", "Persist orders in PostgreSQL")[0] == 0
    assert cli(second, "bind", "OMN-3")[0] == 0
    assert cli(second, "decide", "Keep the checkout page fast")[0] == 0
    assert cli(main, "index")[0] == 0

    related = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["related_decisions"]
    assert [r["task_id"] for r in related] == ["OMN-2"]
    monkeypatch.setenv("BATON_RECALL_MIN_SCORE", "0.3")
    related = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["related_decisions"]
    assert [r["task_id"] for r in related] == ["OMN-2", "OMN-3"]


NEWEST = "Keep shopping carts in PostgreSQL, one JSON row per cart"


def three_carts(cli, main, second) -> None:
    """two_carts, then OMN-3 replacing OMN-2's decision: a chain OMN-1#2 -> OMN-2 -> OMN-3."""
    two_carts(cli, main, second)
    assert cli(main, "bind", "OMN-3")[0] == 0
    assert cli(main, "decide", NEWEST, "--context", "where carts are stored", "--supersedes", "OMN-2")[0] == 0


def test_a_superseded_decision_sits_under_the_newest_of_its_chain(registry_home, worktrees, cli):
    main, second = worktrees
    three_carts(cli, main, second)
    assert cli(main, "bind", "OMN-9")[0] == 0
    assert cli(main, "decide", "Serve product images as WebP", "--context", "image formats")[0] == 0
    assert cli(main, "index")[0] == 0

    hits = json.loads(cli(main, "recall", OLD, "--json", "--limit", "10")[1])
    chain = [hits[0], *hits[0]["replaces"]]
    assert [h["text"] for h in chain] == [NEWEST, NEW, OLD], "the newest first, the chain in it, nearest first"
    assert [h["marks"] for h in chain] == [[], [f"superseded by OMN-3: {NEWEST}"], [f"superseded by OMN-2: {NEW}"]]
    assert len(flat(hits)) == len(hits) + 2, "the chain is the first result, where the old decision ranked"


def _hits_of(stores, query: str, *texts: str):
    found = {hit.record.text: hit for hit in stores.recall().search_text(query, 10)}
    return [found[text] for text in texts]


def _aged_three_carts(cli, worktrees, *texts: str):
    """three_carts, indexed; the search's hits for texts, in that order, and what aged shows of them."""
    from baton.skills.services.decision_age import aged

    main, second = worktrees
    three_carts(cli, main, second)
    assert cli(main, "index")[0] == 0
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        hits = _hits_of(stores, "shopping carts", *texts)
        return hits, aged(stores, hits, clock.now())
    finally:
        stores.close()


def test_a_replacement_that_did_not_score_is_fetched_by_its_link(registry_home, worktrees, cli):
    main, _ = worktrees
    (images, old), shown = _aged_three_carts(cli, worktrees, "Serve product images from the CDN", OLD)
    assert [[(d.hit.record.task_id, d.hit.record.text, d.current) for d in (a, *a.replaces)] for a in shown] == [
        [("OMN-1", "Serve product images from the CDN", True)],
        [("OMN-3", NEWEST, True), ("OMN-2", NEW, False), ("OMN-1", OLD, False)]]
    assert shown[1].hit.score == old.score, "the replacement ranks where its superseded decision scored"
    # `baton recall --limit 1`: the replacement, never the superseded decision alone.
    hits = json.loads(cli(main, "recall", OLD, "--json", "--limit", "1")[1])
    assert [[(h["task_id"], h["current"]) for h in (hit, *hit["replaces"])] for hit in hits] == [
        [("OMN-3", True), ("OMN-2", False), ("OMN-1", False)]]


def test_what_a_replacement_replaced_is_fetched_by_its_link(registry_home, worktrees, cli):
    """Only the newest decision scored: the chain it replaced is read by the replacing
    tickets' own links and shown under it, nearest first."""
    (newest, _), shown = _aged_three_carts(cli, worktrees, NEWEST, "Serve product images from the CDN")
    assert [[(d.hit.record.task_id, d.hit.record.text, d.current) for d in (a, *a.replaces)] for a in shown] == [
        [("OMN-3", NEWEST, True), ("OMN-2", NEW, False), ("OMN-1", OLD, False)],
        [("OMN-1", "Serve product images from the CDN", True)]]
    chain = (shown[0], *shown[0].replaces)
    assert {a.hit.score for a in chain} == {newest.score}, "the chain ranks where its newest decision scored"
    assert chain[1].marks == (f"superseded by OMN-3: {NEWEST}",)


def test_a_replacement_is_read_in_its_own_project(registry_home, worktrees, cli, monkeypatch):
    """Two projects in one data home, each with tickets OMN-1 and OMN-2: a hit's links are read
    in the registry of the hit's project, whichever project's stores read them."""
    from baton.skills.services.decision_age import aged

    main, second = worktrees
    two_carts(cli, main, second)
    assert cli(main, "--project", "other", "bind", "OMN-1")[0] == 0
    assert cli(main, "--project", "other", "decide", "Keep invoices in S3")[0] == 0
    assert cli(main, "--project", "other", "bind", "OMN-2")[0] == 0
    assert cli(main, "--project", "other", "decide", "Keep invoices in PostgreSQL", "--supersedes", "OMN-1")[0] == 0
    assert cli(main, "index")[0] == 0
    assert cli(main, "--project", "other", "index")[0] == 0

    shop = Stores(Settings.from_env(), projection=apply_events)
    monkeypatch.setenv("BATON_PROJECT", "other")
    other = Stores(Settings.from_env(), projection=apply_events)
    try:
        old, = _hits_of(shop, "shopping carts", OLD)
        invoices, = _hits_of(other, "invoices", "Keep invoices in S3")
        from_other = aged(other, [old], clock.now())
        from_shop = aged(shop, [invoices], clock.now())
    finally:
        shop.close()
        other.close()
    assert [(d.hit.record.project, d.hit.record.text) for a in from_other for d in (a, *a.replaces)] == [
        (shop.project, NEW), (shop.project, OLD)]
    assert [(d.hit.record.project, d.hit.record.text) for a in from_shop for d in (a, *a.replaces)] == [
        ("other", "Keep invoices in PostgreSQL"), ("other", "Keep invoices in S3")]
    hits = json.loads(cli(main, "--project", "other", "recall", "invoices", "--json")[1])
    assert [[h["text"] for h in (hit, *hit["replaces"])] for hit in hits] == [
        ["Keep invoices in PostgreSQL", "Keep invoices in S3"]]


def test_a_superseded_decision_and_its_chain_take_one_place_of_the_limit(any_home, worktrees, cli):
    """`--limit k` is k results, a chain counting once: in the CLI's JSON and text, and through
    the MCP server, on the embedded stores and on the servers (Qdrant for recall)."""
    from tests.test_mcp_wire import converse, initialize, tool

    main, second = worktrees
    three_carts(cli, main, second)
    others = ["Serve product images as WebP", "Cache cart totals for a minute", "Ship carts to the data warehouse"]
    for number, text in enumerate(others, start=10):
        assert cli(main, "bind", f"OMN-{number}")[0] == 0
        assert cli(main, "decide", text, "--context", "carts and images")[0] == 0
    assert cli(main, "index")[0] == 0

    for limit in (1, 2, 3):
        hits = json.loads(cli(main, "recall", OLD, "--json", "--limit", str(limit))[1])
        assert len(hits) == limit, hits
        assert [h["text"] for h in (hits[0], *hits[0]["replaces"])] == [NEWEST, NEW, OLD]
        assert all(h["replaces"] == [] for h in hits[1:]) and {h["text"] for h in hits[1:]} <= set(others)
        shown = cli(main, "recall", OLD, "--limit", str(limit))[1].splitlines()
        assert len([line for line in shown if line.startswith("- ")]) == limit
        assert [line.split(": ", 1)[1] for line in shown[:3]] == [
            NEWEST, f"{NEW} [superseded by OMN-3: {NEWEST}]", f"{OLD} [superseded by OMN-2: {NEW}]"]
        assert shown[1].startswith("  - OMN-2 (") and shown[2].startswith("  - OMN-1 ("), "indented in its place"

    answers = converse(main, [initialize(1, "2025-06-18"), tool(2, "recall_decisions", {"query": OLD, "limit": 2})])
    over_mcp = json.loads(answers[1]["result"]["content"][0]["text"])
    assert over_mcp == json.loads(cli(main, "recall", OLD, "--json", "--limit", "2")[1])
