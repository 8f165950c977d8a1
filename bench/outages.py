"""What a server that is down costs a command, beside the same command with that server
not configured (every store embedded), measured in turns in the same run.

One server down at a time (PostgreSQL, the Bolt server, Qdrant over http, Kafka), stalled (a
socket that accepts and never answers) and refused (nothing listens), both from
tests/servers/outage.py, every other store embedded. Each command an agent runs is a fresh
process, timed in turns with the same command on the embedded stores, and the medians
(p10-p90) are printed beside their bounds (issue 46):

  - baton resume, the server stalled or refused and not yet known to be down (the health
    record emptied first): at most BATON_STORE_TIMEOUT + 0.3 s over the same resume with the
    server not configured;
  - every command an agent runs (resume, list, decide, the session-start and post-tool-use
    hooks) once the health record knows the server is down: at most 30 ms over the same
    command with the server not configured.

BATON_STORE_TIMEOUT is 2 s and the background delivery and indexer are off, so only the
command itself is measured; Python's bytecode is cached, as an installed Baton runs (the
first run of each figure is not counted). No server has to run: the outage is what is
measured.

Each command runs in a process of its own (BATON_RESIDENT=off), or with `--resident` as the
default configuration runs it: handed to a resident process (started for each server and
stopped after it), which forks a child per command with Baton's modules already loaded.

With `--healthy` it also starts PostgreSQL, Neo4j and Kafka (tests/servers) and compares, for
each server on a history written through it, a resume with the server answering against a
resume once the health record knows it is down (the same URL's port then refused): a server
known to be down may cost at most 10% more than that server healthy. Qdrant has no server
here; its healthy figure is qdrant-client's local mode, the same client calls on a file.

    .venv/bin/python -m bench.outages [--repeat 7] [--servers Bolt Kafka] [--resident] [--healthy]
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
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from bench.common import git, hook_payload, spread, start_resident
from tests.servers.outage import REFUSE, STALL, Outage

BATON = Path(sys.prefix) / "bin" / "baton"
TASK = "BENCH-1"
SESSION = "bench-outages"
SERVERS = {  # the setting, and its URL for a port
    "PostgreSQL": ("BATON_DATABASE_URL", "postgresql://baton@127.0.0.1:{port}/baton"),
    "Bolt": ("BATON_GRAPH_URL", "bolt://127.0.0.1:{port}"),
    "Qdrant": ("BATON_QDRANT_URL", "http://127.0.0.1:{port}"),
    "Kafka": ("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:{port}"),
}
KNOWN_DOWN_OVER_HEALTHY = 1.10  # a server known to be down costs at most this much of it healthy
STORE_TIMEOUT = 2.0  # BATON_STORE_TIMEOUT in this bench
NOT_KNOWN_OVER = (STORE_TIMEOUT + 0.3) * 1000  # ms a stalled or refused server may add to a resume
KNOWN_DOWN_OVER = 30  # ms a server known to be down may add to any command


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


def timed(command: list[str], cwd: Path, env: dict, repeat: int, *, stdin=lambda: "", before=lambda: None,
          codes=(0,)) -> list[float]:
    """Milliseconds per fresh process; before() runs ahead of each, untimed. The first run
    warms the page cache and the bytecode cache and is not counted."""
    return in_turns({"": (env, before, codes)}, command, cwd, repeat, stdin=stdin)[""]


def in_turns(contenders: dict[str, tuple[dict, Callable[[], object], tuple[int, ...]]], command: list[str],
             cwd: Path, repeat: int, *, stdin: Callable[[], str] = lambda: "") -> dict[str, list[float]]:
    """Milliseconds per fresh process of the command for each contender (its environment,
    what runs ahead of each of its runs, untimed, and the exit codes it may end with), the
    contenders taking turns so that the machine's load weighs on each alike. The first
    round warms the page and bytecode caches and is not counted."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat + 1):
        for name, (env, before, codes) in contenders.items():
            before()
            body = stdin()
            started = time.perf_counter()
            result = subprocess.run(command, cwd=cwd, env=env, input=body, capture_output=True, text=True)
            samples[name].append((time.perf_counter() - started) * 1000)
            if result.returncode not in codes:
                raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr[-500:]}")
    return {name: runs[1:] for name, runs in samples.items()}


