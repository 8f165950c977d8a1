"""One conformance suite for every DecisionIndex backend.

The Qdrant server backend runs here through qdrant-client's local mode (`file:` URL): no
Qdrant server can be installed on the build machines, and local mode exercises the same
client calls.
"""

import numpy as np
import pytest

from baton.recall.base import DecisionRecord
from tests.stores import ticket_vectors


@pytest.fixture(params=["embedded", "qdrant-client"])
def index(request, tmp_path):
    if request.param == "embedded":
        from baton.recall.embedded import EmbeddedDecisionIndex

        backend = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    else:
        from baton.recall.qdrant_server import QdrantServerIndex

        backend = QdrantServerIndex(f"file://{tmp_path / 'qdrant'}", timeout=2)
    yield backend
    backend.close()


def unit(seed: int, dims: int = 384) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(dims)
    return (vector / np.linalg.norm(vector)).tolist()


P = "github.com/acme/shop"  # the project of every point but where a test says otherwise


def record(task: str, text: str, project: str = P) -> DecisionRecord:
    return DecisionRecord(project=project, task_id=task, session_id="s", text=text,
                          recorded_at="2026-11-01T00:00:00+00:00", repo="r")


def test_empty_index(index):
    assert index.count() == 0
    assert ticket_vectors(index, P, "A") == {}
    assert index.search([unit(1)], project=P, limit=5, exclude_task_id="A") == []


def test_upsert_is_idempotent_and_search_excludes_the_task(index):
    records = [record("A", "a1"), record("B", "b1"), record("C", "c1")]
    vectors = [unit(1), unit(1), unit(2)]
    index.upsert(records, vectors)
    index.upsert(records[:1], vectors[:1])
    assert index.count() == 3
    own = ticket_vectors(index, P, "A")
    assert list(own) == [records[0].point_id]
    hits = index.search(list(own.values()), project=P, limit=5, exclude_task_id="A")
    assert hits[0].record.task_id == "B" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert "A" not in {h.record.task_id for h in hits}
    assert hits[0].record == records[1]


def test_points_copy_everything(index):
    records = [record("T", f"decision {i}") for i in range(25)]
    index.upsert(records, [unit(i) for i in range(25)])
    copied = list(index.points(P, batch=10))
    assert sorted(r.text for r, _ in copied) == sorted(r.text for r in records)
    assert all(len(v) == 384 for _, v in copied)


def test_stored_and_vectors_of(index):
    records = [record("A", "a1"), record("A", "a2")]
    index.upsert(records, [unit(1), unit(2)])
    absent = record("A", "never stored").point_id
    assert index.stored([r.point_id for r in records] + [absent]) == {r.point_id for r in records}
    vectors = index.vectors_of([records[1].point_id, absent])
    assert list(vectors) == [records[1].point_id]
    assert np.allclose(vectors[records[1].point_id], unit(2), atol=1e-6)


def test_vectors_of_answers_every_point_asked(index):
    """However many are asked (the embedded index once answered the first 500 only, which
    an hour's soak, whose tickets held over 500 decisions, read as decisions lost)."""
    records = [record("A", f"decision {n}") for n in range(600)]
    index.upsert(records, [unit(n) for n in range(600)])
    vectors = index.vectors_of([r.point_id for r in records])
    assert set(vectors) == {r.point_id for r in records}
    assert np.allclose(vectors[records[599].point_id], unit(599), atol=1e-6)


def test_search_scores_are_cosine(index):
    index.upsert([record("A", "a1")], [unit(3)])
    scaled = (np.array(unit(3)) * 7).tolist()  # cosine ignores length
    hits = index.search([scaled], project=P, limit=1, exclude_task_id=None)
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_delete_tasks_removes_their_decisions_and_search_follows(index):
    index.upsert([record("GONE", "g1"), record("GONE", "g2"), record("KEPT", "k1")], [unit(1), unit(2), unit(3)])
    assert index.search([unit(1)], project=P, limit=5, exclude_task_id=None)[0].record.task_id == "GONE"
    assert index.delete_tasks(P, ["GONE", "NEVER"]) == 2
    assert index.count() == 1 and ticket_vectors(index, P, "GONE") == {}
    assert [h.record.task_id for h in index.search([unit(1)], project=P, limit=5, exclude_task_id=None)] == ["KEPT"]
    assert index.delete_tasks(P, []) == 0


RIVAL = "github.com/rival/shop"


def near(base: list[float], seed: int, noise: float) -> list[float]:
    """A unit vector at a distance from base that grows with noise."""
    vector = np.array(base) + noise * np.array(unit(seed))
    return (vector / np.linalg.norm(vector)).tolist()


