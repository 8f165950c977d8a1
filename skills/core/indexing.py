"""Indexing decisions for recall, off every write path.

A write queues its decisions (baton.recall.queue) and starts `baton index --background`
unless one runs (it holds `indexer.lock` in the data home); that process embeds what waits
(and the ticket queries resumes wanted), lingers briefly, and exits. The projector indexes in
its own process. A resume queues its ticket's decisions the index lacks, so every decision
the registry holds is eventually indexed, exactly once. What was indexed or queued before
projects (baton.projects) is never read: the indexer heals it from the registry (heal_unscoped).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import StoreUnavailable
from baton.locks import held, linger
from baton.store_names import Store

if TYPE_CHECKING:
    from uuid import UUID

    from baton.recall.base import DecisionIndex, DecisionRecord
    from baton.recall.indexer import IndexReport
    from baton.registry.model import Entry, Session
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

LOCK = "indexer.lock"
LINGER = 0.5  # seconds without new decisions before a background indexer exits
AFTER_WAIT = 2.0  # seconds a background indexer waits for the command that started it to end


def decision_record(project: str, owner: Session, entry: Entry) -> DecisionRecord:
    """One of owner's recorded decisions, as recall holds it."""
    from baton.recall.base import DecisionRecord

    return DecisionRecord(project=project, task_id=owner.task_id, session_id=entry.session_id, text=entry.text,
                          context=entry.context, recorded_at=entry.at.isoformat(), repo=owner.repo or "")


def queue_decisions(stores: Stores, records: Sequence[DecisionRecord], *, strict: bool = False) -> list[str]:
    if not records:
        return []
    return queue_payloads(stores, records[0].task_id, [(r.point_id, r.model_dump_json()) for r in records],
                          strict=strict)


def queue_payloads(stores: Stores, task_id: str, payloads: Sequence[tuple[UUID, str]], *,
                   strict: bool = False) -> list[str]:
    """Queue (point id, DecisionRecord JSON) pairs for embedding; a failure is a warning (the
    registry keeps the decision and a resume of its ticket queues it again), or raised
    (strict: the projector applies the events again)."""
    try:
        stores.embedding_queue.add_payloads(payloads)
    except StoreUnavailable as exc:
        if strict:
            raise
        return [f"{exc}; the decision is kept and is indexed after the next resume of {task_id}"]
    from baton.recall import missing_model

    missing = missing_model()
    if missing:
        return [f"embedding model unavailable: {missing}; the decision is kept and indexed once it is installed"]
    return []


def queue_unindexed_decisions(stores: Stores, records: Sequence[DecisionRecord]) -> None:
    """Queue those of records (a ticket's own decisions the index lacks) that do not wait
    yet, and start the indexer; a resume calls this, so it stays quiet on failure."""
    if not records:
        return
    queue = stores.embedding_queue
    try:
        waiting = queue.queued([r.point_id for r in records])
        fresh = [r for r in records if r.point_id not in waiting]
        if fresh:
            queue.add(fresh)
    except StoreUnavailable:
        return  # the registry keeps them: the next resume tries again
    start_background_indexer(stores.settings)


def indexer_running(home: Path) -> bool:
    with held(home / LOCK, within=0) as got:
        return not got


def start_background_indexer(settings: Settings) -> None:
    """Start a detached `baton index --background` unless one runs or the settings turn it
    off, idle from its start and waiting for this process to end first; costs the caller a
    spawn, no wait."""
    if not settings.background_indexing or indexer_running(settings.home):
        return
    from baton.skills.runtime.resident_client import SOCKET_NAME
    from baton.skills.runtime.spawn import CLI, CONSOLE, spawn_baton

    # Through a resident that listens: its fork has Baton and the model loaded, where a fresh
    # indexer spends about 0.25 s of CPU importing them (docs/performance.md).
    served = settings.resident and (settings.home / SOCKET_NAME).exists()
    spawn_baton("index", "--background", "--after", str(os.getpid()), module=CONSOLE if served else CLI, idle=True)


