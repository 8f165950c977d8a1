"""`baton mcp` on the wire: raw JSON-RPC lines in, the server's lines out.

tests/data/mcp_wire.json holds what the server built on the official MCP SDK (2.3.0)
answered to the same lines: the initialize and server/discover results, the full tools/list
(names, order, titles, descriptions, schemas, annotations) and tool calls with each kind of
error. Baton's own JSON-RPC loop must answer the same, in both protocol eras: the handshake
(initialize, 2024-11-05 to 2025-11-25) and the per-request envelope of 2026-07-28, which
Claude Code, Codex and Copilot try first (`server/discover`).
"""

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "data" / "mcp_wire.json"
BATON = (sys.executable, "-m", "baton.skills.frontends.cli")
WAIT = 60  # seconds for one answer: a fresh process on a loaded machine

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def request(number: int | str, method: str, params: dict | None = None, *, modern: bool = False) -> dict:
    if modern:
        params = {**(params or {}), "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": number, "method": method, **({} if params is None else {"params": params})}


def initialize(number: int, version: str) -> dict:
    return request(number, "initialize", {"protocolVersion": version, "capabilities": {},
                                          "clientInfo": {"name": "test", "version": "1"}})


def tool(number: int, name: str, arguments: dict | None, *, modern: bool = False) -> dict:
    return request(number, "tools/call", {"name": name, **({} if arguments is None else {"arguments": arguments})},
                   modern=modern)


NOTIFIED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CANCELLED = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "gone"}}

# Conversation name -> the lines sent, in order (a notification is answered by nothing).
CONVERSATIONS = {
    "handshake": [
        initialize(1, "2025-06-18"), NOTIFIED, request(2, "ping"), request(3, "tools/list"),
        request(4, "tools/list", {"cursor": "next"}), CANCELLED,
        tool(5, "no_such_tool", {}), tool(6, "bind_task", {}), tool(7, "record_touch", {"paths": "src/a.py"}),
        tool(8, "recall_decisions", {"query": "x", "limit": "many"}),
        tool(9, "record_decision", {"text": "use\x00 Postgres"}), tool(10, "resume_session", {"task_id": "bad id!"}),
        tool(11, "list_sessions", None), tool(12, "list_leases", {"all": True}),
        tool(13, "write_handoff", {"probes": {"Py\x07": "python -V"}}), tool(14, "update_session", {"done": '["x"]'}),
        request(15, "tools/call", {}), request(16, "nope/nothing"), request("text-id", "ping", None),
        initialize(17, "1999-01-01"), initialize(18, "2024-11-05"), initialize(19, "2025-11-25"),
    ],
    "modern": [
        request(1, "server/discover", modern=True), request(2, "tools/list", modern=True),
        tool(3, "no_such_tool", {}, modern=True), tool(4, "list_sessions", {}, modern=True),
        tool(5, "bind_task", {}, modern=True), request(6, "ping", modern=True),
        request(7, "server/discover", {"_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
        request(8, "tools/list", {"_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}),
    ],
    "store_down": [initialize(1, "2025-11-25"), NOTIFIED, tool(2, "list_sessions", {})],
}


class Server:
    """A `baton mcp` process spoken to line by line."""

    def __init__(self, cwd: Path, env: dict | None = None, baton: tuple[str, ...] = BATON) -> None:
        self.process = subprocess.Popen([*baton, "mcp"], cwd=cwd,
                                        env={**os.environ, **(env or {})}, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, wait: float = WAIT) -> dict | None:
        """The next line the server writes, parsed; None when none comes within wait."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], wait)
        return json.loads(self.process.stdout.readline()) if ready else None

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(WAIT)
        finally:
            self.process.kill()


def converse(cwd: Path, messages: list[dict], env: dict | None = None, baton: tuple[str, ...] = BATON) -> list[dict]:
    """Each request's answer, in order; a notification answered by nothing."""
    server = Server(cwd, env, baton)
    answers = []
    try:
        for message in messages:
            server.send(json.dumps(message).encode())
            if "id" in message:
                answer = server.answer()
                assert answer is not None, message
                answers.append(answer)
        assert server.answer(0.2) is None, "nothing answers a notification"
        assert server.close() == 0
    finally:
        server.process.kill()
    return answers


def conversation(name: str, cwd: Path, baton: tuple[str, ...] = BATON) -> list[dict]:
    env = {"BATON_HOME": str(cwd / "home-file")} if name == "store_down" else None
    if env:
        (cwd / "home-file").write_text("not a directory\n")
    answers = converse(cwd, CONVERSATIONS[name], env, baton)
    return json.loads(json.dumps(answers, ensure_ascii=False).replace(str(cwd), "CWD"))  # a path of this run


def expected(name: str) -> list[dict]:
    """The golden answers, with this installation's version (the SDK's server said the same)."""
    from importlib.metadata import version

    text = GOLDEN.read_text().replace('"version": "0.1.0"', json.dumps({"version": version("baton-sessions")})[1:-1])
    return json.loads(text)[name]


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_the_server_answers_as_the_sdk_built_one_did(home, tmp_path, name):
    assert conversation(name, tmp_path) == expected(name)


def test_a_bad_line_is_a_json_rpc_error_and_the_server_goes_on(home, tmp_path):
    server = Server(tmp_path)
    try:
        server.send(json.dumps(initialize(1, "2025-11-25")).encode())
        assert server.answer()["result"]["protocolVersion"] == "2025-11-25"
        for line, code, number in [(b"not json", -32700, None), (b'{"jsonrpc": "2.0", "id": 2}', -32600, 2),
                                   (b'{"id": 3, "method": "ping"}', -32600, 3), (b"[1, 2]", -32600, None),
                                   (b'{"jsonrpc": "2.0", "id": [], "method": "ping"}', -32600, None),
                                   (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": 7}', -32602, 4),
                                   (b"\xff\xfe", -32700, None)]:
            server.send(line)
            answer = server.answer()
            assert answer["jsonrpc"] == "2.0" and answer["id"] == number and answer["error"]["code"] == code, line
        server.send(b"")  # a blank line is no message
        server.send(json.dumps(request(5, "ping")).encode())
        assert server.answer() == {"jsonrpc": "2.0", "id": 5, "result": {}}
        assert server.close() == 0
    finally:
        server.process.kill()



# `baton mcp` with list_leases replaced by a tool that prints, and runs a command that prints.
NOISY = """
import sys
from baton.skills.frontends import mcp_server
from baton.skills.frontends.cli import main


def noisy(arguments) -> str:
    print("stray print")
    import subprocess
    subprocess.run(["echo", "stray command"], check=True)
    return "[]"


mcp_server.RUNS["list_leases"] = noisy
sys.exit(main(["mcp"]))
"""


def test_only_protocol_messages_reach_stdout(home, tmp_path):
    """What a tool, a library or a command it runs writes goes to stderr, not between the messages."""
    server = Server(tmp_path, baton=(sys.executable, "-c", NOISY))
    try:
        for message in (initialize(1, "2025-11-25"), tool(2, "list_leases", {})):
            server.send(json.dumps(message).encode())
        out, err = server.process.communicate(timeout=WAIT)  # closes stdin: the server ends
    finally:
        server.process.kill()
    answers = [json.loads(line) for line in out.splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"] == {"content": [{"type": "text", "text": "[]"}], "isError": False}
    assert b"stray print" in err and b"stray command" in err
