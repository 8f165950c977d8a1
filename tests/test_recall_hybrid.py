"""Hybrid recall: the keyword leg beside the vector leg, fused by standardised scores; either answers while
the other cannot, on the embedded index and on Qdrant (qdrant-client's local mode); the
keywords heal from the vector store; only decisions embedded by an older recipe are
embedded again."""

import sqlite3

import pytest

from baton.errors import StoreUnavailable
from baton.recall.base import RECIPE, DecisionRecord, ScoredDecision
from baton.recall.embedded import EmbeddedDecisionIndex
from baton.recall.embedding import MiniLMEncoder, ModelMissing
from baton.recall.fusion import fuse
from baton.recall.indexer import Indexer
from baton.recall.queue import EmbeddingQueue
from baton.recall.search import DecisionSearchClient

P = "github.com/acme/shop"

DECISIONS = [
    ("A", "Store sessions in PostgreSQL with a row per agent", "Sessions must survive restarts"),
    ("B", "Publish conflict signals on the Kafka topic signals", "Agents need to hear about overlaps"),
    ("C", "Render the dashboard with server-side templates", "No JavaScript build step"),
    ("D", "Embed decisions with MiniLM and search them by cosine", "Recall of earlier decisions"),
]


def record(task: str, text: str, context: str = "") -> DecisionRecord:
    return DecisionRecord(project=P, task_id=task, session_id="s", text=text, context=context,
                          recorded_at="2026-11-01T00:00:00+00:00", repo="r")


def scored(*tasks: str) -> list[ScoredDecision]:
    return [ScoredDecision(record=record(task, f"decision of {task}"), score=0.5) for task in tasks]


def tasks(hits: list[ScoredDecision]) -> list[str]:
    return [h.record.task_id for h in hits]


def no_model() -> MiniLMEncoder:
    raise ModelMissing("the embedding model is not installed (this test)")


def filled(index, encoder, tmp_path):
    queue = EmbeddingQueue(tmp_path / "queue", timeout=2)
    queue.add([record(task, text, context) for task, text, context in DECISIONS])
    Indexer(queue, index, lambda: encoder).run()
    assert index.count(P) == len(DECISIONS)
    return index


def garbled(encoder, tmp_path, name: str) -> None:
    """An embedded index filled, closed, and then one of its files made unreadable."""
    filled(EmbeddedDecisionIndex(tmp_path / "recall", timeout=2), encoder, tmp_path).close()
    (tmp_path / "recall" / name).write_bytes(b"not a database" * 512)
    for suffix in ("-wal", "-shm"):
        (tmp_path / "recall" / f"{name}{suffix}").unlink(missing_ok=True)


def cosines(**scores: float) -> list[ScoredDecision]:
    return [ScoredDecision(record=record(task, f"decision of {task}"), score=score) for task, score in scores.items()]


def test_fusion_ranks_a_decision_both_legs_find_above_one_leg_s_first():
    fused = fuse(cosines(X=0.60, Y=0.58, Z=0.40, V=0.30), scored("W", "Y", "Z", "X"), 10)
    assert tasks(fused) == ["Y", "X", "W", "Z", "V"]
    assert fused[0].score < 1 and fuse(scored("Y"), scored("Y"), 1)[0].score == pytest.approx(1.0)
    assert tasks(fuse(scored("X", "Y", "Z"), None, 2)) == ["X", "Y"], "one leg keeps its order, cut"
    assert tasks(fuse(None, scored("X", "Y", "Z"), 2)) == ["X", "Y"], "either leg alone"
    assert fuse(None, None, 5) == [] and tasks(fuse([], scored("Q"), 5)) == ["Q"]
    assert tasks(fuse(scored("A", "B"), scored("B"), 10)) == ["B", "A"], "a leg's only hit counts"


def test_a_clear_vector_first_is_not_pulled_down_by_the_keywords_order():
    """The keywords rank C first and A last. Where A's cosine is far ahead of the others' it
    stays first; where A and B are close by cosine and C far behind, the keywords order A
    and B, and C stays last (reciprocal-rank fusion sees only ranks: A and C level both times)."""
    keyword = scored("C", "B", "A")
    assert tasks(fuse(cosines(A=0.80, B=0.45, C=0.44), keyword, 10)) == ["A", "C", "B"]
    assert tasks(fuse(cosines(A=0.46, B=0.45, C=0.30), keyword, 10)) == ["B", "A", "C"]