def index_decisions(stores: Stores, *, background: bool = False, wait: float | None = None,
                    reembed: bool = False, after: int | None = None) -> IndexReport | None:
    """Embed and store what waits in the queue; the IndexReport, or None when another indexer
    holds the lock (it takes these too). The background indexer, and reembed, then re-embed the
    decisions of an older recipe. Foreground, it waits up to `wait` (default: the store timeout)
    for a running indexer. Background, it waits (up to AFTER_WAIT) for the process `after` to
    end, so the embedding waits until that command's answer is out, lingers LINGER seconds, and
    releases the lock before its last look at the queue, so a decision queued meanwhile (whose
    writer saw the lock held) is never left waiting."""
    from baton.recall.indexer import IndexReport

    home = stores.settings.home
    total = IndexReport()
    if not background:
        with held(home / LOCK, within=stores.settings.store_timeout if wait is None else wait) as got:
            return _healed(stores, _add(total, stores.indexer().run(reembed=reembed))) if got else None
    from baton.processes import run_at_lowest_priority, wait_gone

    run_at_lowest_priority()  # it yields every core and the disk to the agent, its hooks and commands
    if after is not None:
        wait_gone(after, AFTER_WAIT)

    def index() -> bool:
        _healed(stores, _add(total, stores.indexer().run(reembed=True)))
        return True

    linger(home / LOCK, index, lambda: stores.embedding_queue.count() + stores.ticket_queries.waiting_count(),
           idle=LINGER)  # decisions and ticket queries waiting to be embedded
    return total


def _add(total: IndexReport, report: IndexReport) -> IndexReport:
    for count in fields(report):  # counts, and the list of dropped entries
        setattr(total, count.name, getattr(total, count.name) + getattr(report, count.name))
    return total


def _healed(stores: Stores, report: IndexReport) -> IndexReport:
    """The report, after healing what was indexed or queued before projects, if anything
    was, and indexing what that queued (run with the indexer's lock held)."""
    index = stores.indexer().index
    if not report.unscoped and not index.unscoped_count():
        return report
    try:
        heal_unscoped(stores, index)
    except StoreUnavailable:
        return report  # the registry is down: nothing unscoped is read meanwhile, the next run heals
    report.unscoped = 0  # healed: the entries are queued again in their projects
    return _add(report, stores.indexer().run())


def heal_unscoped(stores: Stores, index: DecisionIndex) -> int:
    """Index again, in its project, every decision of every project's registry that the
    index lacks: with the vector of its point from before projects when that point embedded
    the same text and that text fits the model's window (a tokenization, no forward pass),
    else through the queue. Then the points without a project go, once every project was
    walked. Returns how many decisions were queued."""
    from baton.outcome import Found

    projects = stores.registry.projects()
    walked = projects.value if isinstance(projects, Found) else [stores.project]
    queued = sum(_restore(stores.for_project(project), index) for project in walked)
    if isinstance(projects, Found):
        index.delete_unscoped()
    return queued


def _restore(stores: Stores, index: DecisionIndex) -> int:
    """Store or queue the decisions of this project's registry that the index lacks; how many were queued."""
    from baton.recall.wire import unscoped_point_id

    sessions = stores.registry.list_sessions(include_inactive=True).unwrap(Store.SESSION_REGISTRY)
    records = [decision_record(stores.project, session, d) for session in sessions for d in session.decisions]
    queue, queued = stores.embedding_queue, 0
    for start in range(0, len(records), 500):
        chunk = records[start:start + 500]
        stored = index.stored([r.point_id for r in chunk])
        lacking = {unscoped_point_id(r.task_id, r.text): r for r in chunk if r.point_id not in stored}
        before = index.unscoped_points(list(lacking))
        found = [(record, before[old]) for old, record in lacking.items() if old in before]
        fits = _windows(stores, [record.embedding_text() for record, _ in found])
        kept = [(record, vector) for (record, (text, vector)), windows in zip(found, fits, strict=True)
                if text == record.embedding_text() and windows == 1]
        if kept:
            index.upsert([record for record, _ in kept], [vector for _, vector in kept])
        moved = {record.point_id for record, _ in kept}
        rest = [r for r in lacking.values() if r.point_id not in moved]
        waiting = queue.queued([r.point_id for r in rest])
        queued += queue.add([r for r in rest if r.point_id not in waiting])
    return queued


def _windows(stores: Stores, texts: list[str]) -> list[int]:
    """How many windows of the model each text takes: a point from before projects embedded
    the first window only, so its vector is kept for a text of one. Without the model, none
    is kept (queued, they wait for the model anyway)."""
    from baton.recall.embedding import ModelMissing

    if not texts:
        return []
    try:
        return stores.indexer().windows(texts)
    except ModelMissing:
        return [0] * len(texts)


def reindex_from_registry(stores: Stores) -> tuple[int, str | None]:
    """Queue every decision of every project's registry that the index lacks, after setting
    aside an index that cannot be read (the index serves every project of the data home);
    returns how many were queued and what was set aside."""
    index = stores.decision_index()
    try:
        recovered = index.recover()
        queued = heal_unscoped(stores, index)
    finally:
        index.close()
    return queued, recovered
