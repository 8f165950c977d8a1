"""What a user meets first: the commands of a new data home, those after the resident left on
idle, and a `decide` right after another while the background indexer embeds the first.

Each round makes a new data home and worktree and runs, through the console script as an
agent does (the resident on, the default):
- the first five commands of the new data home (`baton bind`, then four `baton decide`),
  back to back: the first starts the resident, the first decide the background indexer;
- after the resident left on idle (BATON_RESIDENT_IDLE=1, waited out): `baton touch`,
  `baton decide` and `baton resume`, each a fresh process while the new resident starts;
- through the warm resident: a `decide`, then a second at once, timed, while the indexer
  started by the first embeds it (the rounds where it did are counted).
`python -c pass` runs in turns with them, once before each timed command, so the machine's
load weighs on the floor and the commands alike. Prints medians with p10-p90 beside the
floor and the target, interpreter + 250, + 150 and + 100 ms (issue 46).

    .venv/bin/python -m bench.first_commands [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.common import BATON, run_ms, scratch_worktree, spread

FIRST = ["1 bind", "2 decide", "3 decide", "4 decide", "5 decide"]
AFTER_IDLE = ["touch", "decide", "resume"]
TARGETS = {**{f"new data home, {name}": 250.0 for name in FIRST},
           **{f"after idle, {name}": 150.0 for name in AFTER_IDLE}, "decide after decide": 100.0}


def floor(cwd: Path) -> float:
    return run_ms([sys.executable, "-c", "pass"], cwd)


def gone(path: Path, wait: float = 60.0) -> None:
    """Wait until path (the resident's socket) is gone."""
    until = time.monotonic() + wait
    while path.exists():
        if time.monotonic() > until:
            raise SystemExit(f"{path} stayed")
        time.sleep(0.05)


def indexing(home: Path) -> bool:
    """Whether a background indexer holds its lock."""
    from baton.skills.core.indexing import indexer_running

    return indexer_running(home)


def one_round(scratch: Path, n: int, samples: dict[str, list[float]], floors: list[float]) -> int:
    """One new data home's measures; 1 when the second decide met the indexer at work."""
    root = scratch / f"round{n}"
    root.mkdir()
    worktree = scratch_worktree(root)
    home = root / "home"
    env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "on", "BATON_RESIDENT_IDLE": "1",
           "BATON_STORE_TIMEOUT": "5"}
    for name in ("BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP", "BATON_QDRANT_URL",
                 "BATON_CONFIG", "BATON_TASK_ID"):
        env.pop(name, None)

    def timed(key: str, *args: str) -> None:
        floors.append(floor(worktree))
        samples[key].append(run_ms([str(BATON), *args], worktree, env=env))

    first = [("bind", "OMN-1")] + [("decide", f"decision {k}: keep the queue in PostgreSQL") for k in range(4)]
    for name, args in zip(FIRST, first, strict=True):
        timed(f"new data home, {name}", *args)
    gone(home / "resident.sock")  # it leaves after a second without a command
    later = [("touch", "src/app.py"), ("decide", "after idle: retry with backoff"), ("resume", "OMN-1")]
    for name, args in zip(AFTER_IDLE, later, strict=True):
        timed(f"after idle, {name}", *args)
    until = time.monotonic() + 120
    while not (home / "resident.sock").exists() and time.monotonic() < until:
        time.sleep(0.05)
    run_ms([str(BATON), "decide", "warm: the indexer starts on this one"], worktree, env=env)
    met = indexing(home)
    timed("decide after decide", "decide", "while the indexer embeds the one before")
    gone(home / "resident.sock")
    return int(met)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {key: [] for key in TARGETS}
    floors: list[float] = []
    met = 0
    with tempfile.TemporaryDirectory(prefix="bench-first-") as scratch:
        for n in range(args.rounds):
            met += one_round(Path(scratch), n, samples, floors)
    base, low, high = spread(floors)
    print(f"{'each command, fresh data homes, resident on':44} {'median':>8} {'p10-p90':>13} {'max':>8} "
          f"{'target':>8} {'over floor':>10}")
    print(f"{'python -c pass (the floor)':44} {base:8.1f} {f'{low:.0f}-{high:.0f}':>13} {max(floors):8.1f}")
    for key, samples_ms in samples.items():
        median, low, high = spread(samples_ms)
        print(f"{key:44} {median:8.1f} {f'{low:.0f}-{high:.0f}':>13} {max(samples_ms):8.1f} "
              f"{base + TARGETS[key]:8.1f} {median - base:+10.1f}")
    print(f"\nms over {args.rounds} rounds; target = floor + 250 (new data home), + 150 (after idle), + 100 "
          f"(decide after decide); the second decide met the indexer at work in {met} of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
