"""What the benches share: the figures' spread, timed fresh processes, scratch git
repositories, the hooks' payloads and the resident process they start.

Only the standard library is imported here, so a bench that runs outside Baton's
environment (bench/peers.py --setup) can import it too."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATON = Path(sys.prefix) / "bin" / "baton"  # the console script, as an agent runs it
CLI = [sys.executable, "-m", "baton.skills.frontends.cli"]  # the same commands without the console script
HOOK_FIXTURES = ROOT / "tests" / "fixtures" / "claude_hooks"
GIT_AUTHOR = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e",
              "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"}


def spread(samples: list[float]) -> tuple[float, float, float]:
    """(median, p10, p90) of the samples."""
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return statistics.median(ordered), pick(0.1), pick(0.9)


def timed_calls(call: Callable[[], object], repeat: int, before: Callable[[], object] = lambda: None) -> list[float]:
    """Milliseconds of `repeat` calls in this process; before() runs ahead of each, untimed."""
    samples = []
    for _ in range(repeat):
        before()
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def in_turns(calls: dict[str, Callable[[], object]], repeat: int,
             clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Milliseconds of `repeat` calls of each in this process, one of each in turn so that the
    machine's load falls on all alike, by clock (time.process_time: the CPU they take)."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            began = clock()
            call()
            samples[name].append((clock() - began) * 1000)
    return samples


def run_ms(command: list[str], cwd: Path, *, env: dict | None = None, stdin: str = "", quiet: bool = False) -> float:
    """Milliseconds of one fresh process, which must exit 0 (quiet: and write nothing on stderr)."""
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0 or (quiet and result.stderr):
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-500:]}")
    return elapsed


def fresh_runs(command: list[str], cwd: Path, repeat: int, *, env: dict | None = None,
               stdin: Callable[[], str] = lambda: "", quiet: bool = False) -> list[float]:
    """Milliseconds of `repeat` fresh processes (run_ms), stdin() fed to each; one run more
    first, not counted, warms the page cache."""
    return [run_ms(command, cwd, env=env, stdin=stdin(), quiet=quiet) for _ in range(repeat + 1)][1:]


def git(cwd: Path, *args: str) -> str:
    """git's output; a commit is authored by a fixed name, whatever this machine's settings."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_AUTHOR}).stdout


def scratch_worktree(root: Path) -> Path:
    """A git worktree with an origin, as an agent's would be."""
    worktree = root / "shop"
    worktree.mkdir()
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    subprocess.run(["git", "-C", str(worktree), "remote", "add", "origin", "git@github.com:acme/shop.git"], check=True)
    return worktree


def hook_payload(name: str, cwd: Path, *, file: Path | None = None, session: str = "bench-session") -> str:
    """A documented Claude Code hook payload (tests/fixtures/claude_hooks) for cwd and session;
    file: the path an Edit or Write tool call wrote."""
    event = json.loads((HOOK_FIXTURES / f"{name}.json").read_text())
    event["cwd"], event["session_id"] = str(cwd), session
    if file is not None:
        event["tool_input"]["file_path"] = event["tool_response"]["filePath"] = str(file)
    return json.dumps(event)


def use_scratch_home(root: Path) -> None:
    """This process's environment, and its children's, on an embedded data home under root:
    no server configured, no ticket named, the resident off (a bench starts it itself)."""
    os.environ.update({"BATON_HOME": str(root / "home"), "BATON_RESIDENT": "off", "BATON_STORE_TIMEOUT": "5"})
    for name in ("BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP", "BATON_QDRANT_URL",
                 "BATON_CONFIG", "BATON_TASK_ID"):
        os.environ.pop(name, None)


def start_resident(home: Path, env: dict | None = None, baton: Path = BATON) -> subprocess.Popen:
    """A resident for home (env: its environment, else this process's; baton: the console
    script to run it with), answering before it returns."""
    process = subprocess.Popen([str(baton), "resident"], env={**(os.environ if env is None else env),
                                                              "BATON_RESIDENT": "on"},
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (home / "resident.sock").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the resident did not start: {process.stderr.read().decode() if process.stderr else ''}")
        time.sleep(0.05)
    return process
