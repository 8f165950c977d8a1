"""Session projections: the per-ticket event log and the state it projects to.

Interface: SessionStore (baton.registry.base). Backends: SqliteSessionStore (baton.registry.sqlite,
the embedded default) and PostgresSessionStore (baton.registry.postgres, psycopg 3); with Kafka,
writes go through KafkaEventLog (baton.registry.kafka) and the projector. Models:
baton.registry.model; the pure projection: baton.registry.apply.
Nothing is imported here eagerly: the hook's hot path must not pay for pydantic.
"""

from baton.registry.base import SessionStore

__all__ = ["SessionStore"]
