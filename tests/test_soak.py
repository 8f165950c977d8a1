"""A bounded soak of each mode (tests/soak.py; `python -m bench.soak` runs a longer one): 8
agent processes and, on the servers, a projector; the projector and each server killed once
(embedded: the resident, every few seconds), random commands killed with SIGKILL. Every
acknowledged write is then present exactly once, every decision is searchable, and no Baton
process is left running."""

import pytest

from tests.soak import report, soak

SECONDS = 20


@pytest.mark.slow
def test_soak_embedded(tmp_path):
    """Through the resident, killed every few seconds: each command is answered by the next one."""
    result = soak("embedded", SECONDS, agents=8, seed=11, resident=True, cycle=SECONDS / 3)
    assert not result["problems"], report(result)
    assert result["acknowledged"] > 0, report(result)
    assert {name for _, name, *_ in result["memory"]} == {"resident"}, "its memory was sampled"


@pytest.mark.servers
def test_soak_servers(postgres_server, neo4j_server, kafka_server):
    result = soak("servers", SECONDS, agents=8, seed=12, running=(postgres_server, neo4j_server, kafka_server))
    assert not result["problems"], report(result)
    assert set(result["heals"]) == {"postgres", "neo4j", "kafka"}
