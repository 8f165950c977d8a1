"""Where a write goes: the sink, chosen once when the stores are opened (Stores.sink).

- Embedded (no store on a server): `commit` applies the events now, through the projection.
- Kept for a server, without Kafka: the events wait in the pending writes
  (`pending-writes.db`) and a delivery applies them through the projection.
- Kafka: the events wait in the event log's outbox and a delivery produces them; `baton
  projector` applies them.

Kept events carry the project of the stores that kept them (baton.projects.qualified, in
their keys), and a delivery applies each through the stores of that project, whichever
project the delivering command works in.

So a write never waits for a server, and no service asks which servers are configured: it
keeps its events (`keep`: the hook's touch and decide, which apply them themselves when the
sink keeps nothing) or commits them (`commit`). Every sink delivers the pending writes
left from an earlier configuration too, so nothing kept is ever stranded, and where the
registry is embedded, the writes its write queue holds (baton.write_queue: those that found
its lock held by another process); a read applies them if the lock is free at once, the
background delivery waits for it.

The projection (baton.skills.core.projection) sits above this layer, so it is passed in
by the caller at each call that may apply events (`apply`), rather than wired into the
stores: a Stores stays usable as it is built, and runtime imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from baton.errors import StoreUnavailable
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.budget import Budget
    from baton.outbox import Outbox
    from baton.registry.model import Event
    from baton.skills.runtime.settings import Settings

GRAPH = Store.CONFLICT_GRAPH


class Stores(Protocol):
    """What a sink uses of the stores it belongs to (baton.skills.runtime.stores.Stores,
    which imports this module: naming it here would make the two a cycle)."""

    settings: Settings

    @property
    def project(self) -> str: ...

    def for_project(self, project: str) -> Any: ...

    # Read-only: the stores open these on first use (properties there).
    @property
    def budget(self) -> Budget: ...
    @property
    def pending(self) -> Outbox: ...
    @property
    def event_log(self) -> Any: ...
    @property
    def registry(self) -> Any: ...
    @property
    def signals(self) -> Any: ...

    def graph_unreachable(self) -> bool: ...


StoresT = TypeVar("StoresT", bound=Stores)

# The projection: applies events to the stores, returns its warnings; raises
# StoreUnavailable when the registry cannot take them. Generic in the stores, as the
# projection takes the whole of them where a sink knows only the part above.
Apply = Callable[[StoresT, Sequence["Event"]], list[str]]


class KeptEvent(Protocol):
    """A registry event as its JSON, keyed as the outboxes want it."""

    @property
    def event_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def body(self) -> str: ...


class Sink(Generic[StoresT]):
    def __init__(self, stores: StoresT) -> None:
        self.stores = stores
        # An embedded registry that refuses reads refuses this write too; a server's
        # registry takes the write later, when it is delivered.
        self.writes_need_registry = not stores.settings.database_url

    def keep(self, events: Sequence[KeptEvent]) -> bool:
        """Keep the events for a later delivery; False, keeping nothing, where writes are
        applied at once (the caller then applies them on its own path)."""
        raise NotImplementedError

    def commit(self, events: Sequence[KeptEvent], apply: Apply[StoresT]) -> list[str]:
        """Apply the events now, or keep them for a delivery; returns the warnings. Raises
        StoreUnavailable when they can be neither kept nor applied."""
        return [] if self.keep(events) else apply(self.stores, _parsed([e.body for e in events]))

    def deliver(self, apply: Apply[StoresT], *, background: bool = False) -> list[str]:
        """Deliver what waits, within the command's budget; a warning for each store that
        could not take it (it still waits). The embedded registry's queued writes wait for
        its lock a moment, silently (a read sees them anyway), or, in the background
        delivery, as long as the command's timeout, with a warning if that was not enough."""
        warnings = _apply_pending(self.stores, apply)
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


class EmbeddedSink(Sink[StoresT]):
    def keep(self, events: Sequence[KeptEvent]) -> bool:
        return False


