"""Retention (`baton gc`): what Baton keeps, and for how long.

Ended sessions idle for `[retention] ended_sessions` go with their events (an active ticket's
dependency and an active fork's parent stay), each leaving a tombstone so a late or replayed
event of it is dropped. The derived stores then forget every tombstoned ticket: a gc
interrupted between the stores is finished by the next one. Signals older than `[retention]
signals` go too (on Kafka, the topic's retention.ms). Nothing of an active ticket is ever
removed. An embedded store's file then mostly free pages is rebuilt (bench/retention.py).
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime

from baton import clock
from baton.errors import StoreUnavailable
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

# The embedded stores' files a gc removes rows from, and the share of free pages over which
# one is rebuilt to give their space back (a rebuild holds the file's write lock meanwhile).
EMBEDDED_FILES = ("registry.db", "signals.db", "graph.db", "recall/vectors.db", "recall/queue.db",
                  "recall/queries.db")
COMPACT_FREE = 0.25


@dataclass
class GcReport:
    dry_run: bool
    sessions: list[str] = field(default_factory=list)  # tickets pruned (or that would be)
    signals: int = 0
    decisions: int = 0
    reclaimed: int = 0  # bytes the embedded stores' files shrank by
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"dry_run": self.dry_run, "sessions": self.sessions, "signals": self.signals,
                "decisions": self.decisions, "reclaimed_bytes": self.reclaimed, "warnings": self.warnings}


def collect_garbage(stores: Stores, *, dry_run: bool = False, at: datetime | None = None) -> GcReport:
    """Apply the retention settings. Raises StoreUnavailable when the registry cannot
    answer; a derived store that fails only warns (the next gc finishes it)."""
    at = at or clock.now()
    report = GcReport(dry_run)
    report.sessions = stores.registry.prune(at - stores.settings.keep_ended_sessions, dry_run=dry_run)
    if dry_run:
        return report
    forgotten = sorted(stores.registry.pruned().unwrap(Store.SESSION_REGISTRY) or ())
    if forgotten:
        for name, forget in ((Store.CONFLICT_GRAPH, lambda: stores.graph.forget(forgotten)),
                             (Store.RECALL_QUEUE, lambda: stores.embedding_queue.drop_tasks(stores.project, forgotten)),
                             (Store.RECALL_QUEUE, lambda: stores.ticket_queries.drop_tasks(stores.project, forgotten)),
                             (Store.RECALL_INDEX, lambda: _delete_decisions(stores, forgotten, report))):
            try:
                forget()
            except StoreUnavailable as exc:
                report.warnings.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - a derived store never fails the gc
                report.warnings.append(f"{name} unavailable: {type(exc).__name__}: {exc}")
    try:
        report.signals = stores.signals.prune(at - stores.settings.keep_signals)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
    if report.sessions or report.signals:
        report.reclaimed = _compact(stores, report)
    return report


def _compact(stores: Stores, report: GcReport) -> int:
    """Give back the space of what was removed: each embedded store's file that is at least
    COMPACT_FREE free pages is rebuilt (baton.sqlite.scrub); SQLite would otherwise keep the
    pages for its next rows and the file its size. Returns the bytes given back."""
    from baton.sqlite import scrub

    home, reclaimed = stores.settings.home, 0
    for name in EMBEDDED_FILES:
        try:
            reclaimed += scrub(home / name, timeout=stores.settings.store_timeout, min_free=COMPACT_FREE)
        except StoreUnavailable as exc:
            report.warnings.append(f"{exc}; its space is given back by a later gc")
    return reclaimed


def _delete_decisions(stores: Stores, task_ids: list[str], report: GcReport) -> None:
    with closing(stores.decision_index()) as index:
        report.decisions = index.delete_tasks(stores.project, task_ids)
