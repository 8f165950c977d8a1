import os
from pathlib import Path

import pytest

from tests import lanes
from tests.stores import SERVER_BUDGET, use_servers
from tests.workspace import git, make_repo, run_process


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(lanes.OPTION, choices=("on", "off"), default="off",
                     help="the lane: `on` hands each shell test's commands to a resident process, as users run "
                          "them; `off` runs them in the test's own process or a fresh one (tests/lanes.py)")


def pytest_configure(config: pytest.Config) -> None:
    # For the whole session: every process a test starts inherits it (tests/test_resident.py
    # switches the resident on for its own homes in either lane).
    os.environ["BATON_RESIDENT"] = config.getoption(lanes.OPTION)
    # The tests' repositories name remotes that are not there (git@github.com:acme/shop.git):
    # a checkpoint pushed or fetched would try the network. The tests of checkpoints through
    # a remote (tests/test_checkpoints_remote.py) turn it on for their own bare remote.
    os.environ["BATON_CHECKPOINT_PUSH"] = "off"


# Fixtures that start or reach a server, fixtures named for servers (on_servers, ...), and
# the fixture parameters that put stores on servers (any_home[servers], store[postgres],
# ...): a test using any is marked `servers`.
SERVER_FIXTURES = frozenset({"postgres_server", "postgres_url", "kafka_server", "kafka_topic", "neo4j_server",
                             "bolt_uri"})
SERVER_PARAMS = frozenset({"servers", "postgres", "bolt", "kafka", *SERVER_FIXTURES})


def uses_servers(item: pytest.Item) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    if SERVER_FIXTURES.intersection(fixtures) or any("servers" in name for name in fixtures):
        return True
    callspec = getattr(item, "callspec", None)
    values = [v for value in (callspec.params.values() if callspec else ())
              for v in (value if isinstance(value, tuple) else (value,))]
    return any(isinstance(v, str) and v in SERVER_PARAMS for v in values)


