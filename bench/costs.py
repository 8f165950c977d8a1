"""Where a fresh Baton process spends its time, for the bench scripts to print beside
their figures: so a change shows which cost it moved.

A command runs in a fresh interpreter twice per sample: once under `-X importtime` (every
import's own time, summed by library: Baton's modules, pydantic, NumPy, the standard
library...) and once under cProfile (the functions with the most own time once imports
are left out). Profiling slows a process down, so these are shares, not the figures
themselves; the figures are the timed runs of each bench script.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from bench.common import ROOT

# Runs the CLI as the console script does, and says how long the whole of it took.
TIMED = """
import sys, time
began = time.perf_counter()
from baton.skills.frontends.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(f"TOTAL {(time.perf_counter() - began) * 1000:.3f}", file=sys.stderr)
"""
PROFILED = """
import cProfile, pstats, sys
profile = cProfile.Profile()
profile.enable()
from baton.skills.frontends.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
profile.disable()
stats = pstats.Stats(profile).stats
for (file, line, name), (_, _, own, _, _) in stats.items():
    print(f"CALL {own * 1000:.3f} {file}:{line}:{name}", file=sys.stderr)
"""
LIBRARIES = ("numpy", "pydantic", "pydantic_core", "tokenizers", "psycopg", "neo4j", "confluent_kafka",
             "qdrant_client", "typing_extensions", "annotated_types", "typing_inspection")
# Where an import's own time shows in cProfile: left out of the calls (-X importtime has it).
IMPORTING = ("<built-in method builtins.exec>", "<built-in method marshal.loads>", "<built-in method _imp.",
             "<built-in method builtins.__build_class__>", "<built-in method builtins.compile>")


def group_of(module: str) -> str:
    top = module.split(".")[0]
    if top == "baton":
        return "Baton"
    return top if top in LIBRARIES else "stdlib and other"


def parse_importtime(text: str) -> dict[str, float]:
    """{module: its own import time in ms} from `-X importtime`'s stderr."""
    own = {}
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:"):].split("|"))
        own[name] = own.get(name, 0.0) + int(self_us) / 1000
    return own


def _call_name(where: str) -> str:
    """`folder/file.py:function`, or a built-in's own name."""
    file, _, name = where.rsplit(":", 2)
    if file == "~":
        return name
    path = Path(file)
    if path.is_relative_to(ROOT):
        return f"{path.relative_to(ROOT)}:{name}"
    parts = path.parts
    within = parts[parts.index("site-packages") + 1:] if "site-packages" in parts else parts[-2:]
    return f"{'/'.join(within)}:{name}"


class Costs:
    """The median shares of a command's fresh runs."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.totals: list[float] = []
        self.imports: list[float] = []
        self.groups: dict[str, list[float]] = defaultdict(list)
        self.modules: dict[str, list[float]] = defaultdict(list)
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.threaded = False  # imports ran in several threads at once: their own times overlap

    def lines(self, top: int = 6) -> list[str]:
        med = lambda samples: statistics.median(samples) if samples else 0.0  # noqa: E731
        runs = len(self.totals)
        total, imports = med(self.totals), med(self.imports)
        groups = sorted(((med(v + [0.0] * (runs - len(v))), k) for k, v in self.groups.items()), reverse=True)
        modules = sorted(((med(v + [0.0] * (runs - len(v))), k) for k, v in self.modules.items()), reverse=True)
        calls = sorted(((med(v + [0.0] * (runs - len(v))), k) for k, v in self.calls.items()), reverse=True)
        return [
            (f"{self.label}: {total:.1f} ms in the process after the interpreter's start, {imports:.1f} ms of it "
             f"importing (median of {runs}, -X importtime"
             + ("; imports in the reader threads overlapped, so their shares are approximate)" if self.threaded
                else ")")),
            "    imports by library: " + ", ".join(f"{name} {ms:.1f}" for ms, name in groups if ms >= 0.05),
            "    slowest imports (own time): " + ", ".join(f"{name} {ms:.1f}" for ms, name in modules[:top]),
            "    most own time besides imports (cProfile): " + ", ".join(f"{name} {ms:.1f}" for ms, name in
                                                                         calls[:top]),
        ]


def measure(label: str, args: list[str], cwd: Path, env: dict, *, stdin: Callable[[], str] = lambda: "",
            repeat: int = 3) -> Costs:
    """Profile `baton ARGS` in fresh processes (each run gets stdin()); a failure to run is
    not the profile's business: the timed figures report it."""
    costs = Costs(label)
    for _ in range(repeat):
        run = subprocess.run([sys.executable, "-X", "importtime", "-c", TIMED, *args], cwd=cwd, env=env,
                             input=stdin(), capture_output=True, text=True)
        own = parse_importtime(run.stderr)
        baseline = parse_importtime(subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], cwd=cwd,
                                                   env=env, capture_output=True, text=True).stderr)
        # -X importtime takes a module's own time as its total less its imports', which an
        # import in another thread meanwhile can turn negative: counted as nothing.
        costs.threaded = costs.threaded or any(ms < 0 for ms in own.values())
        mine = {name: max(ms, 0.0) for name, ms in own.items() if name not in baseline}
        totals = [float(line.split()[1]) for line in run.stderr.splitlines() if line.startswith("TOTAL ")]
        if not totals:
            continue
        costs.totals.append(totals[-1])
        costs.imports.append(sum(mine.values()))
        by_group: dict[str, float] = defaultdict(float)
        for name, ms in mine.items():
            by_group[group_of(name)] += ms
            costs.modules[name].append(ms)
        for name, ms in by_group.items():
            costs.groups[name].append(ms)
        profiled = subprocess.run([sys.executable, "-c", PROFILED, *args], cwd=cwd, env=env, input=stdin(),
                                  capture_output=True, text=True)
        calls: dict[str, float] = defaultdict(float)
        for line in profiled.stderr.splitlines():
            if not line.startswith("CALL "):
                continue
            _, ms, where = line.split(" ", 2)
            name = _call_name(where)
            if not name.startswith(IMPORTING) and "<frozen" not in where:
                calls[name] += float(ms)
        for name, ms in calls.items():
            costs.calls[name].append(ms)
    return costs
