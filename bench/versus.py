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
With --projector (or --projector-only) it then starts PostgreSQL, Neo4j and Kafka once and
runs each revision's projector on them (projector_lines): warm-up runs, then
--projector-rounds runs each in turns, each a process of the revision's own applying
--events new events. Prints every run's rate, the median of each side's and their ratio.
A revision whose projector repairs the stores when it starts (issue 23) leaves that repair
out of its rate: it is paid once per start, over the tickets of the repair window,
whatever the events.

    .venv/bin/python -m bench.versus [--before ca53b0f] [--after HEAD] [--repeat 15] [--sessions 100] [--projector]
        [--projector-only] [--events 5000] [--projector-warm-up 3] [--projector-rounds 8]
"""

from __future__ import annotations

import argparse
import os
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
    extra = scratch / "dependencies"  # what the revision declares and this environment no longer holds
    missing = _missing_dependencies(tree / "pyproject.toml")
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(extra), *missing], check=True)
    (site / "baton-before.pth").write_text(f"{tree}\n{sysconfig.get_paths()['purelib']}\n{extra}\n")
    script = BATON.read_text().splitlines()
    baton = venv / "bin" / "baton"
    baton.write_text("\n".join([f"#!{python}", *script[1:]]) + "\n")
    baton.chmod(0o755)
    packages = [str(tree / folder) for folder in ("baton", *STORE_FOLDERS)]
    subprocess.run([str(python), "-m", "compileall", "-q", *packages], check=True, capture_output=True)
    return python, baton


def _missing_dependencies(pyproject: Path) -> list[str]:
    """The revision's required dependencies (pyproject's project.dependencies) that this
    environment does not have installed, as pip takes them."""
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement

    missing = []
    for line in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        try:
            metadata.version(Requirement(line).name)
        except metadata.PackageNotFoundError:
            missing.append(line)
    return missing


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


# One projector run of a revision's own bench code (bench/throughput.py, a loose script
# before bench/ was a package) on the servers its environment names; prints the seconds
# the projection took (its start-up repair left out where the revision has one).
_PROJECTOR_RUN = """
import sys
from pathlib import Path
sys.path[:0] = ["bench", "."]
try:
    from bench.throughput import projector_run
except ImportError:
    from throughput import projector_run
