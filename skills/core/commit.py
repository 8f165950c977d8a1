"""How a write commits: its registry events (the source of truth) built as JSON, handed to
the sink (baton.skills.runtime.sink), and its signals published.

The events are built here as their JSON, without pydantic, and validated where they are
applied (at once with every store embedded, baton.skills.core.projection; by the background
delivery where a store is on a server): keeping an update costs about what a touch does. A
failing derived store only adds a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from baton.errors import BadInput, StoreUnavailable
from baton.ids import random_uuid
from baton.registry.wire import event_body
from baton.skills.core.binding import Binding, Place, check_session_id, read_binding
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.registry.model import Event
    from baton.signals.wire import WireSignal  # the hook's touch keeps no signal: not imported


# A NamedTuple: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class WireEvent(NamedTuple):
    """A registry event as its JSON, keyed as the event log wants it, with the type and time
    the embedded registry files it under (so it never parses the JSON for them)."""

    event_id: str
    task_id: str
    type: str
    at: datetime
    body: str


# The fields of events that Baton itself fills with identifiers, times, digests, paths and
# counts; every other string of an event, however deeply nested (a stage's evidence, a
# binding's agent name), is text from an agent or a command and is redacted when it is
# committed (baton.redaction), so no store, signal, vector or handoff holds a secret.
STRUCTURAL = frozenset({
    "event_id", "task_id", "session_id", "at", "type", "repo", "worktree_path", "path", "files", "branch",
    "inherited_from", "provenance", "snapshot", "status", "result", "repair_scope", "phase", "depends_on",
    "checkpoint_id", "boundary", "base", "staged_tree", "worktree_tree", "artifacts_tree", "environment",
    "run_id", "parent_run_id", "parent_task_id", "diverged_at", "kind", "run_kind", "written_at", "rewrites",
})
# Events that carry no free text at all: the touch's hot path never parses them.
_WITHOUT_TEXT = ('"type":"files_touched"', '"type":"activity_recorded"', '"type":"phase_changed"',
                 '"type":"ended"', '"type":"dependency_added"', '"type":"handoff_verified"')


def redacted(stores: Stores, events: Sequence[WireEvent]) -> list[WireEvent]:
    """The events with every free text redacted (parsed only where a field may hold one)."""
    import json

    out = []
    for event in events:
        if any(marker in event.body for marker in _WITHOUT_TEXT):
            out.append(event)
            continue
        body = json.loads(event.body)
        cleaned = {name: value if name in STRUCTURAL else _redact_values(stores, value)
                   for name, value in body.items()}
        out.append(event if cleaned == body else
                   WireEvent(event.event_id, event.task_id, event.type, event.at,
                             json.dumps(cleaned, separators=(",", ":"), ensure_ascii=False)))
    return out


def _redact_values(stores: Stores, value: object) -> object:
    if isinstance(value, str):
        return stores.redact(value) if value else value
    if isinstance(value, list):
        return [_redact_values(stores, item) for item in value]
    if isinstance(value, dict):
        return {name: item if name in STRUCTURAL else _redact_values(stores, item) for name, item in value.items()}
    return value


def wire_event(event_type: str, task_id: str, session_id: str, at: datetime, *, event_id: str | None = None,
               **fields: object) -> WireEvent:
    check_session_id(session_id)
    event_id = event_id or random_uuid()
    return WireEvent(event_id, task_id, event_type, at, event_body(
        event_type, event_id=event_id, task_id=task_id, session_id=session_id, at=at, **fields))


def apply_events(stores: Stores, events: Sequence[Event]) -> list[str]:
    """The projection as the sinks apply it (baton.skills.runtime.stores.Apply): its warnings."""
    from baton.skills.core.projection import project

    return project(stores, events)


def commit(stores: Stores, events: Sequence[WireEvent], report: WriteReport) -> None:
    """Hand the events to the sink: projected into every store now, or kept for the
    delivery. Raises StoreUnavailable when they can be neither kept nor applied."""
    report.warnings += stores.sink.commit(redacted(stores, events))


def publish(stores: Stores, signals: list[WireSignal], report: WriteReport) -> None:
    """Signal what was recorded: kept for the delivery where the signal log is Kafka."""
    try:
        stores.sink.keep_signals(signals)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))


def record_events(stores: Stores, events: Sequence[Event]) -> list[str]:
    """Commit model events as every write does (projected now, or kept for the delivery);
    returns the warnings."""
    report = WriteReport()
    commit(stores, [WireEvent(str(e.event_id), e.task_id, e.type, e.at, e.model_dump_json()) for e in events], report)
    return report.warnings


def read_binding_quietly(place: Place) -> Binding | None:
    """The current binding, or None when it is missing or unreadable (bind rewrites it)."""
    try:
        return read_binding(place)
    except BadInput:
        return None
