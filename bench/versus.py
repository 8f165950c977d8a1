"""Baton now against an earlier revision of itself, on the same data and in the same run:
what a refactoring cost the paths an agent pays for on every step.

Both revisions (`--before`, default ca53b0f, the tree issue 25 reviewed, and `--after`,
default HEAD: what is committed) are taken from git into scratch folders, each with an
interpreter of its own that shares this environment's dependencies and with its modules
compiled, so the two differ only in Baton's code (not in how it is installed: an editable
install's finder and modules edited since the last compile would cost the working tree). Each builds the same
data home through its own CLI (two worktrees of a repository, a ticket with history,
`--sessions` other active tickets, one sharing a file), then both are timed in turns, the
order swapped every round so neither gains from a warm cache:
  - `baton touch` and the post-tool-use hook, fresh processes without the resident and
    through it (as agents run them by default),
  - the stop hook through the resident,
  - `baton resume` (recall included), a fresh process without the resident and through it.
Each side's resident is started (and answering) before the first round.
Prints each side's median with p10-p90 and the ratio now / before (below 1: faster now),
and beside them the median CPU time of the same runs and its ratio (through the resident,
the client's CPU only), steadier than the wall time on a loaded machine.
With --projector it then runs each revision's own projector bench on fresh servers
(PostgreSQL, Neo4j, Kafka), --projector-rounds times in turns, and prints their rates,
each beside its floor, then the median of each side's and their ratio. A revision whose
projector repairs the stores when it starts (issue 23) leaves that repair out of its rate
and prints its seconds on the same line: it is paid once per start, over the tickets of
the repair window, whatever the events.

    .venv/bin/python -m bench.versus [--before ca53b0f] [--after HEAD] [--repeat 15] [--sessions 100] [--projector]
        [--events 2000] [--projector-rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import BATON, ROOT, git, hook_payload, run_ms, spread, start_resident

TASK, OTHER = "BENCH-1", "BENCH-2"
STORE_FOLDERS = ("registry", "graph", "recall", "signals", "skills")  # mapped into baton.* as pyproject does


@dataclass(frozen=True)
class Side:
    label: str
    python: Path
    baton: Path
    home: Path
    main: Path  # the worktree of the ticket with history


def install(revision: str, scratch: Path) -> tuple[Path, Path]:
    """(python, baton) for Baton at revision: its tree from git with the baton.* packages
    linked as pyproject maps them, an interpreter whose path holds that tree and this
    environment's dependencies, and a console script written as pip writes ours."""
    tree, venv = scratch / "tree", scratch / "venv"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for folder in STORE_FOLDERS:
        (tree / "baton" / folder).symlink_to(tree / folder, target_is_directory=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "baton-before.pth").write_text(f"{tree}\n{sysconfig.get_paths()['purelib']}\n")
    script = BATON.read_text().splitlines()
    baton = venv / "bin" / "baton"
    baton.write_text("\n".join([f"#!{python}", *script[1:]]) + "\n")
    baton.chmod(0o755)
    packages = [str(tree / folder) for folder in ("baton", *STORE_FOLDERS)]
    subprocess.run([str(python), "-m", "compileall", "-q", *packages], check=True, capture_output=True)
    return python, baton


def build(side_root: Path, python: Path, baton: Path, label: str, sessions: int) -> Side:
    """The data home, through this side's own CLI (through its resident, to be quick)."""
    home, main, second = side_root / "home", side_root / "shop", side_root / "shop-second"
    main.mkdir(parents=True)
    git(main, "init", "-q", "-b", "main")
    git(main, "remote", "add", "origin", "git@github.com:acme/shop.git")
    git(main, "commit", "-q", "--allow-empty", "-m", "init")
    git(main, "worktree", "add", "-q", str(second), "-b", "second")
    side = Side(label, python, baton, home, main)
    resident = start_resident(home, environment(side, resident=True), baton=baton)
    try:
        run = lambda cwd, *args: subprocess.run([str(baton), *args], cwd=cwd, check=True,  # noqa: E731
                                                capture_output=True, env=environment(side, resident=True))
        run(main, "bind", TASK, "--agent", "claude")
        run(main, "touch", *[f"src/f{i}.py" for i in range(200)], "src/db.py")
        for text in ("Keep carts in PostgreSQL, not Redis", "Use optimistic locking on the cart row",
                     "Expose cart totals through a read model"):
            run(main, "decide", text, "--context", "carts must survive restarts")
        run(main, "update", "--phase", "implementing", "--next", "write the migration", "--failed", "sqlite migration")
        for n in range(sessions):
            run(second, "bind", f"T-{n}")
            run(second, "touch", *[f"lib/m{(n * 20 + i) % (sessions * 10)}.py" for i in range(20)])
        run(second, "bind", OTHER)
        run(second, "touch", "src/db.py")
        run(second, "decide", "Lock cart rows optimistically")
        run(main, "index")
    finally:
        resident.terminate()
        resident.wait(timeout=60)
    return side


def environment(side: Side, *, resident: bool) -> dict[str, str]:
    return {**os.environ, "BATON_HOME": str(side.home), "BATON_RESIDENT": "on" if resident else "off",
            "BATON_BACKGROUND_DELIVERY": "off"}


Case = tuple[str, list[str], Callable[[Side], str], bool]  # label, arguments, stdin, through the resident


