"""`baton index`: embed the decisions waiting for recall, after delivering the writes kept
on this machine (theirs may wait too); with everything, first queue every decision the
registry holds that the index lacks, and embed again those of an older recipe."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from baton.skills.core.indexing import index_decisions, reindex_from_registry

if TYPE_CHECKING:
    from baton.recall.indexer import IndexReport
    from baton.skills.runtime.stores import Stores


class Indexed(NamedTuple):
    queued: int | None  # decisions queued from the registry (everything), else None
    report: IndexReport | None  # None: another indexer is at it
    waiting: int  # decisions left in the queue
    warnings: list[str]


def index_waiting(stores: Stores, *, everything: bool = False, background: bool = False,
                  after: int | None = None) -> Indexed | None:
    """What `baton index` did; None in the background, which lingers for more decisions
    (after: the pid of the command that started it, whose end it waits for)."""
    if background:
        index_decisions(stores, background=True, after=after)
        return None
    warnings = stores.sink.deliver()
    queued = None
    if everything:
        queued, recovered = reindex_from_registry(stores)
        warnings += [recovered] if recovered else []
    report = index_decisions(stores, reembed=everything)
    if report is not None:
        warnings += [f"dropped an unreadable queue entry: {dropped}" for dropped in report.dropped]
    return Indexed(queued, report, stores.embedding_queue.count(), warnings)
