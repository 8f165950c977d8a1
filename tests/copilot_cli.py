"""The real GitHub Copilot CLI against a scripted model on loopback, for tests.

`copilot` is found by BATON_COPILOT, else in the cache that ./scripts/test installs it into
(`$XDG_CACHE_HOME/baton/copilot`, a pinned version), else on PATH. ScriptedChat answers the
OpenAI chat completions API with streamed chunks (what Copilot asks for when its provider
is pointed at a base URL: no GitHub login) and keeps every request, so a test sees what
Copilot really sends the model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.claude_code import ApiHandler, ScriptedApi, find_agent


def find_copilot() -> str | None:
    return find_agent("BATON_COPILOT", "copilot", "copilot")


class ScriptedChat(ScriptedApi):
    """An OpenAI chat completions API on 127.0.0.1 whose model plays `turns` in order, one per
    request: {"call": NAME, "arguments": {...}} calls a tool, {"text": ...} ends the turn.
    `requests` holds every request body received."""

    def __init__(self, turns: list[dict]) -> None:
        super().__init__(turns)
        model = self

        class Handler(ApiHandler):
            def do_GET(self) -> None:
                self.send_json({"object": "list", "data": []})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for chunk in model._answer(body):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self._serve(Handler, "/v1")

    def _answer(self, body: dict) -> list[dict]:
        turn, number = self._next(body)
        if "call" in turn:
            delta = {"role": "assistant", "tool_calls": [{"index": 0, "id": f"call_{number}", "type": "function",
                                                          "function": {"name": turn["call"],
                                                                       "arguments": json.dumps(turn["arguments"])}}]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": turn["text"]}, "stop"
        base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        return [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                {**base, "choices": [], "usage": usage}]

    def tool_results(self, request: int) -> list[str]:
        """The tool messages' contents a request carries."""
        return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                for m in self.requests[request]["messages"] if m.get("role") == "tool"]


def run_copilot(copilot: str, cwd: Path, prompt: str, model: ScriptedChat, *, copilot_home: Path, home: Path,
                env: dict | None = None, args: tuple[str, ...] = (),
                timeout: float = 120) -> subprocess.CompletedProcess:
    """`copilot -p PROMPT --allow-all-tools` in cwd against the scripted model, offline, with a
    COPILOT_HOME of its own (`home` holds what Copilot extracts on its first run: share it)."""
    home.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "HOME": str(home), "COPILOT_HOME": str(copilot_home), "TERM": "dumb",
                   "COPILOT_PROVIDER_BASE_URL": model.url, "COPILOT_PROVIDER_TYPE": "openai",
                   "COPILOT_MODEL": "gpt-4.1", "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                   **(env or {})}
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "COPILOT_GITHUB_TOKEN", "COPILOT_ALLOW_ALL"):
        environment.pop(name, None)
    return subprocess.run([copilot, "-p", prompt, "--allow-all-tools", "--no-color", *args], cwd=cwd,
                          env=environment, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
