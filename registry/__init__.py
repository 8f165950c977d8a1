"""Session projections: the per-ticket event log and the state it projects to.

Interface: SessionStore (registry.base). Backends: SqliteSessionStore (registry.sqlite,
the embedded default). Models: registry.model; the pure projection: registry.apply.
Nothing is imported here eagerly: the hook's hot path must not pay for pydantic.
"""

from registry.base import SessionStore

__all__ = ["SessionStore"]
