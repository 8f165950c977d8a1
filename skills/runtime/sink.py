"""Where a write goes: the sink, chosen once when the stores are opened (Stores.sink).

- Embedded (no store on a server): `commit` applies the events now, through the projection.
- Kept for a server, without Kafka: the events wait in the pending writes
  (`pending-writes.db`) and a delivery applies them through the projection.
- Kafka: the events wait in the event log's outbox and a delivery produces them; `baton
  projector` applies them.

Kept events carry the project of the stores that kept them (baton.projects.qualified), and
a delivery applies each through the stores of that project. So a write never waits for a
server, and no service asks which servers are configured. Every sink delivers the pending
writes left from an earlier configuration too, so nothing kept is ever stranded.

The projection (baton.skills.core.projection) is given to the stores when they are built
(Stores.projection) by a layer that may import it, so runtime imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from baton.errors import StoreUnavailable
from baton.store_names import Store

if TYPE_CHECKING:
    from datetime import datetime

    from baton.registry.kafka import KafkaEventLog
    from baton.registry.model import Event
    from baton.signals.kafka import KafkaSignalBus
    from baton.signals.model import Signal
    from baton.signals.wire import WireSignal
    from baton.skills.runtime.stores import Stores

GRAPH = Store.CONFLICT_GRAPH


class KeptEvent(Protocol):
    """A registry event as its JSON, keyed as the outboxes want it, with the type and time
    the embedded registry files it under."""

    @property
    def event_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def at(self) -> datetime: ...
    @property
    def body(self) -> str: ...


class Sink:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        # An embedded registry that refuses reads refuses this write too; a server's
        # registry takes the write later, when it is delivered.
        self.writes_need_registry = not stores.settings.database_url

    def keep(self, events: Sequence[KeptEvent], *, derive: Callable[[], None] | None = None) -> None:
        """Make the events durable now, on the cheapest path (the hook's: no event model is
        imported): kept for a delivery, or (the embedded default) appended to the registry
        unprojected, then derive run: what brings the stores derived from the registry up to
        date with them (a kept event's projection does it where it is delivered). Raises
        StoreUnavailable when they can be neither kept nor appended."""
        raise NotImplementedError

    def commit(self, events: Sequence[KeptEvent]) -> list[str]:
        """Apply the events now through the projection, or keep them for a delivery; returns
        the warnings. Raises StoreUnavailable when they can be neither kept nor applied."""
        self.keep(events)
        return []

    def keep_decided(self, events: Sequence[Event]) -> None:
        """The one follow-up of events the registry decided and took at once (a claim's grant, a
        release, a take-over: each needs its answer now). Every reader reads them from the registry,
        so nothing more is owed, except where the projections replay an event log (Kafka): they are
        kept there too (the registry, which has their ids, takes them back as no change)."""

    def keep_signals(self, signals: Sequence[Signal | WireSignal]) -> list[bool]:
        """Keep signals, the one way they leave: stored in the embedded log at once, or kept
        in the Kafka outbox for the delivery (the one the command's close starts, or the
        projector's at the end of its batch). For each, whether its id was new. Raises
        StoreUnavailable."""
        return self.stores.signals.publish(signals)

    def deliver(self, *, background: bool = False) -> list[str]:
        """Deliver what waits, within the command's budget; a warning for each store that
        could not take it (it still waits). The embedded registry's queued writes wait for
        its lock a moment, silently (a read sees them anyway), or, in the background
        delivery, as long as the command's timeout, with a warning if that was not enough."""
        warnings = _apply_pending(self.stores)
        if self.writes_need_registry:
            registry = self.stores.registry
            try:
                if registry.queued() and not registry.apply_queued(patient=background) and background:
                    warnings.append(f"{registry.queued()} writes wait for the session registry's lock")
            except StoreUnavailable as exc:
                if background:
                    warnings.append(str(exc))
        return warnings

    def waiting(self) -> int:
        """How many writes (events and signals) wait on this machine for a server, or in
        the embedded registry's write queue for its lock."""
        queued = self.stores.registry.queued() if self.writes_need_registry else 0
        return self.stores.pending.waiting() + queued


class EmbeddedSink(Sink):
    def keep(self, events: Sequence[KeptEvent], *, derive: Callable[[], None] | None = None) -> None:
        registry = self.stores.registry
        for event in events:
            registry.append_body(event.event_id, event.task_id, event.at, event.type, event.body)
        if derive is not None:
            derive()

    def commit(self, events: Sequence[KeptEvent]) -> list[str]:
        from baton.registry.wire import event_of

        return _projected(self.stores, [event_of(e.type, e.body) for e in events])


class PendingSink(Sink):
    def keep(self, events: Sequence[KeptEvent], *, derive: Callable[[], None] | None = None) -> None:
        self.stores.pending.keep(_in_project(self.stores.project, _rows(events)))


class KafkaSink(Sink):
    def keep(self, events: Sequence[KeptEvent], *, derive: Callable[[], None] | None = None) -> None:
        self._event_log().keep(_in_project(self.stores.project, _rows(events)))

    def keep_decided(self, events: Sequence[Event]) -> None:
        self._event_log().keep(_in_project(self.stores.project,
                                           ((str(e.event_id), e.task_id, e.model_dump_json()) for e in events)))

    def deliver(self, *, background: bool = False) -> list[str]:
        warnings = []
        for outbox in (self._event_log, self._signal_log):
            try:
                store = outbox()  # opening it may fail too
                if store.waiting():  # opens no file that is not there
                    store.deliver()
            except StoreUnavailable as exc:
                warnings.append(str(exc))
        return warnings + super().deliver(background=background)

    def waiting(self) -> int:
        return self._event_log().waiting() + self._signal_log().waiting() + super().waiting()

    # Both on Kafka, where this sink is chosen.
    def _event_log(self) -> KafkaEventLog:
        return cast("KafkaEventLog", self.stores.event_log)

    def _signal_log(self) -> KafkaSignalBus:
        return cast("KafkaSignalBus", self.stores.signals)


def _in_project(project: str, events: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(message id, key, body) of each (event id, ticket, body), id and key qualified by its project."""
    from baton.projects import qualified

    return [(qualified(project, event_id), qualified(project, task_id), body) for event_id, task_id, body in events]


def _rows(events: Sequence[KeptEvent]) -> Iterable[tuple[str, str, str]]:
    return ((e.event_id, e.task_id, e.body) for e in events)


def by_project(stores: Stores, keys: Sequence[str]) -> dict[str, list[int]]:
    """The positions of kept events by the project their keys name (a key kept before
    projects: the stores' own), in their order."""
    from baton.projects import split_qualified

    groups: dict[str, list[int]] = {}
    for position, key in enumerate(keys):
        project = split_qualified(key)[0] or stores.project
        groups.setdefault(project, []).append(position)
    return groups


def _projected(stores: Stores, events: Sequence[Event]) -> list[str]:
    """The events applied to the stores through their projection: its warnings."""
    if stores.projection is None:
        raise RuntimeError("these stores were built without a projection: they cannot apply events")
    return stores.projection(stores, events)


def _apply_pending(stores: Stores) -> list[str]:
    """Apply the pending writes to the stores. While the graph's server cannot be reached
    they stay until it took them too (it has no other way to learn their touches; recall
    heals by itself, as a resume queues the decisions the index lacks), and those the
    registry already took are left alone meanwhile, so reads do not apply them again and
    again. A graph that answered with an error only warns, as it may refuse them forever."""
    pending = stores.pending
    if not pending.waiting():
        return []
    from baton.budget import bolt_server, postgres_server

    budget, graph_url, graph_down = stores.budget, stores.settings.graph_url, None
    try:
        if stores.settings.database_url:  # known down: no waiting for another delivery either
            budget.gate(postgres_server(stores.settings.database_url)).refuse_known(Store.SESSION_REGISTRY)
        graph = budget.gate(bolt_server(graph_url)) if graph_url else None
        try:  # known down, in this command or by the health record
            if graph is not None:
                graph.refuse_known(GRAPH)
        except StoreUnavailable as exc:
            graph_down = str(exc)
        with budget.waiting(), pending.delivering(max(budget.remaining(), 0.0)) as ours:
            waiting = pending.entries() if ours else []
            due = [e for e in waiting if not (e.taken and graph_down)]
            warnings = [f"{graph_down}; {len(waiting)} writes wait for it in {pending.path}"] if graph_down else []
            if not due:
                return warnings
            from baton.registry.wire import event_in

            found = []
            for project, kept in by_project(stores, [e.key for e in due]).items():
                found += _projected(stores.for_project(project), [event_in(due[p].body) for p in kept])
            # Not heard from in this command (one that answered with an error may refuse them forever).
            if graph is not None and graph.unreachable:
                pending.mark_taken([e.message_id for e in due])
            else:
                pending.drop([e.message_id for e in due])
            return warnings + found
    except StoreUnavailable as exc:
        return [f"{exc}; {pending.waiting()} earlier writes still wait in {pending.path}"]
