"""File-touch conflicts between active tickets.

Interface: ConflictGraph. Backends: SqliteConflictGraph (embedded default).
"""

from baton.graph.base import ConflictGraph, ConflictSummary
from baton.graph.conflicts import (
    FileConflict,
    conflict_signal_id,
    should_emit_conflict_signal,
)

__all__ = ["ConflictGraph", "ConflictSummary", "FileConflict", "conflict_signal_id", "should_emit_conflict_signal"]
