"""Credentials never shown: the one masking function."""

from __future__ import annotations

import pytest

from baton import masking
from baton.masking import known_secret, mask


@pytest.mark.parametrize(("given", "shown"), [
    ("PostgreSQL at postgresql://app:s3cret@db.example.com:5432/baton: refused",
     "PostgreSQL at postgresql://app:***@db.example.com:5432/baton: refused"),
    ("Bolt server at bolt://neo4j:hunter2@127.0.0.1:7687: timed out", "Bolt server at bolt://neo4j:***@127.0.0.1:7687: timed out"),
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
