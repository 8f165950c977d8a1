"""Fusion of recall's legs: one ranking from the vector and keyword rankings.

Each leg's scores are standardised over what it ranks (z-scores shifted so that its last
scores UNRANKED and what it did not rank 0), then weighed VECTOR_WEIGHT to the rest: the
vector leg's cosines, the keyword leg's 1 / (1 + rank) (BM25 and Qdrant's sparse scores
differ). Unlike reciprocal-rank fusion, a clear cosine lead (a paraphrase shares few words
with its decision) is not undone by the keywords' order. Chosen on the tuning part of
bench/recall_eval.py with bench/recall_fusion.py (docs/performance.md). Ties go to the
vector leg's order; first in every leg scores 1.0. Every change of how recall orders what it
found belongs here, so that it composes.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.recall.base import ScoredDecision

VECTOR_WEIGHT = 0.6
UNRANKED = 0.25  # standard deviations between a leg's last and a decision it did not rank


def fuse(vector: Sequence[ScoredDecision] | None, keyword: Sequence[ScoredDecision] | None,
         limit: int) -> list[ScoredDecision]:
    """The decisions of both legs (each ranked best first; None: unavailable), best fused
    first; ties by the vector leg's rank, then the keyword leg's, ticket and text. A single
    leg keeps its order."""
    scores: dict[object, float] = {}
    first: dict[object, tuple[int, int]] = {}  # the first leg that ranks it, and where
    records: dict[object, ScoredDecision] = {}
    best = 0.0
    for number, (leg, weight) in enumerate(((vector, VECTOR_WEIGHT), (keyword, 1 - VECTOR_WEIGHT))):
        values = [hit.score if number == 0 else 1 / (1 + rank) for rank, hit in enumerate(leg or (), 1)]
        mean, low = sum(values) / (len(values) or 1), min(values, default=0.0)
        spread = (sum((v - mean) ** 2 for v in values) / (len(values) or 1)) ** 0.5 or 1.0
        values = [(v - low) / spread + UNRANKED for v in values]
        best += weight * max(values, default=0.0)
        for rank, (hit, value) in enumerate(zip(leg or (), values, strict=True), start=1):
            key = (hit.record.project, hit.record.task_id, hit.record.text)  # what the point id derives from
            scores[key] = scores.get(key, 0.0) + weight * value
            first.setdefault(key, (number, rank))
            records.setdefault(key, hit)
    ranked = sorted(scores, key=lambda key: (-scores[key], first[key], records[key].record.task_id,
                                             records[key].record.text))
    return [ScoredDecision(record=records[key].record, score=scores[key] / (best or 1.0)) for key in ranked[:limit]]
