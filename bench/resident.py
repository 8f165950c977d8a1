"""The resident process: what a `baton` command costs with it and without it.

Builds the data home of bench/hooks.py (a ticket with history, `--sessions` other active
tickets, one overlapping it) plus bench/run.py's recall index (`--decisions` decisions),
starts `baton resident` for it, then times each command as a fresh `baton` process both ways,
alternating the two runs so a busy machine weighs on both alike: `BATON_RESIDENT=off` (the
command runs in its own process, as without a resident) and through the resident (the
console script hands it over). Prints medians with p10-p90 beside `python -c pass` measured
in the same run.

    .venv/bin/python -m bench.resident [--sessions 1000] [--decisions 100000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import hooks as hook_bench, run as run_bench
from bench.common import BATON, fresh_runs, hook_payload, run_ms, spread, start_resident

# A client that only asks the resident: exit 99 when it did not answer (nothing run).
ASK_RESIDENT = """
import sys
from baton.skills.runtime import resident_client
resident_client.CONNECT_WAIT = 10.0
code = resident_client.forwarded(["baton", *sys.argv[1:]])
sys.exit(99 if code is None else code)
"""


def alternated(command: list[str], cwd: Path, repeat: int, stdin: Callable[[], str] = lambda: "") \
        -> tuple[list[float], list[float]]:
    """(without, with the resident) milliseconds, the two runs alternating which goes first;
    one run of each first, untimed, warms the page cache."""
    off = {**os.environ, "BATON_RESIDENT": "off"}
    on = {**os.environ, "BATON_RESIDENT": "on"}
    without, with_resident = [], []
    for run in range(repeat + 1):
        pair = [(without, off), (with_resident, on)]
        for samples, env in pair if run % 2 else reversed(pair):
            elapsed = run_ms(command, cwd, env=env, stdin=stdin(), quiet=True)
            if run:
                samples.append(elapsed)
    return without, with_resident


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bres-") as scratch:
        root = Path(scratch)
        home = root / "home"
        os.environ.update({"BATON_HOME": str(home), "BATON_RESIDENT": "off", "BATON_BACKGROUND_INDEXING": "off"})
        started = time.perf_counter()
        main_tree, _ = hook_bench.build(root, args.sessions)
        run_bench.build_decisions(home, args.decisions)
        print(f"data set: {hook_bench.TASK} with 201 files, 3 decisions, 30 steps; {args.sessions} other active "
              f"tickets; {args.decisions} decisions in recall (built in {time.perf_counter() - started:.1f} s)\n")
        hook_bench.check_context(main_tree)
        resident = start_resident(home)
        try:
            served = subprocess.run([sys.executable, "-c", ASK_RESIDENT, "resume", hook_bench.TASK, "--json"],
                                    cwd=main_tree, capture_output=True, text=True,
                                    env={**os.environ, "BATON_RESIDENT": "on"})
            if served.returncode != 0 or '"recall": "ok"' not in served.stdout:
                raise SystemExit(f"the resident did not serve a resume with recall ({served.returncode}): "
                                 f"{served.stdout[-500:]} {served.stderr[-500:]}")
            rows = measure(main_tree, args.repeat)
        finally:
            resident.terminate()
            resident.wait(30)

    print(f"{'fresh process, embedded default':58} {'without':>10} {'p10-p90':>15} {'resident':>10} "
          f"{'p10-p90':>15} {'ratio':>6}")
    floor = None
    for name, without, with_resident in rows:
        median, low, high = spread(without)
        if with_resident is None:
            floor = median
            print(f"{name:58} {median:10.2f} {f'{low:.1f}-{high:.1f}':>15}")
            continue
        rmedian, rlow, rhigh = spread(with_resident)
        print(f"{name:58} {median:10.2f} {f'{low:.1f}-{high:.1f}':>15} {rmedian:10.2f} "
              f"{f'{rlow:.1f}-{rhigh:.1f}':>15} {median / rmedian:5.1f}x")
    print(f"\nmedians in ms; the floor, python -c pass, took {floor:.2f} ms in this run")


def measure(main_tree: Path, repeat: int) -> list[tuple[str, list[float], list[float] | None]]:
    hook = lambda event: [str(BATON), "hook", event]  # noqa: E731
    fresh = iter(range(10**6))
    contested = iter(range(hook_bench.CONTESTED))
    plain = fresh_runs([sys.executable, "-c", "pass"], main_tree, repeat, quiet=True)
    rows: list[tuple[str, list[float], list[float] | None]] = [("python -c pass (the floor)", plain, None)]
    cases: list[tuple[str, list[str], Callable[[], str]]] = [
        ("baton touch PATH", [str(BATON), "touch", "src/f8.py"], lambda: ""),
        ("post-tool-use, Edit of a file no other ticket touched", hook("post-tool-use"),
         lambda: hook_payload("post_tool_use_edit", main_tree, file=main_tree / "src" / "f7.py")),
        ("post-tool-use, Write making a new conflict", hook("post-tool-use"),
         lambda: hook_payload("post_tool_use_write", main_tree,
                              file=main_tree / "src" / "contested" / f"{next(contested)}.py")),
        ("user-prompt-submit, nothing new since the last prompt", hook("user-prompt-submit"),
         lambda: hook_payload("user_prompt_submit", main_tree)),
        ("user-prompt-submit, news to tell (a new agent session)", hook("user-prompt-submit"),
         lambda: hook_payload("user_prompt_submit", main_tree, session=f"new-{next(fresh)}")),
        ("session-start, bound ticket with history (recall)", hook("session-start"),
         lambda: hook_payload("session_start_startup", main_tree)),
        ("stop, nothing changed since the last stop", hook("stop"), lambda: hook_payload("stop", main_tree)),
        ("session-end (a new agent session each run)", hook("session-end"),
         lambda: hook_payload("session_end", main_tree, session=f"end-{next(fresh)}")),
        ("baton resume TICKET --json (recall included)", [str(BATON), "resume", hook_bench.TASK, "--json"],
         lambda: ""),
    ]
    for name, command, stdin in cases:
        without, with_resident = alternated(command, main_tree, repeat, stdin)
        rows.append((name, without, with_resident))
    return rows


if __name__ == "__main__":
    main()
