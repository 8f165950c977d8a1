"""Repair: bring the stores derived from the registry back in line with it, over a window.

The registry is the source of truth; the conflict graph, the recall queue and the conflict
signals are derived from it by the projection. For every ticket of every project active
within the repair window (`[doctor] repair_window`, 24 h by default), `baton doctor
--repair` and a starting `baton projector` compare what the registry holds with what each
store holds, and apply again what a store lacks:

- the graph: a ticket it lacks, its status and the files it touched (a write is MERGE-only,
  so what the graph has stays as it is);
- recall: the ticket's decisions neither indexed nor queued, queued for the indexer;
- signals: two active tickets sharing files with no conflict_detected signal between them
  in the window, signalled as the projection does (the same deterministic id).

The window bounds the work and ENTRIES its memory: the registry's order of its sessions is
read a page of CHUNK tickets at a time, and each page's sessions in full a few at a time,
as many as hold about ENTRIES entries (Session.history_size), until one is older than the window.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from baton import clock
from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.graph.base import TicketRecord
from baton.ids import TicketId
from baton.outcome import Found, Unavailable
from baton.registry.model import Session, Status
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

CHUNK = 200  # tickets of the registry's order read at a time
# Entries (files, decisions, steps...) of the sessions read and compared at a time: a repair's
# memory follows this, not how many sessions the window holds nor how long their histories are.
ENTRIES = 5_000


@dataclass
class RepairReport:
    window: timedelta
    tickets: int = 0  # tickets active within the window, compared
    graph_tickets: int = 0  # of them, written to the graph again
    graph_files: int = 0  # touches the graph lacked
    graph_statuses: int = 0  # statuses the graph had wrong
    graph_recounted: int = 0  # tickets whose conflicts were counted again (a graph from before the kept counts)
    decisions: int = 0  # decisions queued for recall
    signals: int = 0  # conflict signals published
    warnings: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> int:
        return self.graph_tickets + self.decisions + self.signals

    def to_json(self) -> dict:
        return {"window_seconds": self.window.total_seconds(), "tickets": self.tickets,
                "graph": {"tickets": self.graph_tickets, "files": self.graph_files, "statuses": self.graph_statuses,
                          "recounted": self.graph_recounted},
                "recall": {"decisions": self.decisions}, "signals": {"conflicts": self.signals},
                "warnings": self.warnings}

    def summary(self) -> str:
        hours = self.window.total_seconds() / 3600
        return (f"repaired over the last {hours:g} h ({self.tickets} tickets): graph {self.graph_tickets} tickets "
                f"({self.graph_files} files, {self.graph_statuses} statuses"
                + (f", conflicts of {self.graph_recounted} counted again" if self.graph_recounted else "")
                + f"), recall {self.decisions} decisions, signals {self.signals} conflicts")


def repair(stores: Stores, *, window: timedelta | None = None) -> RepairReport:
    """Compare every store with the registry over the window and apply again what each
    lacks, in every project the registry holds, a few sessions at a time (_active_since). Raises
    StoreUnavailable when the registry cannot be read; another store that fails adds a warning
    and is left as it was."""
    report = RepairReport(window or stores.settings.repair_window)
    since = clock.now() - report.window
    for name in stores.registry.projects().unwrap(Store.SESSION_REGISTRY):
        scoped = stores.for_project(name)
        # The pairs signalled in the window, read once when a chunk first needs them (on Kafka a
        # read is a pass over the topic), then those this repair signals: a pair in two chunks, once.
        signals = functools.partial(_repair_signals, signalled=functools.cache(
            functools.partial(scoped.signals.conflict_pairs, after=since)))
        parts: list[Callable[[Stores, list[Session], RepairReport], None]] = [_repair_graph, _repair_recall, signals]
        for sessions in _active_since(scoped, since):
            report.tickets += len(sessions)
            for part in list(parts):
                stores.budget.renew()  # each store its own budget: a long repair is no one command
                try:
                    part(scoped, sessions, report)
                except StoreUnavailable as exc:
                    report.warnings.append(str(exc))
                    parts.remove(part)  # one warning a store: its next chunks are left as they are
    # A graph from before the kept conflict counts is counted once, here and not on a
    # hook's path; until then the list counts conflicts as it reads them.
    stores.budget.renew()
    try:
        if not stores.graph.counted():
            report.graph_recounted = stores.graph.recount()
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
    if report.decisions:
        from baton.skills.core.indexing import start_background_indexer

        start_background_indexer(stores.settings)
    if report.signals:
        report.warnings += stores.sink.deliver()  # the signals kept above, on Kafka now if it answers
    return report


def _active_since(stores: Stores, since: datetime) -> Iterator[list[Session]]:
    """The project's sessions active since `since`, newest first, in chunks of about ENTRIES
    entries: a page of CHUNK tickets of the registry's order, then its sessions in full, a
    read at a time, until one is older. A read takes one ticket, then as many as would hold
    ENTRIES entries at the last read's average, at most twice as many as it; a chunk is
    handed on before the next read would take it past ENTRIES entries, so short histories
    still go a page at a time."""
    seen: set[str] = set()  # a ticket active meanwhile moves up the order: the next page repeats one
    size, held, older = 1, 0, False
    chunk: list[Session] = []
    for offset in itertools.count(0, CHUNK):
        page = [task for task, _ in stores.registry.session_order(include_inactive=True, offset=offset, limit=CHUNK
                                                                  ).unwrap(Store.SESSION_REGISTRY)]
        read = 0
        while read < len(page) and not older:
            tickets = page[read:read + size]
            read += len(tickets)
            found = stores.registry.get_many(tickets).unwrap(Store.SESSION_REGISTRY)
            sessions = [found[task] for task in tickets if task in found and task not in seen]
            recent = [s for s in sessions if s.last_activity >= since]
            seen.update(s.task_id for s in recent)
            chunk += recent
            held += sum(s.history_size() for s in recent)
            older = len(recent) < len(sessions)
            average = sum(s.history_size() for s in sessions) / max(len(sessions), 1)
            size = max(1, min(CHUNK, 2 * size, int(ENTRIES // max(average, 1))))
            if chunk and held + size * average > ENTRIES:  # the next read would take it past ENTRIES
                yield chunk
                chunk, held = [], 0
        if older or len(page) < CHUNK:  # older ones reached, or the last page
            break
    if chunk:
        yield chunk


def _repair_graph(stores: Stores, sessions: list[Session], report: RepairReport) -> None:
    counts = stores.graph.held_counts([s.task_id for s in sessions]).unwrap(Store.CONFLICT_GRAPH)
    # The graph takes only files the registry recorded and never drops one, so a ticket with
    # the registry's status and as many files holds them all: only the others are read
    # file by file.
    differing = [s for s in sessions if counts.get(s.task_id) != (s.status.value, len(s.files))]
    if not differing:
        return
    held = stores.graph.held([s.task_id for s in differing]).unwrap(Store.CONFLICT_GRAPH)
    records = []
    for session in differing:
        status, files = held.get(session.task_id, (None, set()))
        lacking = [touch for key, touch in session.files.items() if key not in files]
        if status == session.status.value and not lacking:
            continue
        report.graph_tickets += 1
        report.graph_files += len(lacking)
        report.graph_statuses += status is not None and status != session.status.value
        at = max((t.last_at for t in lacking), default=session.last_activity)
        records.append(TicketRecord(session.task_id, session.status.value,
                                    [FileRef(repo=t.repo, path=t.path) for t in lacking], at,
                                    session_id=session.session_ids[-1] if session.session_ids else None,
                                    depends_on=session.depends_on))
    if records:
        stores.graph.record_many(records)


def _repair_recall(stores: Stores, sessions: list[Session], report: RepairReport) -> None:
    from baton.skills.core.indexing import decision_record

    records = {r.point_id: r for r in (decision_record(stores.project, s, d) for s in sessions for d in s.decisions)}
    if not records:
        return
    with closing(stores.decision_index()) as index:
        lacking = set(records) - index.stored(list(records))
    lacking -= stores.embedding_queue.queued(list(lacking))
    if lacking:
        report.decisions += stores.embedding_queue.add([records[p] for p in sorted(lacking, key=str)])


def _repair_signals(stores: Stores, sessions: list[Session], report: RepairReport, *,
                    signalled: Callable[[], Found[set[frozenset[str | None]]] | Unavailable]) -> None:
    from baton.skills.core.binding import ActiveTask
    from baton.skills.core.overlaps import conflicts_of, keep_unknown

    active = [s for s in sessions if s.status is Status.active and s.files]
    if not active:
        return
    shared = stores.graph.shared_files_of([s.task_id for s in active]).unwrap(Store.CONFLICT_GRAPH)
    pairs = signalled().unwrap(Store.SIGNAL_LOG)  # the same set each chunk, which adds what it signals
    now = clock.now()
    candidates = {}
    for session in active:
        conflicts, _, by_key = conflicts_of(session.task_id, shared.get(session.task_id, {}))
        task = ActiveTask(TicketId(session.task_id), session.session_ids[-1] if session.session_ids else "", "repair")
        for conflict in conflicts:
            pair = frozenset((session.task_id, conflict.other_task_id))
            if pair not in pairs:
                pairs.add(pair)  # one signal per pair, from whichever side comes first
                candidates[str(conflict.signal_id)] = (task, conflict, by_key, now)
    if candidates:
        report.signals += len(keep_unknown(stores, list(candidates.values())))