from baton.skills.runtime.settings import Settings
root, name, count, warm = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
print(projector_run(root, Settings.from_env(), count, name, warm_up=warm)[1])
"""


def projector_lines(sides: list[tuple[str, Path, Path]], events: int, warm_up: int, rounds: int) -> list[str]:
    """Each revision's projector (sides: label, tree, interpreter) on one set of servers
    started here, each revision with a PostgreSQL database and a data home of its own and
    the Bolt server shared (their schemas agree, and each run's tickets are new): `warm_up`
    runs each first, then `rounds` in turns, the order swapped every round. Each run is a
    process of the revision's own that applies `events` new events (bench.throughput.
    projector_run). One set of warm servers for both: a fresh start's rate moves by a sixth
    from one start to the next, and a Bolt server's first runs are its slowest."""
    import psycopg

    from bench.throughput import fresh_servers

    rates: dict[str, list[float]] = {label: [] for label, _, _ in sides}
    with fresh_servers("versus") as (root, postgres, neo4j, kafka):
        environments = {}
        for n, (label, _, _) in enumerate(sides):
            database = f"side{n}"
            with psycopg.connect(postgres.url, autocommit=True) as conn:
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(database)))
            environments[label] = {**os.environ, "BATON_HOME": str(root / f"home{n}"),
                                   "BATON_DATABASE_URL": postgres.url_for(database), "BATON_GRAPH_URL": neo4j.uri,
                                   "BATON_KAFKA_BOOTSTRAP": kafka.bootstrap, "BATON_BACKGROUND_DELIVERY": "off"}

        def run(label: str, tree: Path, python: Path, name: str, warm: bool) -> float:
            argv = [str(python), "-c", _PROJECTOR_RUN, str(root), name, str(events), "1" if warm else "0"]
            result = subprocess.run(argv, cwd=tree, env=environments[label], capture_output=True, text=True)
            if result.returncode:
                raise SystemExit(f"the {label} projector run failed: {result.stderr[-800:]}")
            return events / float(result.stdout.split()[-1])

        short = {label: f"side{n}" for n, (label, _, _) in enumerate(sides)}  # in Kafka topics' names
        for n in range(warm_up):
            for label, tree, python in sides:
                run(label, tree, python, f"{short[label]}-w{n}", n == 0)
        for round_ in range(rounds):
            for label, tree, python in sides[::-1] if round_ % 2 else sides:
                rates[label].append(run(label, tree, python, f"{short[label]}-r{round_}", False))
    (before, before_rates), (now, now_rates) = rates.items()
    lines = [f"{label:>{max(len(before), len(now))}}: " + " ".join(f"{rate:,.0f}" for rate in side_rates)
             for label, side_rates in rates.items()]
    median_before, median_now = statistics.median(before_rates), statistics.median(now_rates)
    lines.append(f"median of {rounds} rounds: {before} {median_before:,.0f} events/s, {now} {median_now:,.0f}, "
                 f"now/before {median_now / median_before:.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="ca53b0f", help="the git revision to compare with (default ca53b0f)")
    parser.add_argument("--after", default="HEAD", help="the revision to compare (default HEAD)")
    parser.add_argument("--repeat", type=int, default=15, help="rounds per figure (default 15)")
    parser.add_argument("--sessions", type=int, default=100, help="other active tickets (default 100)")
    parser.add_argument("--projector", action="store_true", help="also each revision's projector bench")
    parser.add_argument("--events", type=int, default=5000, help="events per projector run (default 5000)")
    parser.add_argument("--projector-warm-up", type=int, default=3,
                        help="each revision's projector runs before the timed ones (default 3)")
    parser.add_argument("--projector-rounds", type=int, default=8,
                        help="each revision's timed projector runs, in turns (default 8)")
    parser.add_argument("--projector-only", action="store_true", help="the projector alone, not the paths")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="baton-bench-versus-") as scratch_name:
        scratch = Path(scratch_name)
        before_python, before_baton = install(args.before, scratch / "before")
        now_python, now_baton = install(args.after, scratch / "now")
        if not args.projector_only:
            paths(scratch, args, (before_python, before_baton), (now_python, now_baton))
        if args.projector or args.projector_only:
            print(f"\nprojector, each revision's own code on one set of servers, {args.events:,} events a run, "
                  f"{args.projector_warm_up} warm-up runs each, then {args.projector_rounds} rounds in turns "
                  "(events/s):")
            print("\n".join(projector_lines([(f"before ({args.before})", scratch / "before" / "tree", before_python),
                                              (f"now ({args.after})", scratch / "now" / "tree", now_python)],
                                             args.events, args.projector_warm_up, args.projector_rounds)))


def paths(scratch: Path, args: argparse.Namespace, before: tuple[Path, Path], now: tuple[Path, Path]) -> None:
    """The paths an agent pays for, each side on its own data home, timed in turns."""
    sides = [build(scratch / "data-before", *before, f"before ({args.before})", args.sessions),
             build(scratch / "data-now", *now, f"now ({args.after})", args.sessions)]
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
        (before_ms, _, _), (now_ms, low, high) = (spread([wall for wall, _ in samples[side.label]]) for side in sides)
        cpu_before, cpu_now = (statistics.median(cpu for _, cpu in samples[side.label]) for side in sides)
        print(f"{label:52} {before_ms:10.1f} {now_ms:10.1f} {now_ms / before_ms:10.2f}   {low:.1f}-{high:.1f}"
              f"   {cpu_before:10.1f} {cpu_now:8.1f} {cpu_now / cpu_before:10.2f}")

if __name__ == "__main__":
    main()
