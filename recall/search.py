"""DecisionSearchClient: finds decisions of other tickets related to a ticket's own, or to a text.

Recall is enrichment, and a read never embeds what a write recorded: related decisions are
found with the stored vectors of the ticket's own decisions, and the ones the index does
not hold yet are returned to the caller to queue (baton.recall.queue) instead of being embedded
here. Only a free-text query loads the model, to embed that text. A client searches one
project's decisions (baton.projects), the one it was made for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from baton.recall.base import DecisionIndex, DecisionRecord, ScoredDecision
from baton.recall.embedding import LazyEncoder, MiniLMEncoder

OWN_VECTORS = 10


@dataclass
class RelatedSearch:
    hits: list[ScoredDecision]
    unindexed: list[DecisionRecord] = field(default_factory=list)  # own decisions the index lacks


class DecisionSearchClient:
    def __init__(self, index: DecisionIndex, project: str,
                 load_encoder: Callable[[], MiniLMEncoder] = MiniLMEncoder.load) -> None:
        self.index = index
        self.project = project
        self._encoder = LazyEncoder(load_encoder)

    @property
    def encoder_loaded(self) -> bool:
        return self._encoder.loaded

    def search_related(self, task_id: str, limit: int = 5, *, own: Sequence[DecisionRecord] = (),
                       min_score: float = 0.0) -> RelatedSearch:
        """Decisions of the project's other tickets closest to the newest OWN_VECTORS stored
        decisions of this one (own: the ticket's decisions as the registry knows them, oldest
        first)."""
        stored = self.index.stored([r.point_id for r in own])
        unindexed = [r for r in own if r.point_id not in stored]
        newest = [r.point_id for r in own if r.point_id in stored][-OWN_VECTORS:]
        vectors = list(self.index.vectors_of(newest).values())
        hits = self.index.search(vectors, project=self.project, limit=limit, exclude_task_id=task_id) if vectors else []
        return RelatedSearch([h for h in hits if h.score >= min_score], unindexed)

    def search_text(self, text: str, limit: int = 5, *, exclude_task_id: str | None = None) -> list[ScoredDecision]:
        return self.index.search(self._encoder.encode([text]).tolist(), project=self.project, limit=limit,
                                 exclude_task_id=exclude_task_id)

    def close(self) -> None:
        self.index.close()