def found_down(home: Path, server: str) -> dict:
    """The health record the last resume wrote: what it found down."""
    try:
        return json.loads((home / "server-health.json").read_text())["servers"]
    except FileNotFoundError:
        raise SystemExit(f"the resume did not record {server} down: a server that had less than a fair share of "
                         "the budget is not recorded (baton.budget.FAIR_WAIT); rerun on a quieter machine") from None


Row = tuple[str, str, list[float], list[float], float]  # case, command, samples, floor's samples, allowed over it


def bench_server(server: str, pristine: Path, home: Path, worktree: Path, env: dict, repeat: int) -> list[Row]:
    """The server stalled, then refused, then known to be down, each command in turns with
    the same command with the server not configured."""
    from baton.health import HealthRecord

    shutil.rmtree(home)
    shutil.copytree(pristine, home)
    outage = Outage(None, mode=STALL)
    setting, url = SERVERS[server]
    down_env = {**env, setting: url.format(port=outage.port)}
    resident = start_resident(home, env) if env["BATON_RESIDENT"] == "on" else None
    record = home / "server-health.json"
    codes = (3,) if server == "PostgreSQL" else (0,)  # no registry: resume and list exit 3
    forget = lambda: record.unlink(missing_ok=True)  # noqa: E731
    resume = [str(BATON), "resume", TASK]
    rows: list[Row] = []
    try:
        for mode in (STALL, REFUSE):
            outage.switch(mode)
            runs = in_turns({"down": (down_env, forget, codes), "floor": (env, lambda: None, (0,))}, resume, worktree,
                            repeat)
            rows.append((f"{server} {'stalled' if mode == STALL else 'refused'}", "resume", runs["down"],
                         runs["floor"], NOT_KNOWN_OVER))
        recorded = found_down(home, server)
        health = HealthRecord(home, recheck_after=30)

        def known_down() -> None:
            for server_name, down in recorded.items():
                health.mark_down(server_name, down["reason"])

        start = hook_payload("session_start_startup", worktree, session=SESSION)
        edits = iter(range(10**6))

        def edit() -> str:
            return hook_payload("post_tool_use_edit", worktree, file=worktree / "src" / f"e{next(edits)}.py",
                                session=SESSION)

        for command, args, stdin, exits in (
                ("resume", ["resume", TASK], lambda: "", codes), ("list", ["list"], lambda: "", codes),
                ("decide", ["decide", "Keep the cart total in the read model"], lambda: "", (0,)),
                ("session-start hook", ["hook", "session-start"], lambda: start, (0,)),
                ("post-tool-use hook", ["hook", "post-tool-use"], edit, (0,))):
            runs = in_turns({"down": (down_env, known_down, exits), "floor": (env, lambda: None, (0,))},
                            [str(BATON), *args], worktree, repeat, stdin=stdin)
            rows.append((f"{server} known down", command, runs["down"], runs["floor"], KNOWN_DOWN_OVER))
    finally:
        outage.close()
        if resident is not None:
            resident.terminate()
            resident.wait(30)
    return rows


def healthy_urls(stack: ExitStack, root: Path, servers: list[str]) -> dict[str, str]:
    """Each server's URL with a real server behind it, started here and stopped by stack."""
    from tests.servers.kafka import KafkaServer
    from tests.servers.neo4j import Neo4jServer
    from tests.servers.postgres import PostgresServer

    urls = {}
    started = time.perf_counter()
    if "PostgreSQL" in servers:
        postgres = PostgresServer()
        stack.callback(postgres.destroy)
        urls["PostgreSQL"] = postgres.start().url
    if "Bolt" in servers:
        neo4j = Neo4jServer()
        stack.callback(neo4j.destroy)
        urls["Bolt"] = neo4j.start().uri
    if "Kafka" in servers:
        kafka = KafkaServer()
        stack.callback(kafka.destroy)
        urls["Kafka"] = kafka.start().bootstrap
    if "Qdrant" in servers:
        urls["Qdrant"] = f"file://{root / 'qdrant-local'}"
    print(f"servers started in {time.perf_counter() - started:.1f} s")
    return urls


