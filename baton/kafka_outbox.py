"""A local outbox in front of a Kafka topic: keep first, produce, forget once acknowledged.

Messages are kept in the data home (baton.outbox), then produced by librdkafka's
idempotent producer (acks=all) and deleted when Kafka acknowledged them: the broker drops
the producer's own retries, so a retry after a lost acknowledgement within one process
writes nothing twice. One process delivers an outbox at a time (baton.outbox): a
delivery that finds another one running waits for it, within what its budget has left,
and then sends only what is still waiting, so each message reaches Kafka once per
delivery, not once per process. While Kafka is down messages wait and a later delivery
sends them.

Each message reaches the topic once, across kills and broker restarts too: it carries its
id in a header (ID_HEADER) and the outbox notes when it was last produced. A message still
in this process's producer is not produced again (a late acknowledgement forgets it); a
producer gives a message up after MESSAGE_TIMEOUT_MS, and one closed gives up what it
holds, forgetting that it produced what it never sent. A message produced before without
an answer (its process killed between the acknowledgement and forgetting it, or gone with
the request on its way, or the acknowledgement lost with a broker that restarted) waits
SETTLE_MS after it was produced, when no producer holds it any more and a request the
broker got has been written, and is then looked up on the topic and produced again only
if it is not there. Only a broker stalled longer than that with the request unread could
still write a second copy: readers keep one copy per id (signals) or ignore an event they
already have (the projection), and the registry's projection does not depend on order.

The idempotent producer's id handshake delays a process's first produce; hooks never pay
it, since a touch only keeps its event and a background delivery (baton.skills.runtime.delivery) sends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from baton.budget import AnyGate, OpenGate
from baton.errors import ServerUnreachable, StoreUnavailable
from baton.outbox import Entry, Outbox

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
    from confluent_kafka.admin import AdminClient, ClusterMetadata

PARTITIONS = 3
ID_HEADER = "baton-id"  # each message's outbox id
CLOCK_SKEW_MS = 5000  # a message's timestamp may precede the time noted when it was produced
MESSAGE_TIMEOUT_MS = 10_000  # how long a producer tries a message (a delivery waits what its budget has left)
SETTLE_MS = MESSAGE_TIMEOUT_MS + 5_000  # after a produce without an answer, when the topic is asked for it


class Unsettled(StoreUnavailable):
    """Messages produced before without an answer wait to be looked up on the topic (the
    server answers: a read goes on without them)."""

# What a partition of a topic made a moment ago answers until it has a leader.
_LEADERLESS = {"NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"}
# librdkafka's error names for a broker that cannot be reached or heard from.
_UNREACHABLE = {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_MSG_TIMED_OUT", "_TIMED_OUT_QUEUE", "_RESOLVE",
                "_DESTROY", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION", "BROKER_NOT_AVAILABLE"}

# The security protocol, SASL and TLS settings of every Kafka client this process makes:
# set once from the configuration (baton.skills.runtime.stores), so no store passes them on.
_security: dict[str, str] = {}


def use_security(config: dict[str, str]) -> None:
    _security.clear()
    _security.update(config)


# The broker's refusal of this process's credentials, or a TLS handshake that failed (an
# untrusted certificate), as librdkafka last reported it, with when: a client only sees
# "transport failure" or a timeout, while the reason comes to its error callback. It names
# every failure reported while it is fresh (librdkafka reports it again at each reconnect),
# so clients asking at once (doctor's stores, side by side) each tell it.
_refusal: list[tuple[float, str]] = []
REFUSAL_FRESH = 30.0
REFUSAL_POLL = 0.25  # how often a metadata request that waits looks for a refusal


def _heard(error: KafkaError) -> None:
    from confluent_kafka import KafkaError

    said = " ".join(error.str().split())
    if error.code() == KafkaError._AUTHENTICATION:
        _refusal[:] = [(time.monotonic(), f"refused the credentials: {said}")]
    elif error.code() == KafkaError._SSL or "SSL handshake failed" in said:
        _refusal[:] = [(time.monotonic(), f"failed the TLS handshake: {said}")]


def client_config(bootstrap: str, timeout: float) -> dict:
    # log_level 0: librdkafka's own connection errors reach the caller as Unavailable.
    return {"bootstrap.servers": bootstrap, "socket.timeout.ms": max(int(timeout * 1000), 10), "log_level": 0,
            "error_cb": _heard, **_security}


def refused(store: str, bootstrap: str) -> StoreUnavailable | None:
    """The broker's refusal of the credentials or its certificate's, if one was heard within
    the last REFUSAL_FRESH seconds: a server that answers, not one that is down (the health
    record keeps out)."""
    if not _refusal or time.monotonic() - _refusal[0][0] > REFUSAL_FRESH:
        return None
    return StoreUnavailable(store, f"Kafka at {bootstrap} {_refusal[0][1]}")


def topic_metadata(admin: AdminClient, timeout: float, store: str, bootstrap: str) -> ClusterMetadata:
    """admin.list_topics within timeout, or the broker's refusal as soon as it is heard:
    librdkafka keeps a metadata request waiting its whole timeout while the broker refuses
    the credentials, which is the command's whole budget."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return admin.list_topics(timeout=max(min(REFUSAL_POLL, deadline - time.monotonic()), 0.01))
        except KafkaException as exc:
            admin.poll(0)  # serves the error callback
            if refused(store, bootstrap) is not None or time.monotonic() >= deadline:
                raise kafka_failure(store, bootstrap, exc, client=admin) from exc