def test_both_legs_answer_a_text_query(make_index, encoder, tmp_path):
    client = DecisionSearchClient(filled(make_index(), encoder, tmp_path), P, lambda: encoder)
    assert tasks(client.search_text("Kafka topic for conflict signals", 2))[0] == "B"
    keyword = client.index.search_keywords("kafka", project=P, limit=5, exclude_task_id=None)
    assert tasks(keyword) == ["B"]
    assert client.index.search_keywords("kafka", project="github.com/rival/shop", limit=5,
                                        exclude_task_id=None) == []
    assert client.index.search_keywords("kafka", project=P, limit=5, exclude_task_id="B") == []


def test_without_the_model_the_keyword_leg_answers(make_index, encoder, tmp_path):
    index = filled(make_index(), encoder, tmp_path)
    client = DecisionSearchClient(index, P, no_model)
    assert tasks(client.search_text("server-side templates for the dashboard", 5))[0] == "C"


def test_a_decision_waiting_for_the_model_is_found_by_its_words(tmp_path):
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    queue = EmbeddingQueue(tmp_path / "recall", timeout=2)
    queue.add([record("E", "Sign handoffs with Ed25519 keys")])
    with pytest.raises(ModelMissing):
        Indexer(queue, index, no_model).run()
    assert queue.count() == 1, "still queued for the model"
    assert tasks(DecisionSearchClient(index, P, no_model).search_text("ed25519", 5)) == ["E"]


def test_an_unreadable_vector_store_leaves_the_keyword_leg_answering(encoder, tmp_path):
    garbled(encoder, tmp_path, "vectors.db")
    client = DecisionSearchClient(EmbeddedDecisionIndex(tmp_path / "recall", timeout=2), P, lambda: encoder)
    assert tasks(client.search_text("PostgreSQL sessions", 5)) == ["A"]
    related = client.search_related("X", 5, own=[record("X", "Consume the Kafka topic of signals")])
    assert tasks(related.hits) == ["B"], "the only other ticket that shares its words"
    assert related.unindexed == [], "unknown while the vectors cannot be read"
    client.close()


def test_an_unreadable_keyword_store_leaves_the_vector_leg_answering(encoder, tmp_path):
    garbled(encoder, tmp_path, "keywords.db")
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    with pytest.raises(StoreUnavailable):
        index.search_keywords("kafka", project=P, limit=5, exclude_task_id=None)
    client = DecisionSearchClient(index, P, lambda: encoder)
    assert tasks(client.search_text("Kafka topic for conflict signals", 1)) == ["B"]
    client.close()


def test_with_neither_leg_the_search_is_unavailable(encoder, tmp_path):
    garbled(encoder, tmp_path, "keywords.db")
    client = DecisionSearchClient(EmbeddedDecisionIndex(tmp_path / "recall", timeout=2), P, no_model)
    with pytest.raises(ModelMissing):
        client.search_text("kafka", 5)
    client.close()


def test_a_qdrant_collection_without_keywords_leaves_the_vector_leg_answering(encoder, tmp_path):
    from qdrant_client import QdrantClient, models

    from baton.recall.qdrant_server import QdrantServerIndex

    older = QdrantClient(path=str(tmp_path / "qdrant"))  # a collection made before the keyword leg
    older.create_collection("decisions", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
    older.close()
    index = filled(QdrantServerIndex(f"file://{tmp_path / 'qdrant'}", timeout=2), encoder, tmp_path)
    with pytest.raises(StoreUnavailable, match="predates keyword search"):
        index.search_keywords("kafka", project=P, limit=5, exclude_task_id=None)
    client = DecisionSearchClient(index, P, lambda: encoder)
    assert tasks(client.search_text("Kafka topic for conflict signals", 1)) == ["B"]
    with pytest.raises(StoreUnavailable):
        DecisionSearchClient(index, P, no_model).search_text("kafka", 5)
    own = [record("X", "Publish conflict signals on a Kafka topic")]
    index.upsert(own, encoder.encode([own[0].embedding_text()]))
    assert tasks(client.search_related("X", 1, own=own).hits) == ["B"]
    client.close()


def test_the_keywords_heal_from_the_vector_store_after_deletion(encoder, tmp_path):
    index = filled(EmbeddedDecisionIndex(tmp_path / "recall", timeout=2), encoder, tmp_path)
    index.close()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / "recall" / f"keywords.db{suffix}").unlink(missing_ok=True)
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    assert tasks(index.search_keywords("templates dashboard", project=P, limit=5, exclude_task_id=None)) == ["C"]
    assert index._keywords.count() == len(DECISIONS)
    index.delete_tasks(P, ["C"])
    assert index.search_keywords("templates dashboard", project=P, limit=5, exclude_task_id=None) == []
    index.close()


