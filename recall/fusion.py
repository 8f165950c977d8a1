"""Weighted reciprocal-rank fusion of recall's legs: one ranking from the vector and keyword rankings.

Each leg adds weight / (K + rank) to every decision it ranks; a decision both legs rank high
wins over one that only one leg ranks first. Scores of different legs (cosine, BM25) are
never compared, only ranks. The keyword leg weighs less for a query of more than
SHORT_QUERY words (a problem statement, a ticket's goal and decisions): its many words match
many decisions. A tie goes to the vector leg's order (with equal weights, first in one leg
and first in the other tie; the vector leg is the better alone). Chosen on the tuning part
of bench/recall_eval.py (docs/performance.md): the weights 0.7 to 0.9 and cut-offs 6 to 16
words measured the same there. The fused score is scaled so that first in every leg is 1.0.
Every change of how recall orders what it found belongs here, so that it composes.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.recall.base import ScoredDecision
from baton.recall.keywords import words

K = 60
SHORT_QUERY = 12  # words: a title or a phrase, where both legs weigh the same
LONG_QUERY_KEYWORDS = 0.8  # the keyword leg's weight for a longer query


def fuse(vector: Sequence[ScoredDecision] | None, keyword: Sequence[ScoredDecision] | None, limit: int,
         *, query: str) -> list[ScoredDecision]:
    """The decisions of both legs (each ranked best first; None: unavailable), best fused
    first; ties by the vector leg's rank, then the keyword leg's, ticket and text. A single
    leg keeps its order."""
    keyword_weight = 1.0 if len(words(query)) <= SHORT_QUERY else LONG_QUERY_KEYWORDS
    legs = [(leg, weight) for leg, weight in ((vector, 1.0), (keyword, keyword_weight)) if leg is not None]
    scores: dict[object, float] = {}
    first: dict[object, tuple[int, int]] = {}  # the first leg that ranks it, and where
    records: dict[object, ScoredDecision] = {}
    for number, (leg, weight) in enumerate(legs):
        for rank, hit in enumerate(leg, start=1):
            key = (hit.record.project, hit.record.task_id, hit.record.text)  # what the point id derives from
            scores[key] = scores.get(key, 0.0) + weight / (K + rank)
            first.setdefault(key, (number, rank))
            records.setdefault(key, hit)
    best = (sum(weight for _, weight in legs) or 1) / (K + 1)
    ranked = sorted(scores, key=lambda key: (-scores[key], first[key], records[key].record.task_id,
                                             records[key].record.text))
    return [ScoredDecision(record=records[key].record, score=scores[key] / best) for key in ranked[:limit]]
