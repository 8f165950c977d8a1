"""Credentials never shown: the one masking function."""

from __future__ import annotations

import pytest

from baton import masking
from baton.masking import known_secret, mask


@pytest.mark.parametrize("given, shown", [
    ("PostgreSQL at postgresql://app:s3cret@db.example.com:5432/baton: refused",
     "PostgreSQL at postgresql://app:***@db.example.com:5432/baton: refused"),
    ("Bolt server at bolt://neo4j:hunter2@127.0.0.1:7687: timed out",
     "Bolt server at bolt://neo4j:***@127.0.0.1:7687: timed out"),
    ("http://:onlypassword@qdrant:6333", "http://:***@qdrant:6333"),
    ("postgresql://db/baton?user=app&password=s3cret&sslmode=require",
     "postgresql://db/baton?user=app&password=***&sslmode=require"),
    ("host=db user=app password='s3 cret' dbname=baton", "host=db user=app password='***' dbname=baton"),
    ("qdrant at https://q.example.com?api_key=abcdef123", "qdrant at https://q.example.com?api_key=***"),
    ("sasl.password=Kafka-Pass-1 in config", "sasl.password=*** in config"),
    ("postgresql://app@db/baton and bolt://127.0.0.1:7687", "postgresql://app@db/baton and bolt://127.0.0.1:7687"),
    ("the password= field is empty", "the password= field is empty"),
])
def test_credentials_in_urls_and_keywords_are_masked(given, shown):
    assert mask(given) == shown


def test_a_known_secret_is_masked_wherever_it_appears(monkeypatch):
    monkeypatch.setattr(masking, "_known", set())
    known_secret("qdrant-key-7f3a9")
    known_secret("abc")  # too short to be told from ordinary text: refused as a secret elsewhere
    known_secret(None)
    assert mask("Qdrant refused key qdrant-key-7f3a9 (header api-key)") == "Qdrant refused key *** (header api-key)"
    assert mask("abc is fine") == "abc is fine"


def test_a_server_that_fails_never_shows_the_password_of_its_setting():
    from baton.errors import StoreUnavailable
    from baton.graph.bolt import BoltConflictGraph
    from baton.outcome import Unavailable
    from baton.recall.qdrant_server import QdrantServerIndex
    from baton.registry.postgres import PostgresSessionStore
    from tests.servers.common import free_port

    port = free_port()
    registry = PostgresSessionStore(f"postgresql://app:pg-S3cret@127.0.0.1:{port}/baton", timeout=1, project="test")
    graph = BoltConflictGraph(f"bolt://neo4j:bolt-S3cret@127.0.0.1:{port}", timeout=1)
    recall = QdrantServerIndex(f"http://reader:qdrant-S3cret@127.0.0.1:{port}", timeout=1)
    reasons = [registry.get("T-1"), graph.shared_files("T-1")]
    try:
        recall.count()
    except StoreUnavailable as exc:
        reasons.append(Unavailable(str(exc)))
    for store in (registry, graph, recall):
        store.close()
    assert len(reasons) == 3 and all(isinstance(r, Unavailable) for r in reasons)
    assert not [r.reason for r in reasons if "S3cret" in r.reason], reasons
    assert graph.uri == f"bolt://127.0.0.1:{port}"
