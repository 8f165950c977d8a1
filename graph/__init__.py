"""File-touch conflicts between active tickets.

Interface: ConflictGraph (baton.graph.base). Backends: SqliteConflictGraph (baton.graph.sqlite, the embedded
default) and BoltConflictGraph (baton.graph.bolt: Memgraph or Neo4j over Bolt).
"""
