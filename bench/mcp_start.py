"""How soon a new `baton mcp` answers: every agent session waits for its `initialize` and
`tools/list` before its first model request.

Times a fresh `baton mcp` from its start to the answer to `initialize`, then to the answer
to `tools/list`, without the resident and through it (a child of the resident, with the
tools built), in turns with `python -c pass` in the same run, and prints medians with
p10-p90 and the figure minus the interpreter's start.

    .venv/bin/python -m bench.mcp_start [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import BATON, scratch_worktree, spread, start_resident, use_scratch_home

MESSAGES = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]


def session(cwd: Path, env: dict) -> tuple[float, float]:
    """Milliseconds to the answer to initialize, and to the answer to tools/list."""
    started = time.perf_counter()
    server = subprocess.Popen([str(BATON), "mcp"], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(MESSAGES[0]).encode() + b"\n")
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 1
    initialized = (time.perf_counter() - started) * 1000
    server.stdin.write(b"".join(json.dumps(message).encode() + b"\n" for message in MESSAGES[1:]))
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 2
    listed = (time.perf_counter() - started) * 1000
    server.stdin.close()
    server.wait(30)
    return initialized, listed


def interpreter() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as scratch:
        use_scratch_home(Path(scratch))
        cwd = scratch_worktree(Path(scratch))
        home = Path(os.environ["BATON_HOME"])
        subprocess.run([str(BATON), "list"], cwd=cwd, check=True, capture_output=True)  # the data home made
        lanes = {"without the resident": {**os.environ, "BATON_RESIDENT": "off"},
                 "through the resident": {**os.environ, "BATON_RESIDENT": "on"}}
        resident = start_resident(home)
        try:
            for lane, env in lanes.items():
                session(cwd, env)  # the page cache warmed
                floor, initialize, tools = [], [], []
                for _ in range(args.repeat):
                    floor.append(interpreter())
                    first, second = session(cwd, env)
                    initialize.append(first)
                    tools.append(second)
                base = spread(floor)[0]
                print(f"{lane}: python -c pass {base:.0f} ms")
                for name, samples in (("initialize", initialize), ("tools/list", tools)):
                    median, low, high = spread(samples)
                    print(f"  {name:10} {median:6.0f} ms (p10 {low:.0f}, p90 {high:.0f}), "
                          f"+{median - base:.0f} ms over the interpreter, {median / base:.1f}x")
        finally:
            resident.terminate()
            resident.wait(30)


if __name__ == "__main__":
    main()