class PendingSink(Sink[StoresT]):
    def keep(self, events: Sequence[KeptEvent]) -> bool:
        self.stores.pending.keep(_in_project(self.stores.project, events))
        return True


class KafkaSink(Sink[StoresT]):
    def keep(self, events: Sequence[KeptEvent]) -> bool:
        self.stores.event_log.keep(_in_project(self.stores.project, events))
        return True

    def deliver(self, apply: Apply[StoresT], *, background: bool = False) -> list[str]:
        warnings = []
        for outbox in ("event_log", "signals"):
            try:
                store = getattr(self.stores, outbox)
                if store.waiting():  # opens no file that is not there
                    store.deliver()
            except StoreUnavailable as exc:
                warnings.append(str(exc))
        return warnings + super().deliver(apply, background=background)

    def waiting(self) -> int:
        return self.stores.event_log.waiting() + self.stores.signals.waiting() + super().waiting()


def _in_project(project: str, events: Sequence[KeptEvent]) -> list[tuple[str, str, str]]:
    """(message id, key, body) of each event, its id and key qualified by its project."""
    from baton.projects import qualified

    return [(qualified(project, e.event_id), qualified(project, e.task_id), e.body) for e in events]


def by_project(stores: StoresT, keys: Sequence[str]) -> dict[str, list[int]]:
    """The positions of kept events by the project their keys name (a key kept before
    projects: the stores' own), in their order."""
    from baton.projects import split_qualified

    groups: dict[str, list[int]] = {}
    for position, key in enumerate(keys):
        project = split_qualified(key)[0] or stores.project
        groups.setdefault(project, []).append(position)
    return groups


def _parsed(bodies: Sequence[str]) -> list[Event]:
    from baton.registry.wire import event_adapter

    adapter = event_adapter()
    return [adapter.validate_json(body) for body in bodies]


def _apply_pending(stores: StoresT, apply: Apply[StoresT]) -> list[str]:
    """Apply the pending writes to the stores. While the graph's server cannot be reached
    they stay until it took them too (it has no other way to learn their touches; recall
    heals by itself, as a resume queues the decisions the index lacks), and those the
    registry already took are left alone meanwhile, so reads do not apply them again and
    again. A graph that answered with an error only warns, as it may refuse them forever."""
    pending = stores.pending
    if not pending.waiting():
        return []
    budget = stores.budget
    try:
        if stores.settings.database_url:  # known down: no waiting for another delivery either
            from baton.budget import postgres_server

            budget.gate(postgres_server(stores.settings.database_url)).refuse_known(Store.SESSION_REGISTRY)
        graph_down = _graph_known_down(stores)
        with budget.waiting(), pending.delivering(max(budget.remaining(), 0.0)) as ours:
            waiting = pending.entries() if ours else []
            due = [e for e in waiting if not (e.taken and graph_down)]
            warnings = [f"{graph_down}; {len(waiting)} writes wait for it in {pending.path}"] if graph_down else []
            if not due:
                return warnings
            found = []
            for project, positions in by_project(stores, [e.key for e in due]).items():
                found += apply(stores.for_project(project), _parsed([due[p].body for p in positions]))
            if stores.graph_unreachable():
                pending.mark_taken([e.message_id for e in due])
            else:
                pending.drop([e.message_id for e in due])
            return warnings + found
    except StoreUnavailable as exc:
        return [f"{exc}; {pending.waiting()} earlier writes still wait in {pending.path}"]


def _graph_known_down(stores: Stores) -> str | None:
    """The graph's failure when its server is known to be down (this command, or the
    health record), else None."""
    if not stores.settings.graph_url:
        return None
    from baton.budget import bolt_server

    try:
        stores.budget.gate(bolt_server(stores.settings.graph_url)).refuse_known(GRAPH)
    except StoreUnavailable as exc:
        return str(exc)
    return None
