"""Reads that see this data home's own writes before the projector applied them (Kafka).

A write's events wait in the outbox, then on the topic, until `baton projector` applies
them; the outbox remembers those Kafka took until the registry holds them (baton.outbox).
This wrapper folds those the registry does not hold yet into the reads a command shows a
ticket or a list by, through the one fold of the embedded store's write queue
(apply.fold_onto). One the projector applied meanwhile changes nothing (projections are
replay-safe); one the registry holds is not folded at all, so a redaction is never undone,
and is forgotten. No server is asked anything unless such events wait: then which of them
the registry holds, one statement. Other reads and the writes go to the registry as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from baton.outcome import Found, NotFound, Unavailable
from baton.projects import split_qualified
from baton.registry.base import ListedSession, SessionStore, in_list_order, listed_of, outline_of

if TYPE_CHECKING:
    from baton.registry.kafka import KafkaEventLog
    from baton.registry.model import Event, Session


class OwnWrites:
    def __init__(self, registry: SessionStore, kept: KafkaEventLog, project: str) -> None:
        self._registry = registry
        self._kept = kept
        self._project = project

    def __getattr__(self, name: str) -> Any:
        return getattr(self._registry, name)

    def _unapplied(self, task_ids: Collection[str] | None) -> list[Event]:
        """This project's kept events of task_ids (None: all) the registry does not hold, in time order."""
        from baton.registry.wire import event_in

        mine = {}
        for message_id, key, body in self._kept.unconfirmed():
            project, task_id = split_qualified(key)
            if project in (self._project, None) and (task_ids is None or task_id in task_ids):
                mine[split_qualified(message_id)[1]] = (message_id, body)
        held = self._registry.held_events(sorted(mine)) if mine else Found(set())
        if not isinstance(held, Found):
            return []
        self._kept.forget_delivered([mine[event_id][0] for event_id in held.value])
        events = []
        for event_id, (_, body) in mine.items():
            if event_id not in held.value:
                try:
                    events.append(event_in(body))
                except ValueError:  # unreadable: the projector reports it
                    continue
        return sorted(events, key=lambda e: (e.at, str(e.event_id)))

    def _folded(self, task_ids: Collection[str] | None) -> dict[str, Session]:
        """The sessions the unapplied events of task_ids (None: all) change, with them folded in."""
        from baton.registry.apply import fold_onto

        events = self._unapplied(task_ids)
        stored = self._registry.get_many(sorted({e.task_id for e in events})) if events else Found({})
        return fold_onto(stored.value.get, events) if isinstance(stored, Found) else {}

    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        folded = self._folded({task_id})
        return Found(folded[task_id]) if task_id in folded else self._registry.get(task_id)

    def get_many(self, task_ids: Sequence[str]) -> Found[dict[str, Session]] | Unavailable:
        found = self._registry.get_many(task_ids)
        return Found(found.value | self._folded(set(task_ids))) if isinstance(found, Found) else found

    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        found = self._registry.events(task_id)
        if not isinstance(found, Found):
            return found
        return Found(sorted(found.value + self._unapplied({task_id}), key=lambda e: (e.at, str(e.event_id))))

    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        found = self._registry.list_sessions(include_inactive=include_inactive)
        folded = self._folded(None) if isinstance(found, Found) else {}
        if not folded or not isinstance(found, Found):
            return found
        return Found(in_list_order(({s.task_id: s for s in found.value} | folded).values(), include_inactive))

    def listed_sessions(self, *, include_inactive: bool = False, task_ids: Collection[str] | None = None
                        ) -> Found[list[ListedSession]] | Unavailable:
        found = self._registry.listed_sessions(include_inactive=include_inactive, task_ids=task_ids)
        folded = self._folded(task_ids) if isinstance(found, Found) else {}
        if not folded or not isinstance(found, Found):
            return found
        rows = [r for r in found.value if r.outline.task_id not in folded]
        rows += [listed_of(s) for s in in_list_order(folded.values(), include_inactive)]
        rows.sort(key=lambda r: r.outline.task_id)
        return Found(sorted(rows, key=lambda r: r.outline.last_activity, reverse=True))

    def lease_holders(self) -> Found[set[str]] | Unavailable:
        found = self._registry.lease_holders()
        if not isinstance(found, Found):
            return found
        return Found(found.value | {t for t, s in self._folded(None).items() if s.leases})

    def session_order(self, *, include_inactive: bool = False, offset: int = 0,
                      limit: int | None = None) -> Found[list[tuple[str, str]]] | Unavailable:
        """This data home's unapplied tickets first (its latest activity), then the registry's order."""
        folded = self._folded(None)
        if not folded:
            return self._registry.session_order(include_inactive=include_inactive, offset=offset, limit=limit)
        found = self._registry.session_order(include_inactive=include_inactive)
        if not isinstance(found, Found):
            return found
        order = [(s.task_id, outline_of(s).status) for s in in_list_order(folded.values(), include_inactive)]
        order += [row for row in found.value if row[0] not in folded]
        return Found(order[offset:None if limit is None else offset + limit])

    def session_count(self, *, include_inactive: bool = False) -> Found[int] | Unavailable:
        if not self._kept.unconfirmed():
            return self._registry.session_count(include_inactive=include_inactive)
        order = self.session_order(include_inactive=include_inactive)
        return Found(len(order.value)) if isinstance(order, Found) else order
