"""The projector: applies the registry's event log on Kafka to every store.

At least once and replay-safe: a batch's offsets are committed only after the registry,
the graph and the recall index took it, and every store ignores an event it already has
(event ids in the registry, MERGE in the graph, point ids in recall). A crash at any
point therefore loses nothing and doubles nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from baton.errors import BadInput, StoreUnavailable
from skills.projection import project
from skills.stores import Stores

GROUP = "baton-projector"
MAX_BACKOFF = 5.0


@dataclass
class ProjectorReport:
    events: int = 0
    batches: int = 0
    warnings: list[str] = field(default_factory=list)


def run_projector(stores: Stores, *, group: str = GROUP, once: bool = False, batch_size: int = 500,
                  idle: float = 1.0) -> ProjectorReport:
    """Consume and apply events. once: stop when caught up with the log, and give up
    (StoreUnavailable) if a store is down; otherwise run until interrupted, polling every
    `idle` seconds and waiting for stores that are down."""
    from registry.wire import event_adapter

    log = stores.event_log
    if log is None:
        raise BadInput("the projector needs Kafka: set BATON_KAFKA_BOOTSTRAP")
    adapter = event_adapter()
    report = ProjectorReport()
    for batch in log.batches(group, size=batch_size, idle=idle, until_caught_up=once):
        events = [adapter.validate_json(message.value()) for message in batch]
        backoff = 0.1
        while True:
            try:
                _, warnings = project(stores, events)
                break
            except StoreUnavailable:
                if once:
                    raise
                time.sleep(backoff)  # a store is down: hold the batch (uncommitted) until it is back
                backoff = min(backoff * 2, MAX_BACKOFF)
        report.warnings += warnings
        log.commit(batch)
        report.events += len(events)
        report.batches += 1
    return report
