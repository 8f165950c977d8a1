"""DecisionSearchClient: finds decisions of other tickets related to a ticket, or to a text.

Recall is enrichment, and a read never embeds what a write recorded: related decisions are
found with the stored vectors of the ticket's own decisions and of its query (what the
ticket is about, baton.recall.ticket_queries), and the decisions the index does not hold yet
are returned to the caller to queue (baton.recall.queue) instead of being embedded here. Only
a free-text query loads the model, to embed that text. A client searches one project's
decisions (baton.projects), the one it was made for.

Two legs answer each search, the vectors and the keywords (baton.recall.keywords), fused
(baton.recall.fusion). Either answers alone while the other is unavailable (the model
missing, a store that cannot be read); the search is unavailable only when both are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from baton.errors import StoreUnavailable
from baton.recall.base import DecisionIndex, DecisionRecord, ScoredDecision
from baton.recall.embedding import LazyEncoder, MiniLMEncoder
from baton.recall.fusion import fuse

OWN_VECTORS = 10
V = TypeVar("V")
K = TypeVar("K")
DEPTH = 10  # each leg ranks at least this many before fusion: a decision second in one leg still counts


@dataclass
class RelatedSearch:
    hits: list[ScoredDecision]
    unindexed: list[DecisionRecord] = field(default_factory=list)  # own decisions the index lacks
    vectors_unavailable: str | None = None  # why the keywords answered alone


class DecisionSearchClient:
    def __init__(self, index: DecisionIndex, project: str,
                 load_encoder: Callable[[], MiniLMEncoder] = MiniLMEncoder.load) -> None:
        self.index = index
        self.project = project
        self._encoder = LazyEncoder(load_encoder)

    def search_related(self, task_id: str, limit: int = 5, *, own: Sequence[DecisionRecord] = (),
                       about: str = "", about_vector: Sequence[float] | None = None,
                       min_score: float = 0.0) -> RelatedSearch:
        """Decisions of the project's other tickets closest to the newest OWN_VECTORS stored
        decisions of this one (own: the ticket's decisions as the registry knows them, oldest
        first) and to what it is about (about: the ticket's query text, searched by its words;
        about_vector: its stored vector, if any), by their vectors and by their words.

        min_score bounds the vector leg's cosine: while that leg answers, the keywords only
        reorder what it found (a decision sharing a word is not thereby related); without it,
        the keywords answer alone."""
        depth = max(limit, DEPTH)
        newest_own = list(own)[-OWN_VECTORS:]

        def vector_leg() -> tuple[list[ScoredDecision], list[DecisionRecord]]:
            stored = self.index.stored([r.point_id for r in own])
            newest = [r.point_id for r in own if r.point_id in stored][-OWN_VECTORS:]
            vectors = list(self.index.vectors_of(newest).values())
            if about_vector is not None:
                vectors.append(list(about_vector))
            hits = self.index.search(vectors, project=self.project, limit=depth,
                                     exclude_task_id=task_id) if vectors else []
            return [h for h in hits if h.score >= min_score], [r for r in own if r.point_id not in stored]

        # What the ticket is about first: a long query's words beyond MAX_QUERY_WORDS are left out.
        text = " ".join([about, *(r.embedding_text() for r in newest_own)])
        vector, keyword, vectors_down = _legs(vector_leg, lambda: self.index.search_keywords(
            text, project=self.project, limit=depth, exclude_task_id=task_id))
        if vector is None:
            return RelatedSearch(fuse(None, keyword or [], limit), vectors_unavailable=vectors_down)
        hits, unindexed = vector
        if keyword is not None:
            found = {h.record.point_id for h in hits}
            keyword = [h for h in keyword if h.record.point_id in found]
        return RelatedSearch(fuse(hits, keyword, limit), unindexed)

    def search_text(self, text: str, limit: int = 5, *, extra: int = 0,
                    exclude_task_id: str | None = None) -> list[ScoredDecision]:
        """The project's decisions best matching text, by meaning and by words: limit, then up to
        extra more of the same fusion (room for a caller that shows some of them together)."""
        depth = max(limit, DEPTH)
        vector, keyword, _ = _legs(
            lambda: self.index.search(self._encoder.encode([text]).tolist(), project=self.project, limit=depth,
                                      exclude_task_id=exclude_task_id),
            lambda: self.index.search_keywords(text, project=self.project, limit=depth,
                                               exclude_task_id=exclude_task_id))
        return fuse(vector, keyword, limit + extra)

    def close(self) -> None:
        self.index.close()


def _legs(vector: Callable[[], V], keyword: Callable[[], K]) -> tuple[V | None, K | None, str | None]:
    """Both legs' answers, None for one that is unavailable, and why the vector leg was;
    raises the vector leg's StoreUnavailable when neither answers."""
    try:
        by_vector: V | None = vector()
    except StoreUnavailable as exc:
        try:
            return None, keyword(), exc.reason
        except StoreUnavailable:
            raise exc from None
    try:
        by_keyword: K | None = keyword()
    except StoreUnavailable:
        by_keyword = None
    return by_vector, by_keyword, None