def kafka_failure(store: str, bootstrap: str, exc: KafkaException | KafkaError, *,
                  client: AdminClient | None = None) -> StoreUnavailable:
    """The StoreUnavailable for a KafkaException or KafkaError: ServerUnreachable when the
    broker could not be reached or heard from; the broker's refusal of the credentials when
    it said so. client: an admin client, whose error callbacks are served only when it is polled."""
    from confluent_kafka import KafkaError

    if client is not None:
        client.poll(0)

    error = exc if isinstance(exc, KafkaError) else exc.args[0] if exc.args else None
    name, said = (error.name(), error.str()) if isinstance(error, KafkaError) else ("", str(exc))
    reason = f"Kafka at {bootstrap}: {' '.join(said.split())}"
    return refused(store, bootstrap) or (ServerUnreachable(store, reason) if name in _UNREACHABLE
                                         else StoreUnavailable(store, reason))


class KafkaOutbox(Outbox):
    def __init__(self, bootstrap: str, topic: str, path: Path, *, timeout: float, store: str,
                 gate: AnyGate | None = None, topic_config: dict[str, str] | None = None,
                 partitions: int = PARTITIONS, remember: bool = False) -> None:
        """gate: the Kafka server's gate in the command's budget (baton.budget); without
        one, each call may wait `timeout` seconds. topic_config and partitions: the topic's
        settings (its retention.ms, say) and partition count when Baton creates it; a topic
        made before keeps its own. remember: see baton.outbox.Outbox."""
        super().__init__(path, earlier="kafka", timeout=timeout, store=store, remember=remember)
        self.bootstrap = bootstrap
        self.topic = topic
        self.topic_config = topic_config or {}
        self.partitions = partitions
        self.timeout = timeout
        self.gate = gate or OpenGate(timeout)
        self._producer: Producer | None = None
        self._topic_ready = False
        # The producer's answers, as its callbacks give them (baton.kafka_outbox's docstring).
        self._in_flight: set[str] = set()
        self._acknowledged: list[str] = []
        self._unsent: list[str] = []
        self._failures: list[KafkaError] = []

    def unreachable(self, reason: str) -> StoreUnavailable:
        return (refused(self.store, self.bootstrap)
                or ServerUnreachable(self.store, f"Kafka at {self.bootstrap}: {reason}"))

    def ensure_topic(self) -> None:
        """Create the topic unless this data home already saw it (saves an admin round trip
        in every new process). Call it within a call of the gate."""
        if not self._topic_ready and not self.topic_known(self.topic):
            self.topic_partitions()
        self._topic_ready = True

    def topic_partitions(self) -> int:
        """The topic's partition count as the broker holds it, the topic created first when
        it is missing: one metadata read. Call it within a call of the gate."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        left = self.gate.left()
        admin = AdminClient(client_config(self.bootstrap, left))
        try:
            held = topic_metadata(admin, left, self.store, self.bootstrap).topics.get(self.topic)
            if held is None:
                futures = admin.create_topics([NewTopic(self.topic, self.partitions, 1, config=self.topic_config)],
                                             operation_timeout=self.gate.left())
                try:
                    futures[self.topic].result(timeout=self.gate.left())
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
        except KafkaException as exc:
            raise kafka_failure(self.store, self.bootstrap, exc, client=admin) from exc
        self.note_topic(self.topic)
        self._topic_ready = True
        # Made just now (in a race, by another process with its own setting): the count asked for.
        return self.partitions if held is None else len(held.partitions)

    def prepare(self) -> None:
        """Create the topic and the producer before the first delivery needs them; the
        producer connects in the background. Raises StoreUnavailable."""
        with self.gate.call(self.store) as left:
            self.ensure_topic()
            self._get_producer(left)

    def deliver(self) -> None:
        """Produce everything waiting and drop what Kafka acknowledged; raise
        StoreUnavailable if some still waits. Returns without sending when another process
        is delivering this outbox and does not finish within the budget: it sends them."""
        if not self.waiting():
            return
        try:
            self.gate.refuse_known(self.store)  # before waiting for another delivery
            # Another process's delivery is waited for within what the budget has left, charged to it.
            with self.gate.waiting(), self.delivering(within=self.gate.left()) as ours:
                pending = self.entries() if ours else []
                if pending:
                    with self.gate.call(self.store) as left:
                        self.ensure_topic()
                        self._send(pending, left)
        except StoreUnavailable as exc:
            raise type(exc)(self.store, f"{exc.reason}; {self.waiting()} messages kept in {self.path}") from exc

    def _send(self, pending: list[Entry], left: float) -> None:
        producer = self._get_producer(left)
        producer.poll(0)  # the answers that came after an earlier delivery gave up
        gone = set(self._acknowledged)
        self._forget_acknowledged()
        self._failures.clear()  # theirs: this delivery answers for what it sends
        # A message still in the producer's hands is not produced again: its answer is awaited.
        waiting = [e for e in pending if e.message_id not in gone]
        fresh = [e for e in waiting if e.message_id not in self._in_flight]
        now = int(time.time() * 1000)
        unsettled = [e for e in fresh if e.sent_at is not None and now - e.sent_at < SETTLE_MS]
        fresh = [e for e in fresh if e not in unsettled]
        answered = self._already_on_topic([e for e in fresh if e.sent_at is not None])
        if answered:
            self.drop(sorted(answered))
            fresh = [e for e in fresh if e.message_id not in answered]
        self.mark_sent([e.message_id for e in fresh], now)
        for entry in fresh:
            self._in_flight.add(entry.message_id)
            producer.produce(self.topic, key=entry.key.encode(), value=entry.body.encode(),
                             headers=[(ID_HEADER, entry.message_id.encode())],
                             on_delivery=self._answer(entry.message_id))
        producer.flush(self.gate.left())
        self._forget_acknowledged()
        if self._failures:
            raise kafka_failure(self.store, self.bootstrap, self._failures[0])
        if any(e.message_id in self._in_flight for e in waiting):
            raise self.unreachable(self.gate.no_answer("no acknowledgement"))
        if unsettled:
            due = (max(e.sent_at or 0 for e in unsettled) + SETTLE_MS - now) / 1000
            raise Unsettled(self.store, f"{len(unsettled)} messages produced before without an answer "
                                        f"are looked up on the topic in {due:.0f} s")

    def _answer(self, message_id: str) -> Callable[[KafkaError | None, Message], None]:
        def answered(error: KafkaError | None, _message: Message) -> None:
            from confluent_kafka import KafkaError

            self._in_flight.discard(message_id)
            if error is None:
                self._acknowledged.append(message_id)
            elif error.code() == KafkaError._PURGE_QUEUE:
                self._unsent.append(message_id)  # given up before it was sent: it is not on the topic
            else:
                self._failures.append(error)
        return answered

    def _forget_acknowledged(self) -> None:
        """Drop what Kafka acknowledged; note as never produced what was given up unsent."""
        if self._acknowledged:
            self.drop(self._acknowledged)
            self._acknowledged = []
        if self._unsent:
            self.mark_unsent(self._unsent)
            self._unsent = []

    def _already_on_topic(self, entries: list[Entry]) -> set[str]:
        """The ids of entries (each produced before, with no answer) that the topic holds:
        read from the earliest of their produce times to each partition's end."""
        if not entries:
            return set()
        from confluent_kafka import KafkaException

        wanted = {e.message_id for e in entries}
        # Each earlier copy was looked up before the last produce (SETTLE_MS after its own).
        since = min(e.sent_at or 0 for e in entries) - CLOCK_SKEW_MS
        consumer = reader(self.bootstrap, self.gate.left(), "baton-outbox")
        found: set[str] = set()
        try:
            for message in messages_since(consumer, self.topic, since, self.gate.left,
                                          lambda seconds: self.unreachable(f"topic not read within {seconds:.1f}s")):
                found.update(_ids_in(message) & wanted)
                if not wanted - found:
                    break
        except KafkaException as exc:
            raise kafka_failure(self.store, self.bootstrap, exc) from exc
        finally:
            consumer.close()
        return found

    def _get_producer(self, left: float) -> Producer:
        if self._producer is None:
            from confluent_kafka import Producer

            # Its messages outlive a delivery that gave up (a later one of this process awaits
            # them) and never SETTLE_MS, after which another process may look for them.
            self._producer = Producer({**client_config(self.bootstrap, left), "enable.idempotence": True,
                                       "acks": "all", "message.timeout.ms": MESSAGE_TIMEOUT_MS, "linger.ms": 0})
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            # Whatever Kafka did not acknowledge is still in the outbox: drop it here
            # instead of letting the producer hold the process open retrying it.
            self._producer.purge()
            self._producer.flush(0)
            self._forget_acknowledged()  # the unsent among the purged: the next delivery needs no wait
            self._producer = None
        super().close()


