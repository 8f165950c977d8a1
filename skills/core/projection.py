"""Apply registry events to every store: the registry first (the source of truth), then the
conflict graph and the recall queue, derived from it. Touches that reach the stores here are
checked for overlaps, each new one signalled, as `baton touch` does on the embedded default.
Decisions are queued for the indexer, never embedded here; a redaction (SecretsRedacted)
requeues its ticket's decisions as the registry now holds them and drops its ticket query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.graph.base import TicketRecord
from baton.ids import TicketId
from baton.registry.model import DecisionRecorded, Event, FilesTouched, SecretsRedacted, Status
from baton.skills.core.binding import ActiveTask
from baton.skills.core.indexing import decision_record, queue_decisions, start_background_indexer
from baton.skills.core.overlaps import signal_overlaps_of
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

GRAPH_CHUNK = 250  # tickets written to the graph in one transaction, within one budget


def project(stores: Stores, events: Sequence[Event], *, renew: Callable[[], None] | None = None,
            strict: bool = False, graph_chunk: int = GRAPH_CHUNK) -> list[str]:
    """Append events to the registry and bring the graph and recall up to date, a batch at a
    time (one registry append, one graph write of every ticket, one read of their overlaps, one
    queueing of their decisions, which starts a background indexer). Raises StoreUnavailable
    when the registry cannot take them; a failing graph or recall queue only warns (they heal
    later). strict (the projector): every store must apply them, else StoreUnavailable and the
    caller applies them again (every store ignores what it has); overlaps' signals are then kept
    for a delivery. renew: called before each graph write of graph_chunk tickets, for work whose
    batches outlast one command's budget. Returns the warnings.

    It reads each ticket as the registry's batch view (Session.batch_view): what it holds
    follows the batch, not the tickets' history."""
    sessions = stores.registry.append(events, whole=False)
    warnings: list[str] = []
    by_task: dict[str, list[Event]] = {}
    for event in events:
        by_task.setdefault(event.task_id, []).append(event)
    records = []
    for task_id, session in sessions.items():
        mine = by_task[task_id]
        files = {f.key: f for e in mine if isinstance(e, FilesTouched) for f in e.files}  # each file once
        records.append(TicketRecord(task_id, session.status.value, list(files.values()), max(e.at for e in mine),
                                    session_id=mine[-1].session_id, depends_on=session.depends_on))
    shared: dict[str, dict[str, list[FileRef]]] | None = {}  # the overlaps, when every write answered them
    try:
        for start in range(0, len(records), graph_chunk):
            if renew is not None:
                renew()
            written = stores.graph.record_many(records[start:start + graph_chunk])
            shared = None if shared is None or written is None else shared | written
    except StoreUnavailable as exc:
        if strict:
            raise
        warnings.append(str(exc))
    else:
        # The events' model parsed their tickets' ids.
        signal_overlaps_of(stores, [(ActiveTask(TicketId(r.task_id), r.session_id or "", "projection"), r.files, r.at)
                                    for r in records if r.files and sessions[r.task_id].status is Status.active],
                           warnings, strict=strict, shared=shared)
    # A decision is queued as its ticket's projection holds it: a replayed event whose text
    # a redaction rewrote since (or of a pruned ticket) is not embedded again.
    held = {(task_id, d.text) for task_id, session in sessions.items() for d in session.decisions}
    decisions = [e for e in events if isinstance(e, DecisionRecorded) and (e.task_id, e.text) in held]
    redacted = sorted({e.task_id for e in events if isinstance(e, SecretsRedacted) and e.task_id in sessions
                       and any(r.event_type == "decision_recorded" for r in e.rewrites)})
    if redacted:
        warnings += _owed(_forget_recall(stores, redacted), strict, Store.RECALL_INDEX)
    rewritten = sorted({e.task_id for e in events if isinstance(e, SecretsRedacted)})
    if rewritten:
        # A ticket query embeds the goal and next action as they read before: the next resume wants it anew.
        try:
            stores.ticket_queries.drop_tasks(stores.project, rewritten)
        except StoreUnavailable as exc:
            warnings += _owed([str(exc)], strict, Store.RECALL_QUEUE)
    if decisions or redacted:
        from baton.recall.base import DecisionRecord

        queued = [DecisionRecord(project=stores.project, task_id=e.task_id, session_id=e.session_id, text=e.text,
                                 context=e.context, recorded_at=e.at.isoformat(), repo=e.repo) for e in decisions]
        queued += [decision_record(stores.project, sessions[task_id], d)
                   for task_id in redacted for d in sessions[task_id].decisions]
        trouble = queue_decisions(stores, queued, strict=strict)
        warnings += trouble
        if not trouble:
            start_background_indexer(stores.settings)
    return warnings


def _owed(warnings: list[str], strict: bool, store: str) -> list[str]:
    """The warnings, or (strict) the first of them raised: the store still owes the events."""
    if strict and warnings:
        raise StoreUnavailable(store, warnings[0].partition(" unavailable: ")[2] or warnings[0])
    return warnings


def _forget_recall(stores: Stores, task_ids: list[str]) -> list[str]:
    """Drop the tickets' queued and indexed decisions, whose text a redaction rewrote: they
    are queued again from the projection, and embedded from the redacted text."""
    warnings = []
    try:
        stores.embedding_queue.drop_tasks(stores.project, task_ids)
        index = stores.decision_index()
        try:
            index.delete_tasks(stores.project, task_ids)
        finally:
            index.close()
    except StoreUnavailable as exc:
        warnings.append(str(exc))
    except ImportError:
        pass  # no recall libraries: nothing was ever indexed
    return warnings
