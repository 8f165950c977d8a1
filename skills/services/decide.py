"""The decide skill: record a decision within the hook's budget (100 ms per call).

Like baton.skills.services.touch it stays off pydantic and every recall library: the event's
JSON is built by hand (baton.registry.wire) and kept by the sink for the background delivery
or, where writes are applied at once, appended unprojected (the registry projects it before
its next read) and the decision queued for the indexer (baton.recall.wire,
baton.recall.queue); the decision_recorded signal is built by hand too (baton.signals.wire).
Embedding happens later, in the background indexer.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.signals.wire import SignalType, WireSignal, derived_signal_id
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.core.commit import WireEvent
from baton.skills.core.write_report import MAX_TEXT, WriteReport
from baton.skills.runtime.stores import Stores

REASON_LENGTH = 200


def decide(stores: Stores, task: ActiveTask, text: str, context: str, place: Place,
           *, at: datetime | None = None) -> WriteReport:
    """Record a decision, signal it and queue it for recall; recall and signal failures only warn.

    Raises BadInput for empty or over-long text and StoreUnavailable when the registry
    cannot take the write.
    """
    text, context = text.strip(), context.strip()
    if not text:
        raise BadInput("decision text is empty")
    for label, value in (("decision text", text), ("--context", context)):
        if len(value) > MAX_TEXT:
            raise BadInput(f"{label} is longer than {MAX_TEXT} characters")
    # Secrets never reach a store, a signal or a vector (baton.redaction).
    text, context = stores.redact(text), stores.redact(context)
    from baton.recall.wire import decision_payload, decision_point_id
    from baton.registry.wire import decision_recorded_body
    from baton.skills.core.indexing import queue_payloads, start_background_indexer

    at = at or clock.now()
    event_id = str(uuid.uuid4())
    report = WriteReport(session_id=task.session_id)
    body = decision_recorded_body(event_id, task.task_id, task.session_id, at, text, context, place.repo)
    signal = WireSignal(signal_id=derived_signal_id(SignalType.decision_recorded, event_id),
                        signal_type=SignalType.decision_recorded, task_id=task.task_id, session_id=task.session_id,
                        repo=place.repo, emitted_at=at, file_paths=(), related_task_id=None,
                        reason=text[:REASON_LENGTH])
    # Kept: the projection, wherever the event is delivered, queues the decision there; the
    # embedded registry takes it unprojected, and the sink queues it here.
    def queue() -> None:
        report.warnings += queue_payloads(stores, task.task_id, [(
            decision_point_id(stores.project, task.task_id, text),
            decision_payload(stores.project, task.task_id, task.session_id, text, context, at.isoformat(),
                             place.repo))])
        if not report.warnings:
            start_background_indexer(stores.settings)

    stores.sink.keep([WireEvent(event_id, task.task_id, "decision_recorded", at, body)], derive=queue)
    try:
        stores.signals.publish([signal], deliver=False)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))
    return report  # closing the stores starts the delivery of what was kept
