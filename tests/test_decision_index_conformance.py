"""One conformance suite for every DecisionIndex backend.

The Qdrant server backend runs here through qdrant-client's local mode (`file:` URL): no
Qdrant server can be installed on the build machines, and local mode exercises the same
client calls.
"""

import numpy as np
import pytest

from baton.recall.base import DecisionRecord


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
    assert index.vectors_for_task(P, "A", 10) == {}
    assert index.search([unit(1)], project=P, limit=5, exclude_task_id="A") == []


def test_upsert_is_idempotent_and_search_excludes_the_task(index):
    records = [record("A", "a1"), record("B", "b1"), record("C", "c1")]
    vectors = [unit(1), unit(1), unit(2)]
    index.upsert(records, vectors)
    index.upsert(records[:1], vectors[:1])
    assert index.count() == 3
    own = index.vectors_for_task(P, "A", 10)
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


def test_search_scores_are_cosine(index):
    index.upsert([record("A", "a1")], [unit(3)])
    scaled = (np.array(unit(3)) * 7).tolist()  # cosine ignores length
    hits = index.search([scaled], project=P, limit=1, exclude_task_id=None)
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_delete_tasks_removes_their_decisions_and_search_follows(index):
    index.upsert([record("GONE", "g1"), record("GONE", "g2"), record("KEPT", "k1")], [unit(1), unit(2), unit(3)])
    assert index.search([unit(1)], project=P, limit=5, exclude_task_id=None)[0].record.task_id == "GONE"
    assert index.delete_tasks(P, ["GONE", "NEVER"]) == 2
    assert index.count() == 1 and index.vectors_for_task(P, "GONE", 10) == {}
    assert [h.record.task_id for h in index.search([unit(1)], project=P, limit=5, exclude_task_id=None)] == ["KEPT"]
    assert index.delete_tasks(P, []) == 0
