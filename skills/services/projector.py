"""The projector: applies the registry's event log on Kafka to every store.

A batch at a time (baton.skills.core.projection.project): one append to the registry, one
write to the graph and one queueing of its decisions, however many events it holds.
At least once and replay-safe: a batch's offsets are committed only after every store took
it: the registry, the graph (a transaction that timed out or deadlocked is run again, in
smaller pieces), the recall queue and the signal outbox (whose delivery to Kafka follows
the commit). Every store ignores an event it already has (event ids in the registry,
MERGE in the graph, point ids in recall, signal ids in the outbox), so a crash at any
point loses nothing and doubles nothing. When it starts (--once too), the projector also
repairs the stores from the registry over the repair window (baton.skills.services.repair),
for whatever an earlier version, or a store restored from a backup, left out.

The consumer group follows the topic prefix (`baton-projector` for the default prefix
`baton.`), so projectors of different prefixes never share a group; those of one group
share the topic's partitions, each ticket's events in one (keyed by ticket), in order. A store's failure is
logged when it happens, with the time, and again when the store is back: a projector run
as a service says what it waits for while it waits. Each attempt at a batch has a budget of
its own (baton.budget), and the projector asks every server whatever the health record says.
A running projector (not --once) also applies retention, as `baton gc` does, when it starts
and then every `[retention] gc_interval` (an hour), in one line of log each time.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, ServerUnreachable, StoreUnavailable
from baton.retry import Backoff
from baton.skills.core.projection import GRAPH_CHUNK, project
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.registry.kafka import KafkaEventLog

MAX_BACKOFF = 5.0
ONCE_ATTEMPTS = 5  # tries of a batch by `--once` while a store answers with an error


def default_group(topic_prefix: str) -> str:
    return f"{topic_prefix.rstrip('.') or 'baton'}-projector"


def log_line(message: str) -> None:
    from baton.masking import mask

    print(f"{clock.to_text(clock.now())} baton projector: {' '.join(mask(message).split())}", file=sys.stderr,
          flush=True)


@dataclass
class ProjectorReport:
    events: int = 0
    batches: int = 0
    repair_seconds: float = 0.0  # the repair at start: once per start, whatever the batches
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Outages:
    """Which stores are failing, so each failure is logged once, when it starts, and its end too."""

    log: Callable[[str], None]
    since: dict[str, float] = field(default_factory=dict)

    def failed(self, store: str, message: str) -> None:
        if store not in self.since:
            self.since[store] = time.monotonic()
            self.log(message)

    def answered(self, store: str) -> None:
        started = self.since.pop(store, None)
        if started is not None:
            self.log(f"{store} is back after {time.monotonic() - started:.0f} s")


def run_projector(stores: Stores, *, group: str | None = None, once: bool = False, batch_size: int = 1000,
                  idle: float = 1.0, log: Callable[[str], None] = log_line) -> ProjectorReport:
    """Consume and apply events. once: stop when caught up with the log, and give up
    (StoreUnavailable) if a store is down; otherwise run until interrupted, polling every
    `idle` seconds and waiting for stores that are down, Kafka included."""
    event_log = stores.event_log
    if event_log is None:
        raise BadInput("the projector needs Kafka: set BATON_KAFKA_BOOTSTRAP")
    stores.own_writes = False
    report = ProjectorReport()
    outages = _Outages(log)
    group = group or default_group(stores.settings.kafka_topic_prefix)
    retry = Backoff(0.1, most=MAX_BACKOFF)
    next_gc = time.monotonic()  # a running projector applies retention when it starts, then every gc_interval
    # The signal bus connects while the consumer joins its group, not in the first batch;
    # if it cannot, the first batch's delivery of its signals asks again, and logs why.
    with contextlib.suppress(StoreUnavailable):
        stores.signals.prepare()
    started = time.monotonic()
    _repair(stores, log)
    report.repair_seconds = time.monotonic() - started
    while True:
        stores.budget.renew()  # each reading of the log asks Kafka afresh
        try:
            for batch in event_log.batches(group, size=batch_size, idle=idle, until_caught_up=once):
                outages.answered(Store.EVENT_LOG)
                retry.reset()
                if batch:
                    _apply(stores, event_log, batch, once=once, outages=outages, report=report)
                if not once and time.monotonic() >= next_gc:
                    _collect_garbage(stores, log)
                    next_gc = time.monotonic() + stores.settings.gc_interval
            return report
        except StoreUnavailable as exc:
            if once or exc.store != Store.EVENT_LOG:
                raise
            # Kafka is down or the group is rebalancing: read again from the committed offsets.
            outages.failed(Store.EVENT_LOG, f"{exc}; reading again once it answers")
            retry.wait()


def _repair(stores: Stores, log: Callable[[str], None]) -> None:
    """Repair the stores from the registry over the repair window (baton.skills.services.repair),
    as `baton doctor --repair` does; one line of log when it repaired something or could not
    compare a store (a projector that found nothing to do says nothing), never a stop."""
    from baton.skills.services.repair import repair

    stores.budget.renew()
    try:
        report = repair(stores)
    except StoreUnavailable as exc:
        log(f"repair: not run: {exc}")
        return
    if report.repaired or report.warnings:
        log(report.summary() + "".join(f"; {warning}" for warning in report.warnings))


def _collect_garbage(stores: Stores, log: Callable[[str], None]) -> None:
    """Apply retention as `baton gc` does (baton.skills.services.gc: nothing an active
    ticket needs goes), in every project the registry holds (the projector applies every
    project's events); one line of log, never a stop."""
    from baton.skills.services.gc import collect_garbage

    stores.budget.renew()
    started = time.monotonic()
    sessions = signals = decisions = 0
    warnings: list[str] = []
    try:
        for name in stores.registry.projects().unwrap(Store.SESSION_REGISTRY) or []:
            report = collect_garbage(stores.for_project(name))
            sessions, signals = sessions + len(report.sessions), signals + report.signals
            decisions += report.decisions
            warnings += report.warnings
    except StoreUnavailable as exc:
        log(f"gc: not run: {exc}; next in {stores.settings.gc_interval:g} s")
        return
    log(f"gc: removed {sessions} ended sessions, {signals} signals and {decisions} decisions from recall in "
        f"{time.monotonic() - started:.2f} s" + "".join(f"; {warning}" for warning in warnings))


def _apply(stores: Stores, event_log: KafkaEventLog, batch: list, *, once: bool, outages: _Outages,
           report: ProjectorReport) -> None:
    """Apply one batch to every store, then commit its offsets. Until every store applied
    it (the registry, the graph, the recall queue and the signal outbox), the batch is held
    uncommitted and applied again, with backoff, whatever the failure: a server down, a
    transaction that timed out, a deadlock. Each store ignores what it already has."""
    from baton.registry.wire import event_adapter
    from baton.skills.runtime.sink import by_project

    events = [event_adapter().validate_json(message.value()) for message in batch]
    # Each event applied in its own project, which its message's key names.
    groups = by_project(stores, [(message.key() or b"").decode("utf-8", "replace") for message in batch])
    retry, chunk, attempts = Backoff(0.1, most=MAX_BACKOFF), GRAPH_CHUNK, 0
    warnings: list[str] = []
    while True:
        stores.budget.renew()
        try:
            warnings = []
            for name, positions in groups.items():
                warnings += project(stores.for_project(name), [events[p] for p in positions],
                                    renew=stores.budget.renew, strict=True, graph_chunk=chunk)
            break
        except StoreUnavailable as exc:
            attempts += 1
            # --once gives up at once on a server that is down, after a few tries on one that
            # answered with an error (a transaction that timed out on a cold server, a deadlock).
            if once and (isinstance(exc, ServerUnreachable) or attempts >= ONCE_ATTEMPTS):
                raise
            outages.failed(exc.store, f"{exc}; holding {len(events)} events until it takes them")
            retry.wait()  # hold the batch (uncommitted) and apply it again
            # A write too large for the server's transaction timeout is split, down to one ticket.
            chunk = max(1, chunk // 2) if exc.store == Store.CONFLICT_GRAPH else chunk
    for store in (Store.SESSION_REGISTRY, Store.CONFLICT_GRAPH):  # asked about every batch
        outages.answered(store)
    asked: set[str] = {Store.RECALL_INDEX} if any(e.type == "decision_recorded" for e in events) else set()
    _log_stores(outages, warnings, asked)
    report.warnings += warnings
    try:
        event_log.commit(batch)
    except StoreUnavailable as exc:
        if once:
            raise
        # The group moved on while the batch was held (a rebalance, Kafka restarted): the
        # batch comes again to whoever holds its partitions, and applying it twice is a no-op.
        outages.log(f"{exc}; the batch will be applied again")
    report.events += len(events)
    report.batches += 1
    stores.budget.renew()
    _log_stores(outages, stores.sink.deliver(), set())  # the conflict signals the batch kept for Kafka


def _log_stores(outages: _Outages, warnings: list[str], asked: set[str]) -> None:
    """Log each store's failure among warnings, and the end of the earlier failures of the
    stores in `asked` that did not fail now."""
    failing = set()
    for warning in warnings:
        store, sep, _ = warning.partition(" unavailable: ")
        if sep:
            failing.add(store)
            outages.failed(store, warning)
        else:
            outages.log(f"warning: {warning}")
    for store in asked - failing:
        outages.answered(store)
