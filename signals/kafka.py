"""The production signal bus: topic `baton.coordination-signals.v1` on Apache Kafka.

Publishing keeps signals in a local outbox (baton.kafka_outbox) and sends nothing: a
delivery (`deliver`: the background one, baton.skills.runtime.delivery, the projector's at
the end of a batch) or the next read sends them, and while Kafka is down they wait there,
so nothing is lost; a signal delivered twice has the same deterministic id and
readers keep one copy (the last: a rewrite, SignalBus.rewrite, is sent after the original).

Reading never joins a consumer group: each partition is assigned directly, starting at
the offset of the requested time (offsets_for_times), and read up to its high watermark
within what the command's budget has left (baton.budget).

Every signal belongs to a project (baton.projects): its message's key is the project and the
ticket (qualified), and a bus reads only the messages its project's key names; a message
keyed before projects belongs to its signal's repository.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from baton.kafka_outbox import KafkaOutbox, Unsettled, client_config, kafka_failure, topic_metadata
from baton.outcome import Found, Unavailable, answering
from baton.projects import check_project, qualified, split_qualified
from baton.signals.base import SignalBus
from baton.store_names import Store

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from baton.budget import AnyGate
    from baton.signals.model import Signal
    from baton.signals.wire import WireSignal

STORE = Store.SIGNAL_LOG
SIGNALS_TOPIC = "coordination-signals.v1"
_T = TypeVar("_T")


class KafkaSignalBus(KafkaOutbox, SignalBus):
    """The signals kept in a Kafka outbox (keep, deliver, prepare, waiting and kept as
    KafkaOutbox does) and read back from the topic."""

    def __init__(self, bootstrap: str, outbox: Path, *, timeout: float, project: str,
                 topic: str = f"baton.{SIGNALS_TOPIC}", gate: AnyGate | None = None,
                 retention: timedelta | None = None) -> None:
        """gate: as KafkaOutbox's. retention: how long the topic keeps a signal, set when
        Baton creates it (`[retention] signals`)."""
        config = {"retention.ms": str(int(retention.total_seconds() * 1000))} if retention else None
        super().__init__(bootstrap, topic, outbox, timeout=timeout, store=STORE, gate=gate, topic_config=config)
        self.project = check_project(project)
        self._consumer: Consumer | None = None

    def publish(self, signals: Sequence[Signal | WireSignal]) -> list[bool]:
        return self.keep([(qualified(self.project, str(s.signal_id)), qualified(self.project, s.task_id), s.to_json())
                          for s in signals])

    def known(self, signal_ids: Sequence[str]) -> set[str]:
        known = super().known([qualified(self.project, signal_id) for signal_id in signal_ids])
        return {split_qualified(signal_id)[1] for signal_id in known}

    def _scan(self, after: datetime | None) -> Iterator[Signal]:
        """Every signal of the project on the topic emitted after `after`, a message at a time."""
        from confluent_kafka import KafkaException

        from baton.kafka_outbox import messages_since, reader
        from baton.signals.model import Signal

        self.ensure_topic()
        if self._consumer is None:  # one reader for the bus's lifetime, assigned partitions per read
            self._consumer = reader(self.bootstrap, self.gate.left(), "baton-reader")
        try:
            for message in messages_since(self._consumer, self.topic, int(after.timestamp() * 1000) if after else 0,
                                          self.gate.left, lambda _: self.unreachable(
                                              self.gate.no_answer("topic not read"))):
                body = message.value()
                if body is None:  # a record without a body carries no signal
                    continue
                owner = split_qualified((message.key() or b"").decode("utf-8", "replace"))[0]
                signal = Signal.model_validate_json(body)
                if (owner or signal.repo) == self.project and (after is None or signal.emitted_at > after):
                    yield signal
        except KafkaException as exc:
            raise kafka_failure(STORE, self.bootstrap, exc) from exc
        finally:
            self._consumer.unassign()

    @answering
    def _read(self, after: datetime | None, collect: Callable[[Iterator[Signal]], _T]) -> Found[_T] | Unavailable:
        """What collect() makes of one pass over the topic from `after`."""
        with contextlib.suppress(Unsettled):  # they are looked up later: read what is there
            self.deliver()
        with self.gate.call(STORE):
            return Found(collect(self._scan(after)))

    def _newest(self, after: datetime | None, keep: Callable[[Signal], bool],
                limit: int) -> Found[list[Signal]] | Unavailable:
        def collect(signals: Iterator[Signal]) -> list[Signal]:
            # The last copy of each: a rewrite follows the original.
            found = {str(signal.signal_id): signal for signal in signals if keep(signal)}
            return sorted(found.values(), key=lambda s: (s.emitted_at, str(s.signal_id)))[-limit:]

        return self._read(after, collect)

    def concerning(self, subjects: Sequence[str], *, after: datetime | None,
                   limit: int) -> Found[list[Signal]] | Unavailable:
        wanted = set(subjects)
        if not wanted:
            return Found([])
        return self._newest(after, lambda signal: not wanted.isdisjoint(signal.subjects()), limit)

    def conflict_pairs(self, *, after: datetime | None) -> Found[set[frozenset[str | None]]] | Unavailable:
        from baton.signals.wire import SignalType

        return self._read(after, lambda signals: {frozenset((s.task_id, s.payload.related_task_id)) for s in signals
                                                  if s.signal_type is SignalType.conflict_detected})

    def recent(self, *, task_id: str | None, after: datetime | None, limit: int) -> Found[list[Signal]] | Unavailable:
        subject = f"task:{task_id}" if task_id else None
        return self._newest(after, lambda signal: subject is None or subject in signal.subjects(), limit)

    def rewrite(self, signals: Sequence[Signal]) -> int:
        """Send each signal again after its original (same key, so the same partition, later);
        its outbox id names the rewrite, which the outbox has not seen. The original stays in
        the topic until its retention.ms removes it."""
        import hashlib

        def rewrite_id(signal: Signal) -> str:
            return f"{signal.signal_id}.{hashlib.sha256(signal.to_json().encode()).hexdigest()[:16]}"

        self.keep([(qualified(self.project, rewrite_id(s)), qualified(self.project, s.task_id), s.to_json())
                   for s in signals])
        self.deliver()
        return len(signals)

    def prune(self, before: datetime) -> int:
        return 0  # the topic's retention.ms removes old signals (SignalBus.prune)

    def describe(self) -> dict[str, str]:
        with self.gate.call(STORE) as left:
            from confluent_kafka.admin import AdminClient

            metadata = topic_metadata(AdminClient(client_config(self.bootstrap, left)), left, STORE, self.bootstrap)
        return {"backend": "kafka", "location": f"{self.bootstrap} topic {self.topic}",
                "version": f"cluster {metadata.cluster_id}, {len(metadata.brokers)} broker(s)",
                "size": f"{self.waiting()} signals waiting in the outbox"}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        super().close()