def reader(bootstrap: str, left: float, name: str) -> Consumer:
    """A consumer that reads partitions assigned to it and never joins its (unique) group,
    so it commits nothing and rebalances nothing."""
    import uuid

    from confluent_kafka import Consumer

    # A read ends at each partition's end, which the broker tells once its fetch wait has
    # passed: 1 ms instead of 10 took a warm read of a few signals from 26.7 ms to 7.6.
    # A read is a pass over the topic from its window's start: librdkafka's default prefetch
    # (64 MiB) took as much of it as it could, so a reader's memory grew with the topic (a
    # pass over 40,000 signals of 380 bytes: peak RSS 35 to 43 MiB against 31 at 5,000).
    # Bounded to 1 MiB, refilled at once (the default waits a second once it is full), it
    # held 32 MiB in the same 0.2 s.
    return Consumer({**client_config(bootstrap, left), "group.id": f"{name}-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 1,
                     "queued.min.messages": 1000, "queued.max.messages.kbytes": 1024, "fetch.queue.backoff.ms": 1})


def messages_since(consumer: Consumer, topic: str, since_ms: int, left: Callable[[], float],
                   late: Callable[[float], StoreUnavailable]) -> Iterator[Message]:
    """The messages of topic (a reader's) from the time since_ms to each partition's end,
    within what left() says; late(seconds allowed) is raised past that, KafkaException for
    the client's errors."""
    from confluent_kafka import OFFSET_END, KafkaError, KafkaException, TopicPartition

    from baton.retry import Backoff

    partitions = consumer.list_topics(topic, timeout=left()).topics[topic].partitions
    pause, starts = Backoff(0.05, most=0.5), None
    while starts is None:
        try:
            starts = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in partitions],
                                                timeout=left())
        except KafkaException as exc:
            # A topic made a moment ago has no leader yet: asked again within the budget.
            if exc.args[0].name() not in _LEADERLESS or left() < 1 or not pause.wait():
                raise
    # OFFSET_END: nothing in that partition is that new.
    todo = [tp for tp in starts if tp.offset != OFFSET_END and tp.offset >= 0]
    consumer.assign(todo)
    remaining = {tp.partition for tp in todo}
    seconds = left()
    until = time.monotonic() + seconds
    while remaining:
        if time.monotonic() > until:
            raise late(seconds)
        message = consumer.poll(0.05)
        if message is None:
            continue
        error = message.error()
        if error and error.code() == KafkaError._PARTITION_EOF:
            remaining.discard(message.partition())
        elif error:
            raise KafkaException(error)
        else:
            yield message


def _ids_in(message: Message) -> set[str]:
    """The outbox ids a message's headers name (one, or none for a message sent before them)."""
    headers = [(header[0], header[1]) for header in message.headers() or []]
    return {value.decode() if isinstance(value, bytes) else str(value)
            for name, value in headers if name == ID_HEADER and value is not None}
