"""The decision index interface and its records, in Qdrant's data model.

A collection `decisions` of 384-dimension cosine points; each point's id is derived from
(task id, decision text), so recording a decision twice writes one point.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from baton.recall.wire import decision_point_id

if TYPE_CHECKING:
    import numpy as np

# Rows of floats, one per point: lists, or a NumPy matrix as the encoder makes.
Vectors: TypeAlias = "Sequence[Sequence[float]] | np.ndarray"

COLLECTION = "decisions"


class DecisionRecord(BaseModel):
    """One decision as stored in a point's payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    session_id: str
    text: str
    context: str = ""
    recorded_at: str
    repo: str = ""

    @property
    def point_id(self) -> UUID:
        return decision_point_id(self.task_id, self.text)

    def embedding_text(self) -> str:
        return f"{self.text}. {self.context}" if self.context else self.text


class ScoredDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    record: DecisionRecord
    score: float


def best_per_point(hits: Iterable[tuple[object, float, dict[str, Any] | None]], limit: int) -> list[ScoredDecision]:
    """(point id, score, payload) hits of several queries: each point once, with its best
    score, best first."""
    best: dict[str, ScoredDecision] = {}
    for point_id, score, payload in hits:
        key = str(point_id)
        if key not in best or score > best[key].score:
            best[key] = ScoredDecision(record=DecisionRecord.model_validate(payload), score=score)
    return sorted(best.values(), key=lambda s: (-s.score, s.record.task_id, s.record.text))[:limit]


class DecisionIndex(ABC):
    """Vectors of decisions. Every method raises StoreUnavailable when the index cannot answer."""

    @abstractmethod
    def upsert(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        """Store each record with its vector (idempotent by point id)."""

    @abstractmethod
    def vectors_for_task(self, task_id: str, limit: int) -> dict[UUID, list[float]]:
        """Stored vectors of up to limit of the task's decisions, by point id."""

    @abstractmethod
    def vectors_of(self, point_ids: Sequence[UUID]) -> dict[UUID, list[float]]:
        """The stored vectors of those points that have one, by point id."""

    @abstractmethod
    def stored(self, point_ids: Sequence[UUID]) -> set[UUID]:
        """Which of the points are stored (their decision is indexed and never embedded again)."""

    @abstractmethod
    def search(self, vectors: Sequence[Sequence[float]], *, limit: int,
               exclude_task_id: str | None) -> list[ScoredDecision]:
        """The best points for any of vectors (best score per point), excluding a task."""

    @abstractmethod
    def count(self) -> int:
        """Number of stored decisions."""

    @abstractmethod
    def delete_tasks(self, task_ids: Sequence[str]) -> int:
        """Remove every decision of those tickets (their sessions were pruned); returns how
        many went. Raises StoreUnavailable."""

    @abstractmethod
    def points(self, batch: int = 1000) -> Iterator[tuple[DecisionRecord, list[float]]]:
        """Every stored decision with its vector, for copying an index to another backend."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Backend, location, server version and a size, read from the store itself.

        Raises StoreUnavailable when it does not answer (what `baton doctor` shows).
        """

    def recover(self) -> str | None:
        """Make a store that cannot be read usable again, giving up what it held (the
        indexer then embeds the registry's decisions anew); says what it did, or None."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release what the index holds open."""