def test_every_read_is_of_one_project(index):
    mine = [record("A", "same ticket, same text"), record("B", "b1"), record("B", "b2")]
    theirs = [record("A", "same ticket, same text", RIVAL)] + [record(f"R-{i}", f"r{i}", RIVAL) for i in range(30)]
    # The other project's decisions are all nearer the query than this one's.
    index.upsert(mine, [unit(1), near(unit(1), 2, 1.0), near(unit(1), 3, 1.0)])
    index.upsert(theirs, [unit(1)] + [near(unit(1), 10 + i, 0.1) for i in range(30)])
    assert mine[0].point_id != theirs[0].point_id, "the same ticket id in two projects is two points"
    assert (index.count(), index.count(P), index.count(RIVAL)) == (34, 3, 31)

    # The filter is inside the search: the top 2 are this project's best, however many
    # nearer points the other project holds.
    hits = index.search([unit(1)], project=P, limit=2, exclude_task_id="A")
    assert sorted(h.record.text for h in hits) == ["b1", "b2"] and {h.record.project for h in hits} == {P}
    hits = index.search([unit(1)], project=RIVAL, limit=5, exclude_task_id="A")
    assert len(hits) == 5 and {h.record.project for h in hits} == {RIVAL}
    assert "A" not in {h.record.task_id for h in hits}
    assert [h.record for h in index.search([unit(1)], project=P, limit=1, exclude_task_id=None)] == [mine[0]]
    assert index.search([unit(1)], project="github.com/nobody/else", limit=5, exclude_task_id=None) == []

    assert list(ticket_vectors(index, P, "A")) == [mine[0].point_id]
    assert sorted(r.text for r, _ in index.points(P)) == sorted(r.text for r in mine)
    assert index.delete_tasks(RIVAL, ["A"]) == 1
    assert list(ticket_vectors(index, P, "A")) == [mine[0].point_id], "the other project's A stays"
    assert index.count(RIVAL) == 30 and index.count(P) == 3


def store_unscoped(index, task: str, text: str, context: str, vector: list[float]):
    """A point as Baton stored it before projects: its id of (ticket, text), no project."""
    import json

    from baton.recall.wire import unscoped_point_id

    point_id = unscoped_point_id(task, text)
    payload = {"task_id": task, "session_id": "s", "text": text, "context": context,
               "recorded_at": "2026-01-01T00:00:00+00:00", "repo": "r"}
    if hasattr(index, "_db"):  # embedded: a row of the store as its migration left it
        from baton.sqlite import write_transaction

        conn = index._db.conn()
        with write_transaction(conn):
            conn.execute("INSERT INTO vectors (point_id, task_id, payload, vector) VALUES (?, ?, ?, ?)",
                         (str(point_id), task, json.dumps(payload), np.asarray(vector, "<f4").tobytes()))
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'count'")
    else:
        from qdrant_client import models

        from baton.recall.base import COLLECTION

        index._call(lambda client: client.upsert(COLLECTION, points=[
            models.PointStruct(id=str(point_id), vector=vector, payload=payload)], wait=True))
    return point_id


def test_points_stored_before_projects_are_never_read_until_healed(index):
    scoped = record("B", "scoped")
    index.upsert([scoped], [unit(5)])
    old = store_unscoped(index, "A", "old a", "why", unit(5))
    store_unscoped(index, "A", "old a2", "", unit(6))
    store_unscoped(index, "C", "old c", "", near(unit(5), 7, 0.01))

    # Never read: not by a search, a ticket's vectors or a copy, nearest as they are.
    assert [h.record for h in index.search([unit(5)], project=P, limit=5, exclude_task_id=None)] == [scoped]
    assert ticket_vectors(index, P, "A") == {} and [r for r, _ in index.points(P)] == [scoped]
    assert (index.count(), index.count(P), index.unscoped_count()) == (4, 1, 3)

    # What healing reads: the text each embedded and its vector, by the id from before projects.
    from baton.recall.wire import unscoped_point_id

    found = index.unscoped_points([old, unscoped_point_id("A", "never stored"), scoped.point_id])
    assert list(found) == [old] and found[old][0] == "old a. why"
    assert np.allclose(found[old][1], unit(5), atol=1e-6)

    assert index.delete_unscoped() == 3
    assert (index.count(), index.unscoped_count()) == (1, 0)
    assert [h.record for h in index.search([unit(6)], project=P, limit=5, exclude_task_id=None)] == [scoped]
