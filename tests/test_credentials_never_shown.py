"""No output of any command, in any failure of any store, shows a server's password: each
store (the registry's PostgreSQL, the graph's Bolt server, recall's Qdrant, the signals'
Kafka) is configured with credentials and made to refuse, to stall, or to answer with
something that is not its protocol, and every command's stdout and stderr (the CLI, its
JSON, `baton doctor`, a hook, the projector, `baton mcp`) is searched for the secret."""

import json
import os
import socket
import subprocess
import sys
import threading
from contextlib import suppress

import pytest

from tests.servers.common import free_port
from tests.servers.outage import REFUSE, STALL, Outage
from tests.workspace import run_process

pytestmark = pytest.mark.slow

SECRET = "S3cret-pw-7f3a9c"
GARBAGE = "garbage"


class Garbage:
    """A loopback port that answers every connection with bytes of no protocol, then closes it."""

    def __init__(self) -> None:
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            with suppress(OSError):
                client.sendall(b"HTTP/1.1 500 no\r\nContent-Length: 7\r\n\r\ngarbage" + bytes(range(256)))
            client.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture(params=[REFUSE, STALL, GARBAGE])
def port(request):
    server = Garbage() if request.param == GARBAGE else Outage(mode=request.param)
    yield server.port
    server.close()


def configured(store: str, port: int) -> dict[str, str]:
    """The environment putting one store on a server at port, with credentials."""
    if store == "registry":
        return {"BATON_DATABASE_URL": f"postgresql://baton:{SECRET}@127.0.0.1:{port}/baton?password={SECRET}"}
    if store == "graph":
        return {"BATON_GRAPH_URL": f"bolt://neo4j:{SECRET}@127.0.0.1:{port}", "BATON_GRAPH_USER": "neo4j",
                "BATON_GRAPH_PASSWORD": SECRET}
    if store == "recall":
        return {"BATON_QDRANT_URL": f"http://qdrant:{SECRET}@127.0.0.1:{port}", "BATON_QDRANT_API_KEY": SECRET}
    return {"BATON_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}", "BATON_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "BATON_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "BATON_KAFKA_SASL_USERNAME": "baton",
            "BATON_KAFKA_SASL_PASSWORD": SECRET}


def hook(cwd, env, event: str) -> subprocess.CompletedProcess:
    payload = json.dumps({"session_id": "s-1", "cwd": str(cwd), "hook_event_name": event,
                          "tool_name": "Edit", "tool_input": {"file_path": str(cwd / "src" / "db.py")}})
    return subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "hook", event], cwd=cwd,
                          input=payload, capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def mcp(cwd, env) -> str:
    """What `baton mcp` answers and logs for a few calls."""
    calls = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    calls += [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
              for n, (name, arguments) in enumerate([("list_sessions", {}), ("record_decision", {"text": "Use Redis"}),
                                                     ("resume_session", {"task_id": "OMN-1"}),
                                                     ("recall_decisions", {"query": "redis"})], start=2)]
    process = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "mcp"], cwd=cwd, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, **env})
    answers = []
    try:
        for message in calls:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            if "id" in message:
                answers.append(process.stdout.readline())
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        process.kill()
    assert all(answers), answers
    return "".join(answers) + process.stderr.read()


@pytest.mark.parametrize("store", ["registry", "graph", "recall", "signals"])
def test_no_output_shows_a_servers_password(home, worktrees, store, port):
    main, _ = worktrees
    env = {**configured(store, port), "BATON_STORE_TIMEOUT": "1", "BATON_RECHECK_AFTER": "0.01"}
    shown = []
    for args in [("bind", "OMN-1"), ("decide", "Keep carts in PostgreSQL"), ("deliver",), ("resume", "OMN-1"),
                 ("resume", "OMN-1", "--json"), ("list",), ("recall", "carts"), ("doctor",), ("doctor", "--json"),
                 ("projector", "--once", "--idle", "0.2"), ("end", "--status", "stalled")]:
        result = run_process(main, *args, env=env)
        shown.append((args, result.stdout + result.stderr))
    for event in ("session-start", "stop"):
        result = hook(main, env, event)
        shown.append((("hook", event), result.stdout + result.stderr))
    shown.append((("mcp",), mcp(main, env)))
    assert any("unavailable" in text for _, text in shown), "the store never failed: the test proves nothing"
    for args, text in shown:
        assert SECRET not in text, f"baton {' '.join(args)} showed the password:\n{text}"


@pytest.mark.servers
def test_the_bolt_credentials_settings_log_in_and_a_wrong_password_is_never_shown(home, worktrees, neo4j_server,
                                                                                bolt_uri):
    """The test Neo4j runs with authentication on: BATON_GRAPH_USER and BATON_GRAPH_PASSWORD
    log in; without them the server refuses; a wrong password is refused and never shown."""
    main, _ = worktrees
    right = {"BATON_GRAPH_URL": neo4j_server.address, "BATON_GRAPH_USER": neo4j_server.user,
             "BATON_GRAPH_PASSWORD": neo4j_server.password}
    wrong = {**right, "BATON_GRAPH_PASSWORD": SECRET}
    assert run_process(main, "bind", "OMN-1", env=right).returncode == 0
    assert run_process(main, "deliver", env=right).returncode == 0
    without = {"BATON_GRAPH_URL": neo4j_server.address}
    for env, state in ((right, "ok"), (wrong, "unavailable"), (without, "unavailable"), ({"BATON_GRAPH_URL": bolt_uri},
                                                                                         "ok")):
        result = run_process(main, "resume", "OMN-1", "--json", env={**env, "BATON_STORE_TIMEOUT": "10"})
        graph = json.loads(result.stdout)["stores"]["graph"]
        assert graph.startswith(state), (env, graph)
        shown = result.stdout + result.stderr
        assert SECRET not in shown and neo4j_server.password not in shown, shown
