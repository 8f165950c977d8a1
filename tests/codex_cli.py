"""The real Codex CLI against a scripted model on loopback, for tests.

`codex` is found by BATON_CODEX, else in the cache that ./scripts/test installs it into
(`$XDG_CACHE_HOME/baton/codex`, a pinned version), else on PATH. ScriptedResponses answers
the OpenAI Responses API with server-sent events (what Codex asks for) with scripted
turns and keeps every request, so a test sees what Codex really sends the model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.claude_code import ApiHandler, ScriptedApi, find_agent


def find_codex() -> str | None:
    return find_agent("BATON_CODEX", "codex", "codex")


class ScriptedResponses(ScriptedApi):
    """An OpenAI Responses API on 127.0.0.1 whose model plays `turns` in order, one per
    request: {"call": NAME, "arguments": {...}, "namespace"?: NS} calls a function tool,
    {"patch": TEXT} calls the apply_patch tool, {"text": ...} ends the turn. `requests`
    holds every request body received."""

    def __init__(self, turns: list[dict]) -> None:
        super().__init__(turns)
        model = self

        class Handler(ApiHandler):
            def do_GET(self) -> None:
                self.send_json({"object": "list", "data": []})  # /v1/models

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                item = model._answer(body)
                self.send_events((data["type"], data) for data in _events(item, len(model.requests)))

        self._serve(Handler, "/v1")

    def _answer(self, body: dict) -> dict:
        turn, number = self._next(body)
        if "call" in turn:
            item = {"type": "function_call", "id": f"fc_{number}", "call_id": f"call_{number}", "name": turn["call"],
                    "arguments": json.dumps(turn.get("arguments", {})), "status": "completed"}
            if "namespace" in turn:
                item["namespace"] = turn["namespace"]
            return item
        if "patch" in turn:
            return {"type": "custom_tool_call", "id": f"ctc_{number}", "call_id": f"call_{number}",
                    "name": "apply_patch", "input": turn["patch"], "status": "completed"}
        return {"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": turn["text"], "annotations": []}]}

    def outputs(self, request: int) -> list[str]:
        """The tool outputs (function_call_output / custom_tool_call_output) a request carries."""
        found = []
        for item in self.requests[request].get("input", []):
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                output = item.get("output")
                found.append(output if isinstance(output, str) else json.dumps(output))
        return found


def _events(item: dict, number: int):
    response = {"id": f"resp_{number}", "object": "response", "status": "in_progress", "output": []}
    yield {"type": "response.created", "response": response}
    yield {"type": "response.in_progress", "response": response}
    yield {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress"}}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0,
               "delta": text}
    elif item["type"] == "function_call":
        yield {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0,
               "delta": item["arguments"]}
    yield {"type": "response.output_item.done", "output_index": 0, "item": item}
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
    yield {"type": "response.completed", "response": {**response, "status": "completed", "output": [item],
                                                      "usage": usage}}


def write_model_config(codex_home: Path, model: ScriptedResponses) -> None:
    """Point Codex at the scripted model: the lines Baton's install leaves alone."""
    import re

    codex_home.mkdir(parents=True, exist_ok=True)
    config = codex_home / "config.toml"
    if config.exists() and "[model_providers.scripted]" in config.read_text():  # another model, same lines
        config.write_text(re.sub(r'base_url = "[^"]*"', f'base_url = "{model.url}"', config.read_text()))
        return
    lines = ['model = "gpt-5.5"', 'model_provider = "scripted"', "",
             "[model_providers.scripted]", 'name = "scripted"', f'base_url = "{model.url}"',
             'env_key = "SCRIPTED_API_KEY"', 'wire_api = "responses"', "request_max_retries = 0",
             "stream_max_retries = 0", ""]
    config.write_text("\n".join(lines) + (config.read_text() if config.exists() else ""))


def run_codex(codex: str, cwd: Path, prompt: str, *, codex_home: Path, env: dict | None = None,
              args: tuple[str, ...] = (), timeout: float = 180) -> subprocess.CompletedProcess:
    """`codex exec --json PROMPT` in cwd, with a CODEX_HOME of its own and no network but loopback."""
    environment = {**os.environ, "CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "sk-scripted",
                   "RUST_LOG": "warn", **(env or {})}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_SANDBOX"):
        environment.pop(name, None)
    return subprocess.run([codex, "exec", "--json", "--skip-git-repo-check", *args, prompt], cwd=cwd,
                          env=environment, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def events(result: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
