"""The Cypher Baton sends: schema per dialect, statements parameterised and portable."""

import re

import pytest

from baton.graph import bolt


def test_memgraph_schema_uses_its_own_ddl():
    assert bolt.schema_statements("memgraph") == [
        "CREATE INDEX ON :Task(task_id)",
        "CREATE INDEX ON :File(key)",
        "CREATE INDEX ON :Repository(name)",
        "CREATE INDEX ON :Session(session_id)",
        "CREATE INDEX ON :BatonSchema(version)",
        "CREATE INDEX ON :BatonCounts(kept)",
        "CREATE INDEX ON :Task(status)",
        "CREATE CONSTRAINT ON (n:Task) ASSERT n.task_id IS UNIQUE",
        "CREATE CONSTRAINT ON (n:File) ASSERT n.key IS UNIQUE",
        "CREATE CONSTRAINT ON (n:Repository) ASSERT n.name IS UNIQUE",
        "CREATE CONSTRAINT ON (n:Session) ASSERT n.session_id IS UNIQUE",
        "CREATE CONSTRAINT ON (n:BatonSchema) ASSERT n.version IS UNIQUE",
        "CREATE CONSTRAINT ON (n:BatonCounts) ASSERT n.kept IS UNIQUE",
    ]
    assert not any("IF NOT EXISTS" in s for s in bolt.schema_statements("memgraph"))


def test_neo4j_schema_is_idempotent_ddl():
    statements = bolt.schema_statements("neo4j")
    assert all(("IF NOT EXISTS" if s.startswith("CREATE") else "IF EXISTS") in s for s in statements)
    assert "DROP CONSTRAINT baton_lease_lease_id IF EXISTS" in statements, "schema 4 keeps no copy of the leases"
    assert "CREATE CONSTRAINT baton_task_task_id IF NOT EXISTS FOR (n:Task) REQUIRE n.task_id IS UNIQUE" in statements
    assert "CREATE INDEX baton_task_status IF NOT EXISTS FOR (n:Task) ON (n.status)" in statements
    assert ("CREATE CONSTRAINT baton_batoncounts_kept IF NOT EXISTS FOR (n:BatonCounts) REQUIRE n.kept IS UNIQUE"
            in statements), "one marker of each, whoever writes it"
    with pytest.raises(ValueError, match="unknown Cypher dialect"):
        bolt.schema_statements("oracle")


@pytest.mark.parametrize("agent, dialect", [
    ("Neo4j/v5.11.0 compatible graph database server - Memgraph", "memgraph"),
    ("Neo4j/5.26.12", "neo4j"),
])
def test_dialect_from_the_server_agent(agent, dialect):
    assert bolt.dialect_of(agent) == dialect


@pytest.mark.parametrize("name", ["ACTIVATE", "ADD_TOUCHES", "SHARED_FILES_OF_FIRST", "PAIRS_AMONG",
                                  "SUMMARIES_PAGE", "SUMMARIES_OF", "RECORD_TICKETS", "ADD_DEPENDENCIES_OF_MANY",
                                  "SHARED_FILES_OF_MANY", "DROP_LEASES", "UNDER", "FORGET_TASKS", "STATUS_AND_FILES",
                                  "TOUCHERS_OF_EACH", "MOVE_COUNTS", "DUPLICATE_MARKERS", "SCHEMA_MARKED"])
def test_statements_take_input_only_as_parameters_and_avoid_non_portable_cypher(name):
    text = getattr(bolt, name)
    assert "{" not in re.sub(r"\{\w+: (\$\w+|'\w+'|\w+\.\w+|\w+\[\d\]|\w+)\}", "", text), "no formatted values"
    for feature in ("IF NOT EXISTS", "COUNT {", "COLLECT {", "shortestPath", "timestamp()", "datetime(", "CALL {"):
        assert feature not in text
