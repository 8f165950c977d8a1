"""What a server that is down costs a command: one bounded wait.

One server down at a time (PostgreSQL, the Bolt server, Qdrant over http, Kafka), refused
(nothing listens) and stalled (a socket that accepts and never answers; both from
tests/servers/outage.py), every other store embedded. Each command an agent runs is a fresh
process, timed, and the medians (p10-p90) are printed against their budgets beside
`python -c pass` measured in the same run:

  - baton resume, the server not yet known to be down (the health record emptied first): 2.5 s
  - baton resume, the health record already knows the server is down:                     0.3 s
  - the session-start hook:                                                                 1 s
  - the post-tool-use hook:                                                               100 ms
  - baton decide:                                                                         100 ms

BATON_STORE_TIMEOUT is left at its default (2 s) and the background delivery and indexer
are off, so only the command itself is measured; Python's bytecode is cached, as an installed Baton
runs (the first run of each figure is not counted). No server has to run: the outage is
what is measured.

Each command runs in a process of its own (BATON_RESIDENT=off), or with `--resident` as the
default configuration runs it: handed to a resident process (started for each outage and
stopped after it), which forks a child per command with Baton's modules already loaded.

    .venv/bin/python -m bench.outages [--repeat 7] [--servers Bolt Kafka] [--resident]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import start_resident
from tests.servers.outage import REFUSE, STALL, Outage

ROOT = Path(__file__).resolve().parent.parent
BATON = Path(sys.prefix) / "bin" / "baton"
FIXTURES = ROOT / "tests" / "fixtures" / "claude_hooks"
TASK = "BENCH-1"
SERVERS = {  # the setting, and its URL for a port
    "PostgreSQL": ("BATON_DATABASE_URL", "postgresql://baton@127.0.0.1:{port}/baton"),
    "Bolt": ("BATON_GRAPH_URL", "bolt://127.0.0.1:{port}"),
    "Qdrant": ("BATON_QDRANT_URL", "http://127.0.0.1:{port}"),
    "Kafka": ("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:{port}"),
}
BUDGETS = {"resume": 2500, "resume, known down": 300, "session-start hook": 1000, "post-tool-use hook": 100,
           "decide": 100}


def spread(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return statistics.median(ordered), pick(0.1), pick(0.9)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e",
                        "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@e"})


def build(root: Path, env: dict) -> Path:
    """A worktree bound to BENCH-1 with a history on the embedded stores."""
    worktree = root / "shop"
    worktree.mkdir()
    git(worktree, "init", "-q", "-b", "main")
    git(worktree, "remote", "add", "origin", "git@github.com:acme/shop.git")
    git(worktree, "commit", "-q", "--allow-empty", "-m", "init")
    for args in (["bind", TASK, "--agent", "claude"], ["touch", *[f"src/f{i}.py" for i in range(20)]],
                 ["decide", "Keep carts in PostgreSQL", "--context", "carts must survive restarts"],
                 ["update", "--phase", "implementing", "--next", "write the migration"]):
        subprocess.run([str(BATON), *args], cwd=worktree, env=env, check=True, capture_output=True)
    return worktree


def payload(name: str, cwd: Path, file: Path | None = None) -> str:
    event = json.loads((FIXTURES / f"{name}.json").read_text())
    event["cwd"], event["session_id"] = str(cwd), "bench-outages"
    if file is not None:
        event["tool_input"]["file_path"] = event["tool_response"]["filePath"] = str(file)
    return json.dumps(event)


def timed(command: list[str], cwd: Path, env: dict, repeat: int, *, stdin=lambda: "", before=lambda: None,
          codes=(0,)) -> list[float]:
    """Milliseconds per fresh process; before() runs ahead of each, untimed. The first run
    warms the page cache and the bytecode cache and is not counted."""
    samples = []
    for _ in range(repeat + 1):
        before()
        body = stdin()
        started = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, env=env, input=body, capture_output=True, text=True)
        samples.append((time.perf_counter() - started) * 1000)
        if result.returncode not in codes:
            raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr[-500:]}")
    return samples[1:]


def bench_outage(server: str, mode: str, pristine: Path, home: Path, worktree: Path, env: dict,
                 repeat: int) -> list[tuple[str, list[float]]]:
    from baton.health import HealthRecord

    shutil.rmtree(home)
    shutil.copytree(pristine, home)
    outage = Outage(None, mode=mode)
    setting, url = SERVERS[server]
    env = {**env, setting: url.format(port=outage.port)}
    resident = start_resident(home, env) if env["BATON_RESIDENT"] == "on" else None
    record = home / "server-health.json"
    codes = (3,) if server == "PostgreSQL" else (0,)  # no registry: resume exits 3
    resume = [str(BATON), "resume", TASK]
    try:
        rows = [("resume", timed(resume, worktree, env, repeat, codes=codes,
                                 before=lambda: record.unlink(missing_ok=True)))]
        recorded = json.loads(record.read_text())["servers"]  # what the last resume found down
        health = HealthRecord(home, recheck_after=30)

        def known_down() -> None:
            for server_name, down in recorded.items():
                health.mark_down(server_name, down["reason"])

        rows.append(("resume, known down", timed(resume, worktree, env, repeat, codes=codes, before=known_down)))
        rows.append(("session-start hook", timed([str(BATON), "hook", "session-start"], worktree, env, repeat,
                                                 stdin=lambda: payload("session_start_startup", worktree),
                                                 before=lambda: record.unlink(missing_ok=True))))
        edits = iter(range(10**6))
        rows.append(("post-tool-use hook", timed(
            [str(BATON), "hook", "post-tool-use"], worktree, env, repeat,
            stdin=lambda: payload("post_tool_use_edit", worktree, worktree / "src" / f"e{next(edits)}.py"),
            before=lambda: record.unlink(missing_ok=True))))
        rows.append(("decide", timed([str(BATON), "decide", "Keep the cart total in the read model"], worktree, env,
                                     repeat, before=lambda: record.unlink(missing_ok=True))))
    finally:
        outage.close()
        if resident is not None:
            resident.terminate()
            resident.wait(30)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per figure (default 7)")
    parser.add_argument("--servers", nargs="+", choices=list(SERVERS), default=list(SERVERS),
                        help="the servers to take down, one at a time (default: each)")
    parser.add_argument("--resident", action="store_true",
                        help="hand each command to a resident process, as the default configuration does")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-bench-outages-") as scratch:
        root = Path(scratch)
        home, pristine = root / "home", root / "pristine"
        env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "off", "BATON_BACKGROUND_DELIVERY": "off",
               "BATON_BACKGROUND_INDEXING": "off"}
        for name in ("BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP", "BATON_QDRANT_URL",
                     "BATON_CONFIG", "BATON_TASK_ID", "BATON_STORE_TIMEOUT", "BATON_RECHECK_AFTER",
                     "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        worktree = build(root, env)
        shutil.copytree(home, pristine)
        baseline = timed([sys.executable, "-c", "pass"], worktree, env, max(args.repeat, 10))
        # What a resume costs with every store embedded and answering: the floor of the
        # figures below (recall's libraries included).
        embedded = timed([str(BATON), "resume", TASK], worktree, env, max(args.repeat, 10))
        shutil.rmtree(home)
        shutil.copytree(pristine, home)
        if args.resident:
            env["BATON_RESIDENT"] = "on"
            resident = start_resident(home, env)
            try:
                served = timed([str(BATON), "resume", TASK], worktree, env, max(args.repeat, 10))
            finally:
                resident.terminate()
                resident.wait(30)
        print(f"{'server down':20} {'command':22} {'median ms':>10} {'p10-p90 ms':>16} {'budget':>9}")
        floors = [("python -c pass", baseline), ("resume, all embedded", embedded)]
        if args.resident:
            floors.append(("the same, resident", served))
        for label, samples in floors:
            median, low, high = spread(samples)
            print(f"{'(none)':20} {label:22} {median:10.1f} {f'{low:.1f}-{high:.1f}':>16}")
        over = []
        for server in args.servers:
            for mode in (REFUSE, STALL):
                label = f"{server} {'refused' if mode == REFUSE else 'stalled'}"
                for command, samples in bench_outage(server, mode, pristine, home, worktree, env, args.repeat):
                    median, low, high = spread(samples)
                    budget = BUDGETS[command]
                    if median > budget:
                        over.append(f"{label}: {command}")
                    print(f"{label:20} {command:22} {median:10.1f} {f'{low:.1f}-{high:.1f}':>16} {budget:>6} ms")
        print("\nevery median within its budget" if not over else f"\nOVER BUDGET: {'; '.join(over)}")


if __name__ == "__main__":
    main()
