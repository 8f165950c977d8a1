"""A decision longer than the model's window is read in overlapping windows, not cut to its
first: its meaning past the first window is found by its vector; a text within the window
keeps the vector of one window; and re-indexing a store of recipe 2 embeds again only its
long decisions, on the embedded index and on Qdrant (qdrant-client's local mode)."""

import sqlite3

import numpy as np
import pytest

from baton.recall.base import RECIPE
from baton.recall.embedded import EmbeddedDecisionIndex
from baton.recall.indexer import Indexer
from baton.recall.queue import EmbeddingQueue
from tests.test_recall_hybrid import P, record

# About 330 tokens on the checkout's logging: the whole first window, and more.
PREAMBLE = " ".join([
    "The checkout service writes a structured log line for every request it serves, with the",
    "route, the status code, the latency in milliseconds and the identifier of the cart.",
    "Operators read these lines in the log viewer when a customer reports a failed payment,",
    "and the on-call engineer filters them by route and status during an incident review.",
] * 4)
LONG_DECISION = ("Encrypt the nightly database backups with age, the private key kept in the "
                 "hardware security module, and test a restore from them every week.")
OTHERS = [
    ("B", "Cache product prices in Redis for five minutes"),
    ("C", "Ship the storefront with blue-green deployments behind the load balancer"),
    ("D", "Log every checkout request as one JSON line with route, status and latency"),
    ("E", "Keep database backups for thirty days in object storage"),
]


LONG = record("L", LONG_DECISION, PREAMBLE)


def test_a_meaning_past_the_first_window_is_found_by_the_vector_alone(encoder, tmp_path):
    assert encoder.windows([LONG.embedding_text()]) == [2], "the decision lies past the first window"
    index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
    queue = EmbeddingQueue(tmp_path / "queue", timeout=2)
    queue.add([LONG, *(record(task, text) for task, text in OTHERS)])
    report = Indexer(queue, index, lambda: encoder).run()
    assert (report.embedded, report.chunked) == (5, 1)
    # No word shared with the decision: only its vector can find it.
    query = encoder.encode(["How are the nightly dumps protected with cryptography?"])
    hits = index.search(query.tolist(), project=P, limit=5, exclude_task_id=None)
    assert hits[0].record.task_id == "L", [(h.record.task_id, round(h.score, 3)) for h in hits]
    index.close()


def test_a_text_within_the_window_keeps_the_vector_of_one_window(encoder):
    short = [record(task, text).embedding_text() for task, text in OTHERS]
    assert encoder.windows(short) == [1] * len(short)
    alone = np.stack([encoder.encode([text])[0] for text in short])
    beside_a_long_one = encoder.encode([short[0], LONG.embedding_text(), *short[1:]])
    # Equal but for the last bits a batch's padding moves (as it did before windows).
    assert np.abs(np.delete(beside_a_long_one, 1, axis=0) - alone).max() < 1e-6
    assert np.linalg.norm(beside_a_long_one, axis=1) == pytest.approx(1.0, abs=1e-6)
    assert float(beside_a_long_one[1] @ encoder.encode([LONG.embedding_text()])[0]) == pytest.approx(1.0, abs=1e-5)


def test_reindexing_a_store_of_recipe_2_embeds_again_only_its_long_decisions(make_index, encoder, tmp_path,
                                                                            monkeypatch):
    index = make_index()
    short = record("S", "Cache product prices in Redis", "Prices are read on every page")
    # What recipe 2 stored: a long text's first window only, a short text's vector as today.
    first_window = encoder.encode([encoder._tokenizer.decode(encoder._tokenizer.encode(LONG.embedding_text()).ids)])
    index.upsert([short, LONG], np.vstack([encoder.encode([short.embedding_text()]), first_window]))
    if isinstance(index, EmbeddedDecisionIndex):
        with sqlite3.connect(index.path) as conn:
            conn.execute("UPDATE vectors SET recipe = 2")
    else:
        index._client.set_payload("decisions", payload={"recipe": 2}, points=[str(short.point_id), str(LONG.point_id)])
    assert sorted(index.outdated(10), key=lambda pair: pair[0].task_id) == [(LONG, 2), (short, 2)]
    before = index.vectors_of([short.point_id])[short.point_id]
    embedded: list[str] = []
    encode = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts: embedded.extend(texts) or encode(texts))

    report = Indexer(EmbeddingQueue(tmp_path / "queue", timeout=2), index, lambda: encoder).run(reembed=True)

    assert embedded == [LONG.embedding_text()], "only the long decision is embedded again"
    assert (report.reembedded, report.renewed, report.chunked) == (1, 1, 1)
    assert index.outdated(10) == [] and RECIPE == 3
    stored = index.vectors_of([short.point_id, LONG.point_id])
    assert stored[short.point_id] == before, "the short one's vector is untouched"
    assert stored[LONG.point_id] == pytest.approx(encode([LONG.embedding_text()])[0].tolist(), abs=1e-5)
    again = Indexer(EmbeddingQueue(tmp_path / "queue", timeout=2), index, lambda: encoder).run(reembed=True)
    assert (again.reembedded, again.renewed) == (0, 0) and embedded == [LONG.embedding_text()]
