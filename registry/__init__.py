"""Session projections: the per-ticket event log and the state it projects to.

Interface: SessionStore. Backends: SqliteSessionStore (embedded default).
"""

from registry.base import SessionStore
from registry.model import Event, Phase, Session, Status

__all__ = ["Event", "Phase", "Session", "SessionStore", "Status"]
