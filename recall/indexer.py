"""The indexer: embeds queued decisions and stores them in the decision index.

Each decision is embedded at most once: a batch asks the index which of its points are
stored already, embeds only the others, stores them, and only then leaves the queue. A
crash between the two leaves the batch queued, and the next run finds it stored. An entry
queued before projects (its payload names none) is removed and counted: its decision is
queued again, in its project, from the registry (baton.skills.core.indexing.heal_unscoped).

A batch's words go to the keyword leg before it is embedded (found by its words while the
model is missing). Asked to (the background indexer), a run then embeds again, batch by
batch, the stored decisions embedded by an older recipe (baton.recall.base.RECIPE); those
of the current one are never embedded again, and those whose vector the current recipe
would make again (baton.recall.base.vector_unchanged: telling costs a tokenization, not a
forward pass) only have their recipe mark moved.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from baton.recall.base import DecisionIndex, DecisionRecord, vector_unchanged
from baton.recall.embedding import LazyEncoder, MiniLMEncoder
from baton.recall.queue import EmbeddingQueue
from baton.recall.ticket_queries import TicketQueries

if TYPE_CHECKING:
    import numpy as np

BATCH = 32
REEMBED_BATCH = 256  # the embedded index rebuilds its search index after each batch


@dataclass
class IndexReport:
    embedded: int = 0  # decisions embedded and stored by this run
    already: int = 0  # queued decisions that were stored before (not embedded again)
    dropped: list[str] = field(default_factory=list)  # unreadable queue entries, removed
    unscoped: int = 0  # entries queued before projects, removed (the registry queues them again)
    reembedded: int = 0  # stored decisions embedded again by the current recipe
    queries: int = 0  # ticket queries embedded and stored
    renewed: int = 0  # stored decisions of an older recipe whose vector it makes: marked current, not embedded
    # Embedded texts longer than the model's window: read in overlapping windows of MAX_TOKENS
    # tokens (baton.recall.embedding), their vector the mean of the windows'.
    chunked: int = 0


class Indexer:
    """Keeps the encoder loaded between runs (the projector runs one per batch of events)."""

    def __init__(self, queue: EmbeddingQueue, index: DecisionIndex,
                 load_encoder: Callable[[], MiniLMEncoder] = MiniLMEncoder.load,
                 queries: TicketQueries | None = None) -> None:
        self.queue = queue
        self.index = index
        self.queries = queries
        self._encoder = LazyEncoder(load_encoder)

    def run(self, *, until: float | None = None, batch: int = BATCH, reembed: bool = False) -> IndexReport:
        """Index what waits, oldest first, until the queue is empty or time.monotonic()
        passes `until`; then embed the ticket queries wanted; then (reembed) embed again what
        an older recipe embedded. Raises StoreUnavailable (ModelMissing included) with the
        batch still queued."""
        report = IndexReport()
        while until is None or time.monotonic() < until:
            waiting = self.queue.oldest(batch)
            if not waiting:
                break
            records: list[DecisionRecord] = []
            for point_id, payload in waiting:
                if _unscoped(payload):
                    report.unscoped += 1
                    self.queue.remove([point_id])
                    continue
                try:
                    record = DecisionRecord.model_validate_json(payload)
                except ValidationError as exc:
                    report.dropped.append(f"{point_id}: {exc.errors()[0]['msg']}")
                    self.queue.remove([point_id])
                    continue
                if record.point_id != point_id:
                    report.dropped.append(f"{point_id}: its payload belongs to another point")
                    self.queue.remove([point_id])
                    continue
                records.append(record)
            stored = self.index.stored([r.point_id for r in records])
            todo = [r for r in records if r.point_id not in stored]
            if todo:
                self.index.index_keywords(todo)
                self.index.upsert(todo, self._embedded([r.embedding_text() for r in todo], report))
            self.queue.remove([r.point_id for r in records])
            report.embedded += len(todo)
            report.already += len(records) - len(todo)
        while self.queries is not None and (until is None or time.monotonic() < until):
            wanted = self.queries.waiting(batch)
            if not wanted:
                break
            self.queries.keep(wanted, self._embedded([q.text for q in wanted], report).tolist())
            report.queries += len(wanted)
        while reembed and (until is None or time.monotonic() < until):
            outdated = self.index.outdated(REEMBED_BATCH)
            if not outdated:
                break
            windows = self._encoder.windows([record.embedding_text() for record, _ in outdated])
            same = [vector_unchanged(record, recipe, n) for (record, recipe), n in zip(outdated, windows, strict=True)]
            self.index.renew_recipe([record for (record, _), kept in zip(outdated, same, strict=True) if kept])
            todo = [record for (record, _), kept in zip(outdated, same, strict=True) if not kept]
            if todo:
                self.index.reembed(todo, self._embedded([r.embedding_text() for r in todo], report))
            report.renewed += len(outdated) - len(todo)
            report.reembedded += len(todo)
        return report

    def windows(self, texts: list[str]) -> list[int]:
        """How many windows of the model each text takes (baton.recall.embedding): a tokenization."""
        return self._encoder.windows(texts)

    def _embedded(self, texts: list[str], report: IndexReport) -> np.ndarray:
        vectors = self._encoder.encode(texts)
        report.chunked += sum(1 for n in self._encoder.windows(texts) if n > 1)
        return vectors


def _unscoped(payload: str) -> bool:
    """Whether a queued payload was queued before projects (it names none)."""
    try:
        fields = json.loads(payload)
    except ValueError:
        return False  # unreadable: dropped as such
    return isinstance(fields, dict) and "project" not in fields
