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
Each round runs the same commands on another new data home with no background work at all
(BATON_RESIDENT and BATON_BACKGROUND_INDEXING off), in turns: what the background costs them.
`python -c pass` runs in turns with them, once before each timed command, so the machine's
load weighs on the floor and the commands alike. Prints medians with p10-p90 beside the
floor and the target, interpreter + 250, + 150 and + 100 ms (issue 46).

    .venv/bin/python -m bench.first_commands [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import BATON, ROOT, run_ms, scratch_worktree, spread

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
    """Whether a background indexer of home runs (started, or holding its lock)."""
    from baton.skills.core.indexing import indexer_running

    marker = f"BATON_HOME={home}".encode() + b"\0"
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"index\0--background" in (entry / "cmdline").read_bytes() \
                    and marker in (entry / "environ").read_bytes():
                return True
        except OSError:
            continue
    return indexer_running(home)


def one_round(scratch: Path, n: int, samples: dict[str, list[float]], quiet: dict[str, list[float]],
              floors: list[float]) -> int:
    """One new data home's measures, and the same commands on another with no background
    work at all (the resident and the indexer off), the two in turns; 1 when the second
    decide met the indexer at work."""
    met = 0
    for background in (n % 2 == 0, n % 2 == 1):
        met += sequence(scratch / f"round{n}-{background}", background, samples if background else quiet,
                        floors if background else [])
    return met


def sequence(root: Path, background: bool, kept: dict[str, list[float]], floors: list[float]) -> bool:
    """The commands on a new data home at root; whether the second decide met the indexer."""
    root.mkdir()
    worktree = scratch_worktree(root)
    home = root / "home"
    switch = "on" if background else "off"
    env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT_IDLE": "1", "BATON_STORE_TIMEOUT": "5",
           "BATON_RESIDENT": switch, "BATON_BACKGROUND_INDEXING": switch}
    for name in ("BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP", "BATON_QDRANT_URL",
                 "BATON_CONFIG", "BATON_TASK_ID"):
        env.pop(name, None)

    def timed(key: str, *args: str) -> None:
        floors.append(floor(worktree))
        kept[key].append(run_ms([str(BATON), *args], worktree, env=env))

    first = [("bind", "OMN-1")] + [("decide", f"decision {k}: keep the queue in PostgreSQL") for k in range(4)]
    for name, args in zip(FIRST, first, strict=True):
        timed(f"new data home, {name}", *args)
    gone(home / "resident.sock")  # it leaves after a second without a command
    later = [("touch", "src/app.py"), ("decide", "after idle: retry with backoff"), ("resume", "OMN-1")]
    for name, args in zip(AFTER_IDLE, later, strict=True):
        timed(f"after idle, {name}", *args)
    until = time.monotonic() + 120
    while background and not (home / "resident.sock").exists() and time.monotonic() < until:
        time.sleep(0.05)
    run_ms([str(BATON), "decide", "warm: the indexer starts on this one"], worktree, env=env)
    met = background and indexing(home)
    timed("decide after decide", "decide", "while the indexer embeds the one before")
    gone(home / "resident.sock")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {key: [] for key in TARGETS}
    quiet: dict[str, list[float]] = {key: [] for key in TARGETS}
    floors: list[float] = []
    met = 0
    # As installed: the commands import compiled modules. With PYTHONDONTWRITEBYTECODE set and a
    # module's cached bytecode stale, each fresh command compiled it again (about 0.1 s of a bind).
    folders = ("baton", "registry", "graph", "recall", "signals", "skills")
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / folder) for folder in folders)],
                   check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="bench-first-") as scratch:
        for n in range(args.rounds):
            met += one_round(Path(scratch), n, samples, quiet, floors)
    base, low, high = spread(floors)
    print(f"{'each command, fresh data homes':32} {'median':>8} {'p10-p90':>11} {'max':>7} {'target':>7} "
          f"{'over floor':>10} {'no background':>13}")
    print(f"{'python -c pass (the floor)':32} {base:8.1f} {f'{low:.0f}-{high:.0f}':>11} {max(floors):7.0f}")
    for key, samples_ms in samples.items():
        median, low, high = spread(samples_ms)
        print(f"{key:32} {median:8.1f} {f'{low:.0f}-{high:.0f}':>11} {max(samples_ms):7.0f} "
              f"{base + TARGETS[key]:7.0f} {median - base:+10.1f} {spread(quiet[key])[0]:13.1f}")
    print(f"\nms over {args.rounds} rounds; target = floor + 250 (new data home), + 150 (after idle), + 100 "
          f"(decide after decide); no background: the same commands with the resident and the indexer off; the "
          f"second decide met the indexer at work in {met} of {args.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
