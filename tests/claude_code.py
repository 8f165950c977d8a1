"""The real Claude Code CLI against a scripted model on loopback, for tests and benches.

`claude` is found by BATON_CLAUDE, else in the cache that ./scripts/test installs it into
(`$XDG_CACHE_HOME/baton/claude-code`, a pinned version), else on PATH. ScriptedModel
answers the Messages API (streaming SSE, what Claude Code asks for) with scripted turns
and keeps every request, so a test sees what Claude Code really sends the model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self


def find_agent(variable: str, cache_name: str, program: str) -> str | None:
    """An agent's CLI: named by `variable`, else in the cache ./scripts/test installs it into
    from npm (`$XDG_CACHE_HOME/baton/<cache_name>`, a pinned version), else on PATH."""
    explicit = os.environ.get(variable)
    if explicit:
        return explicit
    cache = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "baton" / cache_name
    cached = cache / "node_modules" / ".bin" / program
    if os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which(program)


def real_agent_marks(agent: str | None, name: str, variable: str) -> list:
    """The marks of a test module that runs a real agent's CLI: skipped without it, saying
    why, and slow."""
    import pytest

    return [pytest.mark.skipif(agent is None, reason=f"{name} is not installed: ./scripts/test installs it with "
                                                     f"npm, or set {variable} to its executable"), pytest.mark.slow]


def find_claude() -> str | None:
    return find_agent("BATON_CLAUDE", "claude-code", "claude")


class ApiHandler(BaseHTTPRequestHandler):
    """A scripted API's request handler: quiet, answering JSON or server-sent events."""

    def log_message(self, *args) -> None:
        pass

    def send_json(self, data: dict) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def send_events(self, events: Iterable[tuple[str, dict]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class ScriptedApi:
    """A scripted model's HTTP API on 127.0.0.1 (`url`), served while the object is entered:
    it plays `turns` and keeps every request body in `requests`."""

    def __init__(self, turns: list[dict]) -> None:
        self.turns = turns
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    def _next(self, body: dict) -> tuple[dict, int]:
        """Keep the request; the turn it gets and its number (from 1)."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
        return self.turns[min(number - 1, len(self.turns) - 1)], number

    def _serve(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class ScriptedModel(ScriptedApi):
    """An Anthropic Messages API on 127.0.0.1 whose assistant plays `turns` in order, one
    per request of the agent's main loop (a request that offers tools): {"tool": NAME,
    "input": {...}} calls a tool, {"text": ...} ends the turn. Other requests (titles,
    summaries) get a short text. `requests` holds every request body received."""

    def __init__(self, turns: list[dict]) -> None:
        super().__init__(turns)
        self._played = 0
        model = self

        class Handler(ApiHandler):
            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if "count_tokens" in self.path:
                    return self.send_json({"input_tokens": 100})
                blocks, stop = model._answer(body)
                if body.get("stream"):
                    return self.send_events(_events(body.get("model"), blocks, stop))
                self.send_json({"id": "msg_scripted", "type": "message", "role": "assistant",
                                "model": body.get("model"), "content": blocks, "stop_reason": stop,
                                "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 10}})

        self._serve(Handler)

    @property
    def agent_requests(self) -> list[dict]:
        """The requests of the agent's main loop, in order."""
        return [r for r in self.requests if r.get("tools")]

    def _answer(self, body: dict) -> tuple[list[dict], str]:
        with self._lock:
            self.requests.append(body)
            if not body.get("tools"):
                return [{"type": "text", "text": "Scripted session"}], "end_turn"
            turn = self.turns[min(self._played, len(self.turns) - 1)]
            self._played += 1
        if "tool" in turn:
            return [{"type": "tool_use", "id": f"toolu_scripted_{self._played}", "name": turn["tool"],
                     "input": turn["input"]}], "tool_use"
        return [{"type": "text", "text": turn["text"]}], "end_turn"


def _events(model: str | None, blocks: list[dict], stop: str):
    """The server-sent events of one streamed message."""
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 10}}
    yield "message_stop", {"type": "message_stop"}


def run_claude(claude: str, cwd: Path, prompt: str, model: ScriptedModel, *, home: Path, env: dict | None = None,
               args: tuple[str, ...] = (), timeout: float = 120) -> subprocess.CompletedProcess:
    """`claude -p PROMPT --output-format stream-json --verbose` against the scripted model,
    with a HOME of its own and no network but loopback."""
    home.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": model.url,
                   "ANTHROPIC_API_KEY": "sk-ant-scripted", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                   "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", **(env or {})}
    for name in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CONFIG_DIR", "ANTHROPIC_AUTH_TOKEN"):
        environment.pop(name, None)
    return subprocess.run([claude, "-p", prompt, "--output-format", "stream-json", "--verbose", *args], cwd=cwd,
                          env=environment, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def stream_events(result: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def mcp_tools(request: dict) -> list[dict]:
    """The tools of one request that an MCP server brought: its own (mcp__SERVER__NAME)
    and the resource tools Claude Code adds for a server that declares resources."""
    return [t for t in request.get("tools", [])
            if t.get("name", "").startswith("mcp__") or "McpResource" in t.get("name", "")]


# Bytes Baton's MCP tools may cost each request a client sends without tool search: held by
# tests/test_mcp_server.py on the server's list and tests/test_real_agent.py on Claude Code's.
MCP_TOOLS_BYTES = 8600


def size(tools: list[dict]) -> int:
    """Bytes of tools as JSON without spaces, the form on the wire."""
    return len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())
