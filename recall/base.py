"""The decision index interface and its records, in Qdrant's data model.

A collection `decisions` of 384-dimension cosine points; each point's id is derived from
(project, task id, decision text), so recording a decision twice writes one point. Every
point belongs to one project (baton.projects) and every read is of one project: the project
is a filter inside the search, so the top k are that project's best. A point stored before
projects has none: no read returns it, and the indexer heals it (baton.skills.core.indexing).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from baton.backend import Backend
from baton.recall.wire import decision_point_id
from baton.types import Project

if TYPE_CHECKING:
    import numpy as np

# Rows of floats, one per point: lists, or a NumPy matrix as the encoder makes.
Vectors: TypeAlias = "Sequence[Sequence[float]] | np.ndarray"

COLLECTION = "decisions"
PROJECT_FIELD = "project"  # the payload field every read filters on


class DecisionRecord(BaseModel):
    """One decision as stored in a point's payload."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: Project
    task_id: str
    session_id: str
    text: str
    context: str = ""
    recorded_at: str
    repo: str = ""

    @property
    def point_id(self) -> UUID:
        return decision_point_id(self.project, self.task_id, self.text)

    def embedding_text(self) -> str:
        return embedding_text(self.text, self.context)


# How a decision's vector is made; a point of an older recipe is embedded again by the
# background indexer (DecisionIndex.outdated), one that is current never. Recipe 1 embedded
# the decision first, then its context; 2 the context first (embedding_text); 3 reads a text
# longer than the model's window in windows (baton.recall.embedding), where 2 read its first.
RECIPE = 3
RECIPE_FIELD = "recipe"  # where a Qdrant point's payload keeps it (the embedded store: a column)


def embedding_text(text: str, context: str) -> str:
    """What a decision's vector embeds: its context (the problem) first, then the decision,
    so that the context is read whole in the model's first window (baton.recall.embedding):
    a long decision written first pushed it out (recipe 1, when the model read that window
    only)."""
    return f"{context}. {text}" if context else text


def embedding_text_before(text: str, context: str, recipe: int) -> str:
    """What a point of that recipe embedded (the healing of points from before projects
    reuses a vector only when the text it embedded is today's)."""
    if recipe == 1:
        return f"{text}. {context}" if context else text
    return embedding_text(text, context)


def vector_unchanged(record: DecisionRecord, recipe: int, windows: int) -> bool:
    """Whether a point of that recipe holds the vector the current RECIPE makes, so that only
    its recipe mark need move (DecisionIndex.renew_recipe): it embedded today's text, and that
    text fits the model's window (windows: baton.recall.embedding.MiniLMEncoder.windows), as
    recipe 3 changed the vectors of longer texts only."""
    return windows == 1 and embedding_text_before(record.text, record.context, recipe) == record.embedding_text()


def record_of(payload: dict[str, Any] | None) -> DecisionRecord:
    """The DecisionRecord of a stored payload, without the fields the index adds."""
    fields = dict(payload or {})
    fields.pop(RECIPE_FIELD, None)
    return DecisionRecord.model_validate(fields)


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
            best[key] = ScoredDecision(record=record_of(payload), score=score)
    return ranked(best.values(), limit)


def ranked(hits: Iterable[ScoredDecision], limit: int) -> list[ScoredDecision]:
    """The best limit of hits, best first; ties by ticket, then text."""
    return sorted(hits, key=lambda s: (-s.score, s.record.task_id, s.record.text))[:limit]


class DecisionIndex(Backend):
    """Vectors of decisions. Every method raises StoreUnavailable when the index cannot answer.

    Each read and delete names its project and touches that project's points only; a point
    id names its project already (baton.recall.wire.decision_point_id).
    """

    @abstractmethod
    def upsert(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        """Store each record with its vector (idempotent by point id)."""

    @abstractmethod
    def vectors_of(self, point_ids: Sequence[UUID]) -> dict[UUID, list[float]]:
        """The stored vectors of point_ids, by point id."""

    @abstractmethod
    def stored(self, point_ids: Sequence[UUID]) -> set[UUID]:
        """Which points are stored (never embedded again)."""

    @abstractmethod
    def search(self, vectors: Sequence[Sequence[float]], *, project: str, limit: int,
               exclude_task_id: str | None) -> list[ScoredDecision]:
        """The project's best points for any of vectors (best score per point), excluding a
        ticket of the project; filtered in the search, so the limit is of its points."""

    @abstractmethod
    def search_keywords(self, text: str, *, project: str, limit: int,
                        exclude_task_id: str | None) -> list[ScoredDecision]:
        """The keyword leg (baton.recall.keywords): points sharing words with text, best first.
        Its StoreUnavailable leaves the vector leg to answer."""

    def index_keywords(self, records: Sequence[DecisionRecord]) -> None:
        """Make records findable by their words before they are embedded (the indexer calls
        it first); a backend whose words travel with the vector (Qdrant) has nothing to do."""

    @abstractmethod
    def outdated(self, limit: int) -> list[tuple[DecisionRecord, int]]:
        """Up to limit decisions (with a project) of an older RECIPE, each with its recipe."""

    @abstractmethod
    def renew_recipe(self, records: Sequence[DecisionRecord]) -> None:
        """Mark stored records as of RECIPE, their vectors being what it makes (vector_unchanged)."""

    @abstractmethod
    def reembed(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        """Replace the vectors of stored records with vectors of RECIPE."""

    @abstractmethod
    def count(self, project: str | None = None) -> int:
        """Decisions of the project; of the whole store without one (`baton doctor`)."""

    @abstractmethod
    def delete_tasks(self, project: str, task_ids: Sequence[str]) -> int:
        """Remove the decisions of those tickets (their sessions were pruned); how many went."""

    @abstractmethod
    def points(self, project: str, batch: int = 1000) -> Iterator[tuple[DecisionRecord, list[float]]]:
        """Every decision of the project with its vector (copying to another backend)."""

    # Points stored before projects (payload without one): never read, healed from the
    # registry by baton.skills.core.indexing.heal_unscoped.

    @abstractmethod
    def unscoped_count(self) -> int:
        """How many points have no project."""

    @abstractmethod
    def unscoped_points(self, point_ids: Sequence[UUID]) -> dict[UUID, tuple[str, list[float]]]:
        """Those of point_ids (ids as they were before projects) stored without a project:
        their embedded text (DecisionRecord.embedding_text) and vector."""

    @abstractmethod
    def delete_unscoped(self) -> int:
        """Remove every point without a project; returns how many went."""

    def recover(self) -> str | None:
        """Make a store that cannot be read usable again, giving up what it held (the
        indexer then embeds the registry's decisions anew); says what it did, or None."""
        return None
