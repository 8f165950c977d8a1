"""Servers met by many processes at once: a new Neo4j made ready by eight commands together,
and the marker nodes a version before made twice, repaired; a library's warning, one line."""

import os
import subprocess
import sys
import uuid

import pytest

from tests.workspace import ROOT, run_process

# Each waits for the go file (bounded), so that the eight meet the server together.
TOGETHER = """
import os, sys, time
deadline = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.005)
from baton.skills.frontends.cli import main
sys.exit(main(sys.argv[2:]))
"""


def emptied(driver) -> None:
    """The server as new: no node, constraint nor index of Baton's."""
    driver.execute_query("MATCH (n) DETACH DELETE n")
    for (name,) in driver.execute_query("SHOW CONSTRAINTS YIELD name").records:
        driver.execute_query(f"DROP CONSTRAINT {name}")  # a name the server gave, not input
    for (name,) in driver.execute_query("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name").records:
        driver.execute_query(f"DROP INDEX {name}")


def markers(driver) -> dict[str, int]:
    records = driver.execute_query("MATCH (m) WHERE m:BatonSchema OR m:BatonCounts "
                                   "RETURN labels(m)[0] AS kind, count(m) AS n").records
    return dict(records)


@pytest.fixture
def neo4j_driver(neo4j_server):
    import neo4j

    with neo4j.GraphDatabase.driver(neo4j_server.address, auth=neo4j_server.auth) as driver:
        yield driver


def test_eight_commands_meet_new_servers_together(home, worktrees, cli, bolt_uri, neo4j_driver, postgres_server,
                                                  monkeypatch, tmp_path):
    """Eight commands meet a new Neo4j and a new PostgreSQL database at once: each makes or
    finds the schema, none fails, no marker is made twice."""
    import psycopg

    main, _ = worktrees
    monkeypatch.setenv("BATON_GRAPH_URL", bolt_uri)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "60")  # eight JVM schema changes in turn, on 2 busy cores
    assert cli(main, "bind", "OMN-1")[0] == 0
    for attempt in range(3):  # a race: each round new servers, every process its first meeting
        emptied(neo4j_driver)
        database = f"baton_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")  # a generated identifier, not input
        go = tmp_path / f"go-{attempt}"
        environ = {**os.environ, "PYTHONPATH": str(ROOT), "BATON_DATABASE_URL": postgres_server.url_for(database)}
        processes = [subprocess.Popen([sys.executable, "-c", TOGETHER, str(go), "list"], cwd=main, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ) for _ in range(8)]
        go.touch()
        for process in processes:
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0 and not err, err  # nor a warning, nor a store down
        assert markers(neo4j_driver) == {"BatonSchema": 1, "BatonCounts": 1}


def test_markers_made_twice_by_a_version_before_are_repaired(home, worktrees, cli, bolt_uri, neo4j_driver,
                                                              monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("BATON_GRAPH_URL", bolt_uri)
    assert cli(main, "bind", "OMN-1")[0] == 0
    # What a version before left: no constraint on the markers, three of each made at once.
    for (name,) in neo4j_driver.execute_query("SHOW CONSTRAINTS YIELD name WHERE name STARTS WITH 'baton_baton' "
                                              "RETURN name").records:
        neo4j_driver.execute_query(f"DROP CONSTRAINT {name}")
    neo4j_driver.execute_query("MATCH (m) WHERE m:BatonSchema OR m:BatonCounts DELETE m")
    neo4j_driver.execute_query("UNWIND range(1, 3) AS i "
                               "CREATE (:BatonSchema {version: 3}), (:BatonCounts {kept: true})")
    code, out, err = cli(main, "doctor", "--repair")
    assert code == 0 and "Warning" not in err and "Warning" not in out, (out, err)
    assert markers(neo4j_driver) == {"BatonSchema": 2, "BatonCounts": 1}  # version 3's and this version's
    assert neo4j_driver.execute_query("MATCH (m:BatonSchema) RETURN m.version AS v ORDER BY v").records[0]["v"] == 3
    with pytest.raises(Exception, match="already exists"):
        neo4j_driver.execute_query("CREATE (:BatonCounts {kept: true})")
    for _ in range(3):
        code, _, err = cli(main, "resume", "OMN-1")
        assert code == 0 and "Warning" not in err, err


def test_a_librarys_warning_is_one_line_of_batons(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    warn = ("import warnings\nfrom baton.skills.frontends import cli\nlisted = cli._BY_NAME['list'].handler\n"
            "def warned(*args):\n"
            "    warnings.warn('Expected a result with a single record, but found multiple.', UserWarning)\n"
            "    return listed(*args)\n"
            "cli._BY_NAME['list'].handler = warned\n")
    result = run_process(main, "list", prelude=warn)
    assert result.returncode == 0 and "OMN-1" in result.stdout
    assert result.stderr == ("baton: warning: UserWarning: Expected a result with a single record, but found "
                             "multiple.\n")


@pytest.mark.servers  # use_servers asks for them at run time
def test_eight_projectors_meet_new_kafka_topics_together(request, home, worktrees, monkeypatch, tmp_path):
    """Eight projectors start together on topics no one made yet: each makes or finds them."""
    from tests.stores import use_servers

    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "60")
    go = tmp_path / "go"
    processes = [subprocess.Popen([sys.executable, "-c", TOGETHER, str(go), "projector", "--once", "--idle", "0.3"],
                                  cwd=worktrees[0], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(8)]
    go.touch()
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0 and "unavailable" not in out + err and "Warning" not in err, out + err
