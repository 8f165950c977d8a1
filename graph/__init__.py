"""File-touch conflicts between active tickets.

Interface: ConflictGraph. Backends: SqliteConflictGraph (baton.graph.sqlite, the embedded
default) and BoltConflictGraph (baton.graph.bolt: Memgraph or Neo4j over Bolt).
"""

from baton.graph.base import ConflictGraph, ConflictSummary

__all__ = ["ConflictGraph", "ConflictSummary"]
