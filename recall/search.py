"""DecisionSearchClient: records decisions and finds related ones of other tickets.

Recall is enrichment. The embedding model is loaded only when something must be embedded:
a new decision, a free-text query, or a decision of this task the index does not hold yet.
A resume whose decisions are indexed reuses their stored vectors and never loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recall.base import DecisionIndex, DecisionRecord, ScoredDecision
from recall.embedding import MiniLMEncoder

OWN_VECTORS = 10


class DecisionSearchClient:
    def __init__(self, index: DecisionIndex, load_encoder: Callable[[], MiniLMEncoder] = MiniLMEncoder.load) -> None:
        self.index = index
        self._load_encoder = load_encoder
        self._encoder: MiniLMEncoder | None = None

    @property
    def encoder_loaded(self) -> bool:
        return self._encoder is not None

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self._encoder is None:
            self._encoder = self._load_encoder()
        return self._encoder.encode(texts).tolist()

    def record(self, records: Sequence[DecisionRecord]) -> None:
        """Embed and store decisions (idempotent per task and text)."""
        if records:
            self.index.upsert(records, self._embed([r.embedding_text() for r in records]))

    def search_related(self, task_id: str, limit: int = 5, *, own: Sequence[DecisionRecord] = (),
                       min_score: float = 0.0) -> list[ScoredDecision]:
        """Decisions of other tasks closest to this task's own decisions, best first.

        own: the task's decisions as the registry knows them; any the index lacks (recorded
        while recall was unavailable) are embedded and stored first.
        """
        stored = self.index.vectors_for_task(task_id, OWN_VECTORS)
        missing = [r for r in own if r.point_id not in stored][:OWN_VECTORS]
        self.record(missing)
        vectors = list(stored.values())
        if missing:
            vectors = self._embed([r.embedding_text() for r in missing]) + vectors
        hits = self.index.search(vectors[:OWN_VECTORS], limit=limit, exclude_task_id=task_id)
        return [h for h in hits if h.score >= min_score]

    def close(self) -> None:
        self.index.close()

    def search_text(self, text: str, limit: int = 5, *, exclude_task_id: str | None = None) -> list[ScoredDecision]:
        return self.index.search(self._embed([text]), limit=limit, exclude_task_id=exclude_task_id)
