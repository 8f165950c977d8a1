"""Every sink (baton.skills.runtime.sink) keeps the same promise: a write kept, then
delivered, arrives exactly once; delivering again or replaying it changes nothing. Run
against the embedded stores, a PostgreSQL registry with the pending writes, and Kafka with
its projector, on the real servers. Writes kept by the previous version's outboxes (their
files as it made them) are delivered too."""

import uuid
from datetime import UTC, datetime

import pytest

from baton.outcome import Found
from baton.skills.core.commit import WireEvent, apply_events, commit, wire_event
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.sink import EmbeddedSink, KafkaSink, PendingSink
from baton.skills.runtime.stores import Stores

AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SINKS = {"embedded": EmbeddedSink, "pending": PendingSink, "kafka": KafkaSink}


# The pending and Kafka sinks sit in front of servers (tests/conftest.py cannot tell from "pending").
@pytest.fixture(params=["embedded", pytest.param("pending", marks=pytest.mark.servers),
                        pytest.param("kafka", marks=pytest.mark.servers)])
def sink_home(request, home, monkeypatch):
    """(mode, data home) with the settings that choose that sink."""
    if request.param in ("pending", "kafka"):
        monkeypatch.setenv("BATON_DATABASE_URL", request.getfixturevalue("postgres_url"))
    if request.param == "kafka":
        monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", request.getfixturevalue("kafka_server").bootstrap)
        monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    return request.param, home


def opened() -> Stores:
    return Stores(Settings.from_env(), projection=apply_events)


def settle(stores: Stores) -> list[str]:
    """Deliver what waits, and with Kafka let the projector apply what reached the log."""
    warnings = stores.sink.deliver()
    if isinstance(stores.sink, KafkaSink):
        from baton.skills.services.projector import run_projector

        run_projector(stores, once=True, idle=0.3, log=lambda _: None)
    return warnings


def registry_events(stores: Stores, task_id: str) -> list[str]:
    found = stores.registry.events(task_id)
    assert isinstance(found, Found), found
    return sorted(str(e.event_id) for e in found.value)


def writes(task_id: str) -> list[WireEvent]:
    return [wire_event("bound", task_id, "s1", AT, agent="claude", repo="github.com/acme/shop",
                       worktree_path="/w", branch="main", reopens=False),
            wire_event("step_completed", task_id, "s1", AT, text="schema")]


def test_a_write_arrives_once_and_replays_change_nothing(sink_home):
    mode, _ = sink_home
    events = writes("OMN-1")
    stores = opened()
    try:
        assert type(stores.sink) is SINKS[mode]
        report = WriteReport()
        commit(stores, events, report)
        assert report.warnings == []
        kept = mode != "embedded"
        assert stores.sink.waiting() == (len(events) if kept else 0), "kept until delivered, or applied now"
        assert settle(stores) == []
        assert stores.sink.waiting() == 0
        ids = sorted(e.event_id for e in events)
        assert registry_events(stores, "OMN-1") == ids, "each event arrived, once"
        session = stores.registry.get("OMN-1").value
        assert [step.text for step in session.completed_steps] == ["schema"]

        assert settle(stores) == [], "delivering again"
        commit(stores, events, WriteReport())  # the same write, replayed
        assert stores.sink.waiting() == 0, "an event kept once is not kept again"
        assert settle(stores) == []
        assert registry_events(stores, "OMN-1") == ids, "nothing doubled"
        assert stores.registry.get("OMN-1").value == session, "nothing changed"
    finally:
        stores.close()


def test_writes_kept_by_the_previous_version_are_delivered(sink_home):
    """The previous version's outbox files (the pending writes' `pending` table, the Kafka
    outbox without sequence numbers), with a write waiting in each, are converted when first
    opened and delivered once."""
    import sqlite3

    from baton.outbox import EARLIER
    from baton.sqlite import connect, write_transaction

    mode, home = sink_home
    bound, step = writes("OMN-7")
    pending = connect(home / "pending-writes.db", EARLIER["pending"][:2], timeout=2)
    with write_transaction(pending):
        pending.execute("INSERT INTO pending (body) VALUES (?)", (bound.body,))
    pending.close()
    if mode == "kafka":
        outbox = connect(home / "kafka-events-outbox.db", EARLIER["kafka"][:1], timeout=2)
        with write_transaction(outbox):
            outbox.execute("INSERT INTO kept (message_id) VALUES (?)", (step.event_id,))
            outbox.execute("INSERT INTO outbox (message_id, key, body) VALUES (?, ?, ?)",
                           (step.event_id, step.task_id, step.body))
        outbox.close()
    else:
        pending = sqlite3.connect(home / "pending-writes.db")
        with pending:
            pending.execute("INSERT INTO pending (body) VALUES (?)", (step.body,))
        pending.close()

    stores = opened()
    try:
        assert stores.sink.waiting() == 2
        assert settle(stores) == []
        assert stores.sink.waiting() == 0
        assert registry_events(stores, "OMN-7") == sorted([bound.event_id, step.event_id])
        assert settle(stores) == []
        assert registry_events(stores, "OMN-7") == sorted([bound.event_id, step.event_id])
    finally:
        stores.close()