def bench_known_down(server: str, url: str, root: Path, env: dict, repeat: int) -> tuple[list[float], list[float]]:
    """(healthy, known down): resumes of a history written through the server while it
    answers, then with its port refused and the health record saying so."""
    setting = SERVERS[server][0]
    home = root / f"healthy-{server}"
    scratch = root / f"healthy-{server}-tree"
    scratch.mkdir()
    healthy_env = {**env, "BATON_HOME": str(home), setting: url}
    worktree = build(scratch, healthy_env)
    resume = [str(BATON), "resume", TASK]
    resident = start_resident(home, healthy_env) if env["BATON_RESIDENT"] == "on" else None
    try:
        healthy = timed(resume, worktree, healthy_env, repeat)
    finally:
        if resident is not None:
            resident.terminate()
            resident.wait(30)
    outage = Outage(None, mode=REFUSE)
    down_env = {**healthy_env, setting: SERVERS[server][1].format(port=outage.port)}
    codes = (3,) if server == "PostgreSQL" else (0,)
    resident = start_resident(home, down_env) if env["BATON_RESIDENT"] == "on" else None
    try:
        subprocess.run(resume, cwd=worktree, env=down_env, capture_output=True)  # records the outage
        from baton.health import HealthRecord

        health = HealthRecord(home, recheck_after=30)
        recorded = found_down(home, server)

        def known_down() -> None:
            for name, down in recorded.items():
                health.mark_down(name, down["reason"])

        down = timed(resume, worktree, down_env, repeat, codes=codes, before=known_down)
    finally:
        outage.close()
        if resident is not None:
            resident.terminate()
            resident.wait(30)
    return healthy, down


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per figure (default 7)")
    parser.add_argument("--servers", nargs="+", choices=list(SERVERS), default=list(SERVERS),
                        help="the servers to take down, one at a time (default: each)")
    parser.add_argument("--resident", action="store_true",
                        help="hand each command to a resident process, as the default configuration does")
    parser.add_argument("--healthy", action="store_true",
                        help="start the servers and compare a known-down resume with the server healthy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-bench-outages-") as scratch:
        root = Path(scratch)
        home, pristine = root / "home", root / "pristine"
        env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "off", "BATON_BACKGROUND_DELIVERY": "off",
               "BATON_BACKGROUND_INDEXING": "off"}
        for name in ("BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP", "BATON_QDRANT_URL",
                     "BATON_CONFIG", "BATON_TASK_ID", "BATON_RECHECK_AFTER", "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        env["BATON_STORE_TIMEOUT"] = f"{STORE_TIMEOUT:g}"
        worktree = build(root, env)
        shutil.copytree(home, pristine)
        baseline = timed([sys.executable, "-c", "pass"], worktree, env, max(args.repeat, 10))
        if args.resident:
            env["BATON_RESIDENT"] = "on"
        median, low, high = spread(baseline)
        print(f"python -c pass: {median:.1f} ms ({low:.1f}-{high:.1f}); BATON_STORE_TIMEOUT={STORE_TIMEOUT:g} s; "
              f"each command {'through a resident' if args.resident else 'a fresh process'}\n")
        print(f"{'case':22} {'command':19} {'median ms':>10} {'p10-p90 ms':>16} {'not configured':>15} "
              f"{'over it':>8} {'bound':>8}")
        over = []
        for server in args.servers:
            for case, command, samples, floor, allowed in bench_server(server, pristine, home, worktree, env,
                                                                        args.repeat):
                median, low, high = spread(samples)
                added = median - statistics.median(floor)
                if added > allowed:
                    over.append(f"{case}: {command}")
                print(f"{case:22} {command:19} {median:10.1f} {f'{low:.1f}-{high:.1f}':>16} "
                      f"{statistics.median(floor):15.1f} {added:+8.1f} {f'+{allowed:g}':>8}")
        print("\nevery median within its bound" if not over else f"\nOVER THE BOUND: {'; '.join(over)}")
        if args.healthy:
            over = []
            print(f"\n{'server':12} {'resume healthy ms':>18} {'known down ms':>14} {'ratio':>6}  (target <= "
                  f"{KNOWN_DOWN_OVER_HEALTHY:.2f})")
            with ExitStack() as stack:
                urls = healthy_urls(stack, root, args.servers)
                for server in args.servers:
                    healthy, down = bench_known_down(server, urls[server], root, env, args.repeat)
                    ratio = statistics.median(down) / statistics.median(healthy)
                    if ratio > KNOWN_DOWN_OVER_HEALTHY:
                        over.append(server)
                    print(f"{server:12} {statistics.median(healthy):18.1f} {statistics.median(down):14.1f} "
                          f"{ratio:6.2f}")
            print("\nevery known-down server within its target" if not over
                  else f"\nOVER TARGET: {', '.join(over)}")


if __name__ == "__main__":
    main()
