"""Reciprocal-rank fusion of recall's legs: one ranking from the vector and keyword rankings.

Each leg adds 1 / (K + rank) to every decision it ranks; a decision both legs rank high
wins over one that only one leg ranks first. Scores of different legs (cosine, BM25) are
never compared, only ranks. The fused score is scaled so that first in every leg is 1.0.
Every change of how recall orders what it found belongs here, so that it composes.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.recall.base import ScoredDecision

K = 60


def fuse(legs: Sequence[Sequence[ScoredDecision]], limit: int) -> list[ScoredDecision]:
    """The decisions of every leg (each ranked best first), best fused first; ties by ticket
    and text. A single leg keeps its order."""
    scores: dict[object, float] = {}
    records: dict[object, ScoredDecision] = {}
    for leg in legs:
        for rank, hit in enumerate(leg, start=1):
            key = hit.record.point_id
            scores[key] = scores.get(key, 0.0) + 1 / (K + rank)
            records.setdefault(key, hit)
    best = (len(legs) or 1) / (K + 1)
    ranked = sorted(scores, key=lambda key: (-scores[key], records[key].record.task_id, records[key].record.text))
    return [ScoredDecision(record=records[key].record, score=scores[key] / best) for key in ranked[:limit]]
