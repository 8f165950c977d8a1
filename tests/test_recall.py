"""Decision recall: the NumPy encoder equals sentence-transformers, and search uses stored vectors."""

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from recall.base import DecisionRecord, decision_point_id
from recall.edge import EdgeDecisionIndex
from recall.embedding import MiniLMEncoder
from recall.search import DecisionSearchClient

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder.load()


def test_embeddings_match_sentence_transformers(encoder):
    """Reference values computed with sentence-transformers on the same model package."""
    vectors = encoder.encode(REFERENCE["sentences"])
    assert vectors.shape == (5, 384)
    assert np.allclose(vectors[:, :8], REFERENCE["head"], atol=1e-5)
    assert np.allclose(vectors @ vectors.T, REFERENCE["cosine"], atol=1e-5)


def test_reference_point_ids():
    assert str(decision_point_id("OMN-1234", "Use Postgres")) == "7ce24a14-64ed-5ef7-b7d3-0f9587ed925e"
    assert str(decision_point_id("OMN-5678", "Use Postgres")) == "8550e6b4-6cfd-5064-a27e-7efe88944f4a"


def record(task, text, context=""):
    return DecisionRecord(task_id=task, session_id="s", text=text, context=context,
                          recorded_at="2026-11-01T00:00:00+00:00", repo="r")


def test_search_related_excludes_the_task_and_reuses_stored_vectors(tmp_path, encoder):
    loads = []

    def load():
        loads.append(1)
        return encoder

    index = EdgeDecisionIndex(tmp_path / "decisions", timeout=2)
    writer = DecisionSearchClient(index, load)
    writer.record([record("A", "Use Postgres for the session store"), record("B", "Store sessions in PostgreSQL"),
                   record("C", "The cat sat on the mat"), record("B", "Store sessions in PostgreSQL")])
    assert index.count() == 3, "a decision recorded twice is one point"
    reader = DecisionSearchClient(index, load)
    loads.clear()
    hits = reader.search_related("A", 5, own=[record("A", "Use Postgres for the session store")], min_score=0.3)
    assert [h.record.task_id for h in hits] == ["B"]
    assert 0.3 < hits[0].score <= 1
    assert loads == [] and not reader.encoder_loaded


def test_search_related_indexes_decisions_the_index_missed(tmp_path, encoder):
    index = EdgeDecisionIndex(tmp_path / "decisions", timeout=2)
    client = DecisionSearchClient(index, lambda: encoder)
    client.record([record("B", "Retry Kafka produce with idempotence enabled")])
    hits = client.search_related("A", 5, own=[record("A", "Make the Kafka producer idempotent")])
    assert hits and hits[0].record.task_id == "B"
    assert decision_point_id("A", "Make the Kafka producer idempotent") in index.vectors_for_task("A", 10)


def _use_index(path, task, barrier):
    rng = np.random.default_rng(abs(hash(task)) % 1000)
    index = EdgeDecisionIndex(Path(path), timeout=10)
    barrier.wait()
    for i in range(20):
        vector = rng.standard_normal(384)
        index.upsert([record(task, f"{task} decision {i}")], [vector / np.linalg.norm(vector)])
        index.search([vector], limit=3, exclude_task_id=task)


def test_two_processes_share_the_index(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    workers = [context.Process(target=_use_index, args=(str(tmp_path / "decisions"), task, barrier)) for task in "XY"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert EdgeDecisionIndex(tmp_path / "decisions", timeout=2).count() == 40