def test_only_decisions_of_an_older_recipe_are_embedded_again(make_index, encoder, tmp_path, monkeypatch):
    index = filled(make_index(), encoder, tmp_path)
    old, current = record("A", *DECISIONS[0][1:]), record("B", *DECISIONS[1][1:])
    first_recipe = f"{old.text}. {old.context}"  # what recipe 1 embedded: the decision first
    if isinstance(index, EmbeddedDecisionIndex):
        index.upsert([], [])
        with sqlite3.connect(index.path) as conn:
            conn.execute("UPDATE vectors SET recipe = 1 WHERE point_id = ?", (str(old.point_id),))
    else:
        index.upsert([old], encoder.encode([first_recipe]))
        index._client.delete_payload("decisions", keys=["recipe"], points=[str(old.point_id)])
    assert index.outdated(10) == [(old, 1)]
    embedded: list[str] = []
    encode = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts: embedded.extend(texts) or encode(texts))
    queue = EmbeddingQueue(tmp_path / "queue", timeout=2)
    assert Indexer(queue, index, lambda: encoder).run().reembedded == 0, "only asked to"
    report = Indexer(queue, index, lambda: encoder).run(reembed=True)
    assert report.reembedded == 1 and embedded == [old.embedding_text()]
    assert old.embedding_text().startswith(old.context), "the context is embedded first"
    assert index.outdated(10) == [] and Indexer(queue, index, lambda: encoder).run(reembed=True).reembedded == 0
    assert embedded == [old.embedding_text()] and RECIPE > 1
    stored = index.vectors_of([old.point_id, current.point_id])
    assert stored[old.point_id] == pytest.approx(encoder.encode([old.embedding_text()])[0].tolist(), abs=1e-5)
    hits = index.search([stored[old.point_id]], project=P, limit=1, exclude_task_id=None)
    assert tasks(hits) == ["A"] and hits[0].score == pytest.approx(1.0, abs=1e-4)


def test_a_word_in_too_many_decisions_is_left_out_of_the_embedded_query(tmp_path, monkeypatch):
    from baton.recall import keywords

    index = keywords.KeywordIndex(tmp_path / "recall", timeout=2)
    index.add([record("A", "Cache carts in Redis"), record("B", "Cache prices in memory"), record("C", "Keep carts")])
    assert tasks(index.search("cache carts", project=P, limit=5, exclude_task_id=None))[0] == "A"
    assert len(index.search("cache", project=P, limit=5, exclude_task_id=None)) == 2
    monkeypatch.setattr(keywords, "COMMON_ABOVE", 1)
    assert index.search("cache", project=P, limit=5, exclude_task_id=None) == []
    assert tasks(index.search("cache redis", project=P, limit=5, exclude_task_id=None)) == ["A"]
    index.close()


def test_a_text_longer_than_the_model_window_is_counted_as_chunked(encoder, tmp_path):
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    queue = EmbeddingQueue(tmp_path / "recall", timeout=2)
    long = record("L", " ".join(f"word{i}" for i in range(400)), "Why this decision was long")
    queue.add([long, record("S", "A short one")])
    report = Indexer(queue, index, lambda: encoder).run()
    assert (report.embedded, report.chunked) == (2, 1)
    assert tasks(index.search_keywords("word399", project=P, limit=5, exclude_task_id=None)) == ["L"], \
        "its last words are found by the keyword leg"
    index.close()


def test_a_batch_with_decisions_already_indexed_adds_the_words_of_the_new_ones_once(tmp_path):
    """A batch's words go into FTS5 in one statement, for the rows it inserted: a decision
    added again is neither counted nor indexed twice, and one removed before leaves its id
    to no other decision's words."""
    from baton.recall import keywords

    index = keywords.KeywordIndex(tmp_path / "recall", timeout=2)
    assert index.add([record("A", "Cache carts in Redis"), record("B", "Cache prices in memory")]) == 2
    assert index.delete_tasks(P, ["B"]) == 1
    assert index.add([record("A", "Cache carts in Redis"), record("C", "Cache totals in Redis")]) == 1
    assert sorted(tasks(index.search("cache", project=P, limit=5, exclude_task_id=None))) == ["A", "C"]
    assert tasks(index.search("prices", project=P, limit=5, exclude_task_id=None)) == []
    assert index.count() == 2
    index.close()
