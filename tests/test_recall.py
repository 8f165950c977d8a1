"""Decision recall: the NumPy encoder equals sentence-transformers, search uses stored vectors,
and the indexer embeds each queued decision once."""

import json
import math
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from baton.recall.base import DecisionRecord
from baton.recall.embedded import EmbeddedDecisionIndex
from baton.recall.embedding import GELU_BLOCK, _gelu
from baton.recall.indexer import Indexer
from baton.recall.queue import EmbeddingQueue
from baton.recall.search import DecisionSearchClient
from baton.recall.wire import decision_point_id, unscoped_point_id
from tests.stores import ticket_vectors

P = "github.com/acme/shop"  # the project of every decision here, but where a test says otherwise
REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


@pytest.mark.slow
def test_embeddings_match_sentence_transformers(encoder):
    """Reference values computed with sentence-transformers on the same model package."""
    vectors = encoder.encode(REFERENCE["sentences"])
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.allclose(vectors[:, :8], REFERENCE["head"], atol=1e-5)
    assert np.allclose(vectors @ vectors.T, REFERENCE["cosine"], atol=1e-5)


def test_the_encoder_stays_in_float32(encoder, monkeypatch):
    """A float64 constant would promote every activation (three times the time, same vectors)."""
    seen = set()
    linear = encoder._linear

    def spy(x, name):
        seen.add(x.dtype)
        return linear(x, name)

    monkeypatch.setattr(encoder, "_linear", spy)
    encoder.encode(["one sentence", "and another, longer sentence"])
    assert seen == {np.dtype(np.float32)}


def test_the_blocked_gelu_is_the_expression_bit_for_bit():
    """The GELU runs in place a block at a time: every value is exactly what the textbook
    expression gives, across blocks and a remainder, so no stored vector moves."""
    rng = np.random.default_rng(7)
    h = (rng.standard_normal(2 * GELU_BLOCK + 123) * 3).astype(np.float32)
    x = np.abs(h / math.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    expected = 0.5 * h * (1.0 + np.sign(h) * (1.0 - poly * np.exp(-x * x)))
    got = _gelu(h.copy())
    assert got.dtype == np.float32 and np.array_equal(got, expected)
    columns = h[:-123].reshape(2, GELU_BLOCK).T  # not contiguous: written to a copy, which is returned
    assert np.array_equal(_gelu(columns), expected[:-123].reshape(2, GELU_BLOCK).T)


def test_reference_point_ids():
    """A point is of its project, ticket and text; the ids from before projects (of the ticket
    and text only) stay computable, as the healing looks their vectors up."""
    assert str(decision_point_id(P, "OMN-1234", "Use Postgres")) == "13462b17-2ab5-5619-8ba7-d863070b07b2"
    assert str(decision_point_id(P, "OMN-5678", "Use Postgres")) == "b2872d7c-23cb-56c7-8548-3c950489d6df"
    assert str(decision_point_id("github.com/rival/shop", "OMN-1234", "Use Postgres")) == \
        "f84eb79c-42fd-5fe8-8546-9fe7e26a3864"
    assert str(unscoped_point_id("OMN-1234", "Use Postgres")) == "7ce24a14-64ed-5ef7-b7d3-0f9587ed925e"
    assert str(unscoped_point_id("OMN-5678", "Use Postgres")) == "8550e6b4-6cfd-5064-a27e-7efe88944f4a"


def record(task, text, context=""):
    return DecisionRecord(project=P, task_id=task, session_id="s", text=text, context=context,
                          recorded_at="2026-11-01T00:00:00+00:00", repo="r")


def indexed(tmp_path, encoder, records, loads=None):
    """An index holding records, embedded through the queue and the indexer."""
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    queue = EmbeddingQueue(tmp_path / "recall", timeout=2)

    def load():
        if loads is not None:
            loads.append(1)
        return encoder

    queue.add(records)
    Indexer(queue, index, load).run()
    assert queue.count() == 0
    return index, queue


def test_search_related_excludes_the_task_and_reuses_stored_vectors(tmp_path, encoder):
    loads = []
    index, _ = indexed(tmp_path, encoder, [
        record("A", "Use Postgres for the session store"), record("B", "Store sessions in PostgreSQL"),
        record("C", "The cat sat on the mat"), record("B", "Store sessions in PostgreSQL")], loads)
    assert index.count() == 3, "a decision recorded twice is one point"
    assert loads == [1]
    reader = DecisionSearchClient(index, P, lambda: pytest.fail("a related search never loads the model"))
    found = reader.search_related("A", 5, own=[record("A", "Use Postgres for the session store")], min_score=0.3)
    assert [h.record.task_id for h in found.hits] == ["B"]
    assert 0.3 < found.hits[0].score <= 1
    assert found.unindexed == []


def test_search_related_returns_what_the_index_lacks_instead_of_embedding_it(tmp_path, encoder):
    index, _ = indexed(tmp_path, encoder, [record("B", "Retry Kafka produce with idempotence enabled")])
    client = DecisionSearchClient(index, P, lambda: pytest.fail("no embedding on the read path"))
    missing = record("A", "Make the Kafka producer idempotent")
    found = client.search_related("A", 5, own=[missing])
    assert found.hits == [] and found.unindexed == [missing]


@pytest.mark.slow
def test_the_indexer_never_embeds_a_stored_decision_again(tmp_path, encoder):
    embedded = []

    class Counting:
        def encode(self, texts):
            embedded.extend(texts)
            return encoder.encode(texts)

        def windows(self, texts):
            return encoder.windows(texts)

    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    queue = EmbeddingQueue(tmp_path / "recall", timeout=2)
    indexer = Indexer(queue, index, Counting)
    first = [record("T", f"decision {i}") for i in range(40)]
    queue.add(first)
    assert indexer.run().embedded == 40
    queue.add([*first[:10], record("T", "one more")])  # queued again, e.g. by a resume that raced the indexer
    report = indexer.run()
    assert (report.embedded, report.already) == (1, 10)
    assert len(embedded) == 41 and index.count() == 41


def test_an_unreadable_queue_entry_is_dropped_not_fatal(tmp_path, encoder):
    index, queue = indexed(tmp_path, encoder, [])
    queue.add([record("T", "fine")])
    conn = queue.conn()
    conn.execute("INSERT INTO queued (point_id, payload, queued_at) VALUES (?, ?, 0)",
                 ("00000000-0000-0000-0000-000000000001", "{not json"))
    report = Indexer(queue, index, lambda: encoder).run()
    assert report.embedded == 1 and len(report.dropped) == 1 and queue.count() == 0


def _use_index(path, task, barrier):
    rng = np.random.default_rng(abs(hash(task)) % 1000)
    index = EmbeddedDecisionIndex(Path(path), timeout=10)
    barrier.wait()
    for i in range(20):
        vector = rng.standard_normal(384)
        index.upsert([record(task, f"{task} decision {i}")], [vector / np.linalg.norm(vector)])
        hits = index.search([vector], project=P, limit=3, exclude_task_id=task)
        assert all(h.record.task_id != task for h in hits)


@pytest.mark.slow
def test_two_processes_share_the_index(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    workers = [context.Process(target=_use_index, args=(str(tmp_path / "recall"), task, barrier)) for task in "XY"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    assert index.count() == 40
    vector = ticket_vectors(index, P, "X").popitem()[1]
    assert len(index.search([vector], project=P, limit=40, exclude_task_id=None)) == 40
