"""Fusion of recall's legs: one ranking from the vector and keyword rankings.

Each leg's scores are standardised over the decisions it ranks (z-scores, so that neither
leg's scale decides), and a decision's fused score is VECTOR_WEIGHT times its vector z-score
plus the rest times its keyword z-score; a decision a leg did not rank gets a notch
(UNRANKED) below that leg's last. The vector leg's scores are its cosines (the same on both
backends); the keyword leg's are 1 / (1 + rank), never BM25 or Qdrant's sparse scores, which
differ between backends. Unlike reciprocal-rank fusion, the cosines say how far apart the
vector leg's hits are: a clear first (a paraphrase, which shares few words with its
decision) is not pulled down by the keywords' order. Chosen on the tuning part of
bench/recall_eval.py with bench/recall_fusion.py (docs/performance.md): the only candidates
at or above the plain RRF of these legs on every query kind were such z-score mixes, the
vector weighed 0.5 to 0.65. A tie goes to the vector leg's order. The fused score is scaled
so that first in every leg is 1.0. Every change of how recall orders what it found belongs
here, so that it composes.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.recall.base import ScoredDecision

VECTOR_WEIGHT = 0.6
UNRANKED = 0.25  # standard deviations below a leg's last, for a decision that leg did not rank


def standardised(values: list[float]) -> list[float]:
    """values as z-scores, shifted so that the lowest is UNRANKED (and an unranked decision 0)."""
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
    low = min(values)
    return [(v - low) / spread + UNRANKED for v in values]


def fuse(vector: Sequence[ScoredDecision] | None, keyword: Sequence[ScoredDecision] | None, limit: int
         ) -> list[ScoredDecision]:
    """The decisions of both legs (each ranked best first; None: unavailable), best fused
    first; ties by the vector leg's rank, then the keyword leg's, ticket and text. A single
    leg keeps its order."""
    legs = [(leg, weight, cosine) for leg, weight, cosine in ((vector, VECTOR_WEIGHT, True),
                                                               (keyword, 1 - VECTOR_WEIGHT, False)) if leg]
    scores: dict[object, float] = {}
    first: dict[object, tuple[int, int]] = {}  # the first leg that ranks it, and where
    records: dict[object, ScoredDecision] = {}
    best = 0.0
    for number, (leg, weight, cosine) in enumerate(legs):
        values = standardised([hit.score if cosine else 1 / (1 + rank) for rank, hit in enumerate(leg, start=1)])
        best += weight * max(values)
        for rank, (hit, value) in enumerate(zip(leg, values, strict=True), start=1):
            key = (hit.record.project, hit.record.task_id, hit.record.text)  # what the point id derives from
            scores[key] = scores.get(key, 0.0) + weight * value
            first.setdefault(key, (number, rank))
            records.setdefault(key, hit)
    ranked = sorted(scores, key=lambda key: (-scores[key], first[key], records[key].record.task_id,
                                             records[key].record.text))
    return [ScoredDecision(record=records[key].record, score=scores[key] / (best or 1.0)) for key in ranked[:limit]]