def runs_baton(item: pytest.Item) -> bool:
    """A shell test: it runs Baton's commands (the `cli` fixture, run_process), its hooks
    (tests/test_claude_hooks.py's hook) or its MCP server."""
    from tests.test_claude_hooks import hook

    if item.get_closest_marker("in_process") is not None:
        return False
    module = getattr(item, "module", None)
    helpers = vars(module).values() if module is not None else ()
    return ("cli" in getattr(item, "fixturenames", ()) or any(h is run_process or h is hook for h in helpers)
            or (module is not None and module.__name__.split(".")[-1].startswith("test_mcp")))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if uses_servers(item):
            item.add_marker(pytest.mark.servers)
        if item.get_closest_marker("servers") is not None:
            # With pytest-xdist's --dist loadgroup (scripts/test), one worker runs every server
            # test against one set of servers while the others run the rest: each worker
            # would otherwise start its own PostgreSQL, Kafka and Neo4j (three workers' idle
            # JVMs took about a third of the 2 cores' time).
            item.add_marker(pytest.mark.xdist_group("servers"))
        if runs_baton(item):
            item.add_marker(pytest.mark.shell)
    if config.getoption(lanes.OPTION) == "on":
        # The other tests run no command: lane `off` has run them as they would run here.
        def in_lane_on(item: pytest.Item) -> bool:
            return item.get_closest_marker("shell") is not None and not (
                item.get_closest_marker("embedded_in_lane_on") and item.get_closest_marker("servers"))

        others = [item for item in items if not in_lane_on(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if in_lane_on(item)]


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: the controller adds the workers' tallies up
        workeroutput["lane_tally"] = dict(lanes.tally)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    for verdict, count in getattr(node, "workeroutput", {}).get("lane_tally", {}).items():
        lanes.tally[verdict] = lanes.tally.get(verdict, 0) + count


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if config.getoption(lanes.OPTION) == "on" and any(terminalreporter.stats.get(key) for key in ("passed", "failed")):
        terminalreporter.write_line(f"lane on: {lanes.tally[lanes.ANSWERED]} commands answered by a resident, "
                                    f"{lanes.tally[lanes.LOCAL]} run in their own process (no resident listened yet "
                                    "for their home)")


@pytest.fixture(autouse=True)
def resident_lane(request, tmp_path_factory):
    """In lane `on`, a shell test's commands go to a resident (tests/lanes.py): the lane
    fails the test when one ran in its own process while a resident listened, and stops
    every resident the test started."""
    if not lanes.lane_on() or request.node.get_closest_marker("shell") is None:
        yield None
        return
    lane = lanes.ResidentLane(tmp_path_factory.mktemp("lane") / "record")
    lanes.current = lane
    try:
        yield lane
    finally:
        lanes.current = None
        lane.count()
        lane.stop()
    failure = lane.check()
    if failure:
        pytest.fail(f"lane on: {failure}", pytrace=False)


@pytest.fixture(autouse=True)
def unmarked_server_use_fails(request):
    """A test that asked for a server at run time (getfixturevalue, use_servers) without
    the `servers` mark fails, so none is left in the `-m "not servers"` tier unnoticed."""
    yield
    used = SERVER_FIXTURES.intersection(request.fixturenames)
    if used and request.node.get_closest_marker("servers") is None:
        pytest.fail(f"uses {', '.join(sorted(used))} but is not marked servers: add @pytest.mark.servers",
                    pytrace=False)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An embedded data home; every store on its embedded default."""
    path = tmp_path / "baton-home"
    monkeypatch.setenv("BATON_HOME", str(path))
    for name in ("BATON_TASK_ID", "BATON_SESSION_ID", "BATON_DATABASE_URL", "BATON_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "2")
    # Tests drive delivery through commands, so what waits where is known; the background
    # delivery that a touch starts is tested on its own (tests/test_background_delivery.py).
    monkeypatch.setenv("BATON_BACKGROUND_DELIVERY", "off")
    # Likewise, tests index queued decisions with `baton index` (tests/test_recall_index.py
    # covers the background indexer).
    monkeypatch.setenv("BATON_BACKGROUND_INDEXING", "off")
    return path


@pytest.fixture(scope="session")
def postgres_server():
    from tests.servers.postgres import PostgresServer

    server = PostgresServer().start()
    yield server
    server.destroy()


@pytest.fixture
def postgres_url(postgres_server, monkeypatch) -> str:
    """A fresh database on the test server, and the budget for a healthy server (tests/stores.py)."""
    import uuid

    import psycopg

    name = f"baton_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a generated identifier, not input
    monkeypatch.setenv("BATON_STORE_TIMEOUT", str(SERVER_BUDGET))
    return postgres_server.url_for(name)


@pytest.fixture(scope="session")
def kafka_server():
    from tests.servers.kafka import KafkaServer

    server = KafkaServer().start()
    yield server
    server.destroy()


@pytest.fixture
def kafka_topic(kafka_server) -> str:
    """A topic name of its own for one test."""
    import uuid

    return f"baton.test-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def neo4j_server():
    from tests.servers.neo4j import Neo4jServer

    server = Neo4jServer().start()
    yield server
    server.destroy()


@pytest.fixture
def bolt_uri(neo4j_server, monkeypatch) -> str:
    """The Bolt server, emptied (Neo4j Community has one user database), as a URI holding
    its credentials (the server runs with authentication on); the budget for a healthy
    server (tests/stores.py)."""
    import neo4j

    with neo4j.GraphDatabase.driver(neo4j_server.address, auth=neo4j_server.auth) as driver:
        driver.execute_query("MATCH (n) DETACH DELETE n")
    monkeypatch.setenv("BATON_STORE_TIMEOUT", str(SERVER_BUDGET))
    return neo4j_server.uri


@pytest.fixture(params=["embedded", "servers"])
def any_home(request, home, monkeypatch, tmp_path) -> Path:
    """A data home on the embedded default, then with every store on its server."""
    if request.param == "servers":
        use_servers(request, monkeypatch, tmp_path, qdrant=True)
    return home


@pytest.fixture(params=["sqlite", "postgres"])
def registry_home(request, home, monkeypatch) -> Path:
    """A data home whose registry is embedded (SQLite), then on the PostgreSQL server (the
    other stores stay embedded: every mix works)."""
    if request.param == "postgres":
        monkeypatch.setenv("BATON_DATABASE_URL", request.getfixturevalue("postgres_url"))
    return home


@pytest.fixture(params=["embedded", "servers"])
def shared_home(request, home, monkeypatch, tmp_path) -> Path:
    """Like any_home, for many processes at once: qdrant-client's local mode admits one
    process, so recall stays on the embedded index here."""
    if request.param == "servers":
        use_servers(request, monkeypatch, tmp_path, qdrant=False)
    return home


@pytest.fixture
def worktrees(tmp_path) -> tuple[Path, Path]:
    """Two worktrees of one repository with an origin."""
    main = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    second = tmp_path / "shop-second"
    git(main, "worktree", "add", "-q", str(second), "-b", "second")
    return main, second


@pytest.fixture
def ways_out(home, worktrees, cli, tmp_path) -> Path:
    """OMN-1 bound to a worktree holding ways out of it (a link to a secret file beside the
    repository, a link to a directory beside it), a directory and a fifo: what a touch must
    refuse (tests/test_touched_paths.py)."""
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (tmp_path / "secret.txt").write_text("not the repository's\n")
    (tmp_path / "elsewhere").mkdir()
    (main / "src").mkdir()
    (main / "out.txt").symlink_to(tmp_path / "secret.txt")
    (main / "ext").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(main / "pipe")
    return main


@pytest.fixture
def cli(monkeypatch, capsys, resident_lane):
    """Run `baton ARGS` in a directory: in-process, or in lane `on` through the console entry
    and the resident; returns (exit status, stdout, stderr). timeout: the seconds lane `on`
    gives the command (in-process, a command is not cut)."""
    from baton.skills.frontends.cli import main

    def run(cwd: Path, *args: str, timeout: float = 120) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        if os.environ.get("BATON_KAFKA_BOOTSTRAP"):
            # Writes go through Kafka: let the projector catch up first, as a running
            # `baton projector` would, so that every command sees the earlier ones.
            main(["projector", "--once", "--idle", "0.3"])
            capsys.readouterr()
        if resident_lane is not None:
            done = resident_lane.run(cwd, args, timeout=timeout)
            return done.returncode, done.stdout, done.stderr
        project = os.environ.get("BATON_PROJECT")
        try:
            code = main(list(args))
        finally:  # `--project` sets the process's setting, as it would in a fresh process
            if project is None:
                os.environ.pop("BATON_PROJECT", None)
            else:
                os.environ["BATON_PROJECT"] = project
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def encoder():
    """Recall's embedding model, loaded once for the tests that embed."""
    from baton.recall.embedding import MiniLMEncoder

    return MiniLMEncoder.load()


@pytest.fixture(params=["embedded", "qdrant-client"])
def make_index(request, tmp_path):
    """Opens the decision index, on the embedded store then on Qdrant (qdrant-client's local
    mode); closes what it opened."""
    from baton.recall.embedded import EmbeddedDecisionIndex

    opened = []

    def make():
        if request.param == "embedded":
            index = EmbeddedDecisionIndex(tmp_path / "recall", timeout=2)
        else:
            from baton.recall.qdrant_server import QdrantServerIndex

            index = QdrantServerIndex(f"file://{tmp_path / 'qdrant'}", timeout=2)
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()
