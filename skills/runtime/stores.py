"""Which backend serves each concern, and where writes go (the sink): the one place a
server backend plugs in.

Stores are opened lazily: building a Stores object does no I/O (`baton touch` never imports
the recall libraries). One Stores object serves one command and holds its deadline
(baton.deadline) and its budget for servers (baton.budget), which every wait draws on.
Closing the stores starts the background delivery of the writes the command kept
(baton.skills.runtime.delivery). Every store is opened for one project (baton.projects):
the configured one, else the repository of the worktree the front end names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, cast

from baton.errors import StoreUnavailable
from baton.graph.base import ConflictGraph
from baton.registry.base import SessionStore
from baton.signals.base import SignalBus
from baton.skills.runtime.settings import Settings
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.budget import Budget
    from baton.deadline import Deadline
    from baton.outbox import Outbox
    from baton.recall.base import DecisionIndex
    from baton.recall.indexer import Indexer
    from baton.recall.queue import EmbeddingQueue
    from baton.recall.search import DecisionSearchClient
    from baton.recall.ticket_queries import TicketQueries
    from baton.redaction import Redactor
    from baton.registry.kafka import KafkaEventLog
    from baton.registry.model import Event
    from baton.skills.runtime.sink import Sink

# The outboxes in the data home (baton.outbox): writes kept until a server took them.
EVENTS_OUTBOX = "kafka-events-outbox.db"
SIGNALS_OUTBOX = "kafka-outbox.db"
PENDING_WRITES = "pending-writes.db"
TEXT_LIMIT = 4000  # the events' limit on a text field (baton.registry.model.Text)

# The projection (baton.skills.core.commit.apply_events): applies events to the stores,
# returns its warnings; raises StoreUnavailable when the registry cannot take them.
Apply = Callable[["Stores", "Sequence[Event]"], list[str]]


class Stores:
    def __init__(self, settings: Settings, *, skip_known_down: bool = True, project: str | None = None,
                 projection: Apply | None = None) -> None:
        """skip_known_down: skip a server the health record saw down recently (what every
        command does); the background delivery, the projector and the doctor ask anyway.
        project: the repository identity of the worktree the command serves (default: the
        current directory's); the configured project wins over it. projection: how the sink
        applies events (baton.skills.runtime.sink), given by a layer that may import it;
        stores built without one only read and keep."""
        self.settings = settings
        self.projection = projection
        self._project = settings.project or project
        self._siblings: dict[str, Stores] = {}
        self.skip_known_down = skip_known_down
        self.deliver_on_close = True
        # Reads fold this data home's events the registry does not hold yet (with Kafka); the
        # projector reads the registry as it is, since what it repairs and applies is the truth.
        self.own_writes = True
        self._registry: SessionStore | None = None
        self._recall: DecisionSearchClient | None = None
        self._indexer: Indexer | None = None

    @cached_property
    def project(self) -> str:
        """The project every store of this object reads and writes (checked once: the
        projector asks for each event it applies)."""
        project = self._project
        if project is None:
            import os
            from pathlib import Path

            from baton.files import WorktreeLocator

            worktree = WorktreeLocator().locate(Path.cwd())
            project = worktree.repo if worktree else os.path.realpath(Path.cwd())
        from baton.projects import check_project

        return check_project(project)

    def for_project(self, project: str) -> Stores:
        """The stores of another project, sharing this command's settings and budget (what
        applies kept events carrying their project, and the lead's view of every project);
        closed with these."""
        if project == self.project:
            return self
        if project not in self._siblings:
            sibling = Stores(self.settings._replace(project=None), skip_known_down=self.skip_known_down,
                             project=project, projection=self.projection)
            sibling.__dict__["budget"] = self.budget  # one budget and one deadline per command
            sibling.__dict__["deadline"] = self.deadline
            sibling.deliver_on_close = False
            sibling.own_writes = self.own_writes
            self._siblings[project] = sibling
        return self._siblings[project]

    @cached_property
    def deadline(self) -> Deadline:
        """This command's deadline, which every wait draws on: servers (through the budget),
        git, handoff probes, checkpoints, toolchains' versions. Created on first use (the
        hook's touch never waits); its clock runs only while something waits."""
        from baton.deadline import Deadline

        return Deadline(self.settings.command_deadline)

    @cached_property
    def budget(self) -> Budget:
        """This command's budget for waiting on servers, within its deadline (created on
        first use: the hook's touch never needs it)."""
        from baton.budget import Budget
        from baton.health import HealthRecord

        return Budget(self.settings.store_timeout, skip_known_down=self.skip_known_down, deadline=self.deadline,
                      health=HealthRecord(self.settings.home, recheck_after=self.settings.recheck_after))

    @cached_property
    def redactor(self) -> Redactor:
        """The redactor (baton.redaction) with this configuration's allowlist."""
        from baton.redaction import redactor

        return redactor(self.settings.home, self.settings.redaction_allow)

    @cached_property
    def redact(self) -> Callable[[str], str]:
        """Free text with its secrets replaced by markers, as every write stores it. A marker
        may be longer than its secret: the text is cut where it would outgrow the events' own
        limit on a text (a write that fit before redaction fits after it)."""
        redacting = self.redactor

        def redact(text: str) -> str:
            return redacting.redact(text).text[:max(len(text), TEXT_LIMIT)]

        return redact

    @property
    def registry(self) -> SessionStore:
        if self._registry is None:
            if self.settings.database_url:
                _require("psycopg", Store.SESSION_REGISTRY, "postgres")
                from baton.budget import postgres_server
                from baton.registry.postgres import PostgresSessionStore

                self._registry = PostgresSessionStore(self.settings.database_url, timeout=self.settings.store_timeout,
                                                      project=self.project,
                                                      gate=self.budget.gate(postgres_server(self.settings.database_url)))
            else:
                from baton.registry.sqlite import SqliteSessionStore

                self._registry = SqliteSessionStore(self.settings.home / "registry.db",
                                                    timeout=self.settings.store_timeout, project=self.project)
            if self.event_log is not None and self.own_writes:
                from baton.registry.own_writes import OwnWrites

                self._registry = cast("SessionStore", OwnWrites(self._registry, self.event_log, self.project))
        return self._registry

    @cached_property
    def graph(self) -> ConflictGraph:
        """The conflict graph as this project sees it (baton.graph.projects)."""
        from baton.graph.projects import ProjectGraph

        return ProjectGraph(self._graph_backend(), self.project)

    def _graph_backend(self) -> ConflictGraph:
        if self.settings.graph_url:
            _require("neo4j", Store.CONFLICT_GRAPH, "graph")
            from baton.budget import bolt_server
            from baton.graph.bolt import BoltConflictGraph

            return BoltConflictGraph(self.settings.graph_url, timeout=self.settings.store_timeout,
                                     auth=self.settings.graph_auth,
                                     gate=self.budget.gate(bolt_server(self.settings.graph_url)))
        from baton.graph.sqlite import SqliteConflictGraph

        return SqliteConflictGraph(self.settings.home / "graph.db", timeout=self.settings.store_timeout)

    def _kafka(self, store: str) -> None:
        """Kafka's client library, with this configuration's security settings for every
        client the process makes (baton.kafka_outbox.client_config)."""
        _require("confluent_kafka", store, "kafka")
        from baton.kafka_outbox import use_security

        use_security(self.settings.kafka_security())

    @cached_property
    def signals(self) -> SignalBus:
        if self.settings.kafka_bootstrap:
            self._kafka(Store.SIGNAL_LOG)
            from baton.budget import kafka_server
            from baton.signals.kafka import SIGNALS_TOPIC, KafkaSignalBus

            return KafkaSignalBus(
                self.settings.kafka_bootstrap, self.settings.home / SIGNALS_OUTBOX,
                timeout=self.settings.store_timeout, project=self.project,
                topic=f"{self.settings.kafka_topic_prefix}{SIGNALS_TOPIC}",
                gate=self.budget.gate(kafka_server(self.settings.kafka_bootstrap)),
                retention=self.settings.keep_signals)
        from baton.signals.sqlite import SqliteSignalBus

        return SqliteSignalBus(self.settings.home / "signals.db", timeout=self.settings.store_timeout,
                               project=self.project)

    def recall(self) -> DecisionSearchClient:
        """The DecisionSearchClient; StoreUnavailable when recall's libraries are missing,
        or at once when its Qdrant server is known to be down (before loading the model)."""
        url = self.settings.qdrant_url
        if url and not url.startswith("file:"):
            from baton.budget import qdrant_server

            self.budget.gate(qdrant_server(url)).refuse_known(Store.RECALL_INDEX)
        if self._recall is None:
            from baton.recall import missing_dependency

            missing = missing_dependency(embedded=not self.settings.qdrant_url)
            if missing:
                raise StoreUnavailable(Store.RECALL_INDEX, missing)
            # The embedded index reads an absent file as "nothing recorded": true in a new
            # data home, not in one that is not a usable directory.
            from baton.home import unusable

            problem = None if self.settings.qdrant_url else unusable(self.settings.home)
            if problem:
                raise StoreUnavailable(Store.RECALL_INDEX, problem)
            from baton.recall.search import DecisionSearchClient

            self._recall = DecisionSearchClient(self.decision_index(), self.project)
        return self._recall

    @cached_property
    def event_log(self) -> KafkaEventLog | None:
        """The registry's event log on Kafka when Kafka is configured, else None: then
        writes are applied to the stores (directly, or through the pending writes)."""
        if not self.settings.kafka_bootstrap:
            return None
        self._kafka(Store.EVENT_LOG)
        from baton.budget import kafka_server
        from baton.registry.kafka import EVENTS_TOPIC, KafkaEventLog

        return KafkaEventLog(
            self.settings.kafka_bootstrap, self.settings.home / EVENTS_OUTBOX,
            timeout=self.settings.store_timeout, topic=f"{self.settings.kafka_topic_prefix}{EVENTS_TOPIC}",
            gate=self.budget.gate(kafka_server(self.settings.kafka_bootstrap)),
            partitions=self.settings.kafka_partitions)

    @cached_property
    def pending(self) -> Outbox:
        """Writes kept in the data home until a delivery applies them to the stores."""
        from baton.outbox import Outbox

        return Outbox(self.settings.home / PENDING_WRITES, earlier="pending",
                      timeout=self.settings.store_timeout, store=Store.PENDING_WRITES)

    @cached_property
    def sink(self) -> Sink:
        """Where this command's writes go (baton.skills.runtime.sink)."""
        from baton.skills.runtime import sink

        if self.settings.kafka_bootstrap:
            return sink.KafkaSink(self)
        return sink.PendingSink(self) if self.settings.uses_servers else sink.EmbeddedSink(self)

    def on_servers(self) -> list[str]:
        """The stores `baton migrate` copies into: those this configuration puts on a server."""
        return [store for store, url in (("registry", self.settings.database_url), ("graph", self.settings.graph_url),
                                         ("recall", self.settings.qdrant_url)) if url]

    def embedded(self) -> Stores:
        """The embedded stores of the same data home (what `baton migrate` copies from)."""
        return Stores(self.settings._replace(database_url=None, graph_url=None, qdrant_url=None, kafka_bootstrap=None),
                      project=self.project, projection=self.projection)

    @cached_property
    def embedding_queue(self) -> EmbeddingQueue:
        """Decisions waiting to be embedded (baton.recall.queue); needs no recall library."""
        from baton.recall.queue import EmbeddingQueue

        return EmbeddingQueue(self.settings.home / "recall", timeout=self.settings.store_timeout)

    @cached_property
    def ticket_queries(self) -> TicketQueries:
        """What each ticket is about, as texts to embed and their vectors (baton.recall.ticket_queries);
        needs no recall library."""
        from baton.recall.ticket_queries import TicketQueries

        return TicketQueries(self.settings.home / "recall", timeout=self.settings.store_timeout)

    def indexer(self) -> Indexer:
        """The Indexer of the queue into the decision index (it keeps the model loaded), for
        every project: each queued decision names its own."""
        if self._indexer is None:
            from baton.recall.indexer import Indexer

            self._indexer = Indexer(self.embedding_queue, self.recall().index, queries=self.ticket_queries)
        return self._indexer

    def decision_index(self) -> DecisionIndex:
        """The configured DecisionIndex backend (a new object each call): one for every
        project, each of whose reads names its project."""
        url = self.settings.qdrant_url
        if url:
            from baton.budget import qdrant_server
            from baton.recall.qdrant_server import QdrantServerIndex

            # A file: URL is qdrant-client's local mode: no server, nothing to wait for.
            return QdrantServerIndex(url, timeout=self.settings.store_timeout, api_key=self.settings.qdrant_api_key,
                                     allow_insecure=self.settings.qdrant_allow_insecure,
                                     gate=None if url.startswith("file:") else self.budget.gate(qdrant_server(url)))
        from baton.recall.embedded import EmbeddedDecisionIndex

        return EmbeddedDecisionIndex(self.settings.home / "recall", timeout=self.settings.store_timeout)

    def kept_writes(self) -> bool:
        """Whether this command kept writes in the data home for a server, or queued them
        for the embedded registry's lock."""
        return any(getattr(store, "kept", 0) for store in self._opened("_registry", "signals", "pending", "event_log"))

    def _opened(self, *names: str) -> list:
        """The stores of those attributes opened so far (a cached_property is in __dict__ once read)."""
        return [store for name in names if (store := self.__dict__.get(name)) is not None]

    def close(self) -> None:
        """Close every store opened, then start the background delivery of what this command
        kept. A call abandoned at its deadline may still hold a connection (baton.budget):
        then nothing is closed, as closing could wait for it; the process ends at once."""
        from baton.budget import abandoned

        kept = self.deliver_on_close and (
            self.kept_writes() or any(sibling.kept_writes() for sibling in self._siblings.values()))
        for sibling in self._siblings.values():
            sibling.close()
        if not abandoned():
            for store in self._opened("_registry", "graph", "signals", "_recall", "pending", "event_log",
                                      "embedding_queue", "ticket_queries"):
                store.close()
        if kept:
            from baton.skills.runtime.delivery import start_background_delivery

            start_background_delivery(self.settings)


def _require(module: str, store: str, extra: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise StoreUnavailable(store, f"its server is configured but {module} is not installed "
                                      f"(pip install -e '.[{extra}]')")