def cases() -> list[Case]:
    edit = lambda side: hook_payload("post_tool_use_edit", side.main, file=side.main / "src" / "f7.py")  # noqa: E731
    stop = lambda side: hook_payload("stop", side.main)  # noqa: E731
    nothing = lambda side: ""  # noqa: E731
    return [
        ("baton touch, fresh process", ["touch", "src/f8.py"], nothing, False),
        ("baton touch, through the resident", ["touch", "src/f8.py"], nothing, True),
        ("post-tool-use hook (Edit), fresh process", ["hook", "post-tool-use"], edit, False),
        ("post-tool-use hook (Edit), through the resident", ["hook", "post-tool-use"], edit, True),
        ("stop hook, through the resident", ["hook", "stop"], stop, True),
        ("baton resume, fresh process (recall included)", ["resume", TASK], nothing, False),
        ("baton resume, through the resident", ["resume", TASK], nothing, True),
    ]


Samples = dict[str, list[tuple[float, float]]]  # per side: (wall ms, CPU ms) of each run


def timed(sides: list[Side], repeat: int) -> list[tuple[str, Samples]]:
    """Each case's wall and CPU milliseconds per side; the sides take turns, swapped every
    round. CPU is the process's user and system time (through the resident, the client's
    only): on a loaded machine it varies less than the wall time."""
    results: list[tuple[str, Samples]] = [(label, {side.label: [] for side in sides}) for label, *_ in cases()]
    for round_ in range(repeat + 1):  # the first round warms the page cache and is not counted
        order = sides if round_ % 2 else sides[::-1]
        for (_, args, stdin, resident), (_, samples) in zip(cases(), results, strict=True):
            for side in order:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                ms = run_ms([str(side.baton), *args], side.main, env=environment(side, resident=resident),
                            stdin=stdin(side))
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
                if round_:
                    samples[side.label].append((ms, cpu))
    return results


def projector_lines(before_tree: Path, before_python: Path, events: int, runs: int, rounds: int) -> list[str]:
    """Each revision's projector rate beside its floor (the line after the servers' start),
    `rounds` times in turns, the order swapped every round; then the median of each side's
    rates and their ratio. Fresh servers each time: one start's rate can differ from the
    next one's by a sixth on this machine class, so one bench a side settles nothing."""
    sides = [("before", [str(before_python), "bench/projector.py"], before_tree),
             ("now", [sys.executable, "-m", "bench.projector"], ROOT)]  # the working tree's
    lines: list[str] = []
    rates: dict[str, list[float]] = {"before": [], "now": []}
    for round_ in range(rounds):
        for label, command, cwd in sides[::-1] if round_ % 2 else sides:
            result = subprocess.run([*command, "--events", str(events), "--runs", str(runs), "--top", "1"], cwd=cwd,
                                    capture_output=True, text=True)
            if result.returncode:
                raise SystemExit(f"the {label} projector bench failed: {result.stderr[-800:]}")
            rate = next(line for line in result.stdout.splitlines() if line.startswith("projector into"))
            lines.append(f"{label:>6}: {rate}")
            found = re.search(r"([\d,]+) events/s", rate)
            assert found is not None, rate
            rates[label].append(float(found.group(1).replace(",", "")))
    before, now = (statistics.median(rates[label]) for label in ("before", "now"))
    lines.append(f"median of {rounds} rounds: before {before:,.0f} events/s, now {now:,.0f}, "
                 f"now/before {now / before:.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="ca53b0f", help="the git revision to compare with (default ca53b0f)")
    parser.add_argument("--after", default="HEAD", help="the revision to compare (default HEAD)")
    parser.add_argument("--repeat", type=int, default=15, help="rounds per figure (default 15)")
    parser.add_argument("--sessions", type=int, default=100, help="other active tickets (default 100)")
    parser.add_argument("--projector", action="store_true", help="also each revision's projector bench")
    parser.add_argument("--events", type=int, default=2000, help="events per projector run (default 2000)")
    parser.add_argument("--projector-rounds", type=int, default=3,
                        help="each revision's projector bench, in turns (default 3)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="baton-bench-versus-") as scratch_name:
        scratch = Path(scratch_name)
        before_python, before_baton = install(args.before, scratch / "before")
        now_python, now_baton = install(args.after, scratch / "now")
        sides = [build(scratch / "data-before", before_python, before_baton, f"before ({args.before})", args.sessions),
                 build(scratch / "data-now", now_python, now_baton, f"now ({args.after})", args.sessions)]
        residents = [start_resident(side.home, environment(side, resident=True), baton=side.baton) for side in sides]
        try:
            results = timed(sides, args.repeat)
        finally:
            for resident in residents:
                resident.terminate()
                resident.wait(timeout=60)
        print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
        print(f"{'':52} {'before ms':>10} {'now ms':>10} {'now/before':>10}   now p10-p90"
              f"   {'CPU before':>10} {'CPU now':>8} {'now/before':>10}")
        for label, samples in results:
            (before, _, _), (now, low, high) = (spread([wall for wall, _ in samples[side.label]]) for side in sides)
            cpu_before, cpu_now = (statistics.median(cpu for _, cpu in samples[side.label]) for side in sides)
            print(f"{label:52} {before:10.1f} {now:10.1f} {now / before:10.2f}   {low:.1f}-{high:.1f}"
                  f"   {cpu_before:10.1f} {cpu_now:8.1f} {cpu_now / cpu_before:10.2f}")
        if args.projector:
            print("\nprojector, each revision's own bench on fresh servers "
                  f"(--events {args.events} --runs 3), {args.projector_rounds} rounds in turns:")
            print("\n".join(projector_lines(scratch / "before" / "tree", before_python, args.events, 3,
                                             args.projector_rounds)))


if __name__ == "__main__":
    main()
