"""The check before an edit: what an agent pays on every Edit or Write for the PreToolUse hook.

Builds a data home on the embedded default: `--tickets` other active tickets, each holding
`--files` touched files (1,000 x 100: 100,000 touched files), three of them with src/db.py
as one of theirs; BENCH-1 bound in one worktree of the repository. Then runs
`baton hook pre-tool-use` as Claude Code does (a fresh process, the documented Edit payload
on stdin) on a file no other ticket holds and on src/db.py, then as Copilot CLI does for its
`bash` tool (a command writing nothing, one writing src/db.py, and one of the longest
command read for its files, 4,096 characters writing 140 files), and prints
median and p90 beside
`python -c pass` and the post-tool-use hook measured in the same run, without the resident
process and through it.

Each other ticket also holds a lease on its own folder (`lib/t<N>/**`, every other one
exclusive): 1,000 leases, none covering the files the hook is asked about, so every one is
matched against them. BENCH-1 then claims leases as `baton claim` does: a folder of its own
(`src/c<N>/**`, which no lease is anchored near) and files all 1,000 leases may overlap
(`lib/*.c<N>`, anchored at `lib`, above every one of them), each granted.

    .venv/bin/python -m bench.pre_edit [--tickets 1000] [--files 100] [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from bench.common import BATON, fresh_runs, git, hook_payload, run_ms, spread, start_resident, use_scratch_home

TASK = "BENCH-1"
CONTESTED = "src/db.py"
HOLDERS = 3  # tickets touching the contested file


def build(root: Path, tickets: int, files: int) -> Path:
    from baton import clock
    from baton.files import FileRef
    from baton.graph.projects import ProjectGraph
    from baton.graph.sqlite import SqliteConflictGraph
    from baton.registry.model import Bound, FilesTouched, LeaseGranted, NextActionSet
    from baton.registry.sqlite import SqliteSessionStore

    main = root / "shop"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    git(main, "remote", "add", "origin", "git@github.com:acme/shop.git")
    git(main, "commit", "-q", "--allow-empty", "-m", "init")
    home = Path(os.environ["BATON_HOME"])
    repo = "github.com/acme/shop"
    graph = ProjectGraph(SqliteConflictGraph(home / "graph.db", timeout=10), repo)
    registry = SqliteSessionStore(home / "registry.db", timeout=10, project=repo)
    now = clock.now()
    for n in range(tickets):
        task, at = f"T-{n}", now - timedelta(minutes=n % 2880)
        held = [FileRef(repo, f"lib/t{n}/m{i}.py") for i in range(files - (n < HOLDERS))]
        if n < HOLDERS:
            held.append(FileRef(repo, CONTESTED))
        graph.record(task, "active", held, at)
        common = {"task_id": task, "session_id": "bench", "at": at}
        registry.append([Bound(event_id=uuid.uuid4(), repo=repo, worktree_path=f"/w/{task}", agent="claude",
                               branch=f"b{n}", **common),
                         NextActionSet(event_id=uuid.uuid4(), text=f"finish module {n}", **common),
                         # The registry's sessions hold the same touches as the graph, as a hook records them.
                         FilesTouched(event_id=uuid.uuid4(), files=held, **common),
                         # Lasting beyond the oldest ticket's last activity (two days back).
                         LeaseGranted(event_id=uuid.uuid4(), repo=repo, pattern=f"lib/t{n}/**", exclusive=n % 2 == 0,
                                      ttl_seconds=3 * 86400, agent="claude", **common)])
    graph.close()
    registry.close()
    subprocess.run([str(BATON), "bind", TASK, "--agent", "claude"], cwd=main, check=True, capture_output=True)
    return main


def payload(main: Path, file: str) -> str:
    event = json.loads(hook_payload("post_tool_use_edit", main, file=main / file))
    event["hook_event_name"] = "PreToolUse"
    del event["tool_response"], event["duration_ms"]
    return json.dumps(event)


def bash_payload(main: Path, command: str) -> str:
    """Copilot CLI's preToolUse payload for its bash tool (shared/reference: 1.0.102)."""
    return json.dumps({"sessionId": "bench", "timestamp": 1796574584165, "cwd": str(main), "toolName": "bash",
                       "toolArgs": {"command": command, "description": "bench"}})


def longest_command() -> str:
    """Redirections to many files, as long as a command is read for its files."""
    from baton.skills.runtime.command_words import LONGEST_READ

    commands = [f"echo {n} > src/gen/f{n}.py" for n in range(LONGEST_READ // 20)]
    while len(" && ".join(commands)) > LONGEST_READ:
        commands.pop()
    return " && ".join(commands)


def check(main: Path) -> None:
    """The figures mean something only if the check found the contested file's holders."""
    result = subprocess.run([str(BATON), "hook", "pre-tool-use"], cwd=main, capture_output=True, text=True,
                            input=payload(main, CONTESTED), check=True)
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    if sum(f"ticket T-{n} " in context for n in range(HOLDERS)) != HOLDERS:
        raise SystemExit(f"the check did not name the holders:\n{context}")
    leased = subprocess.run([str(BATON), "hook", "pre-tool-use"], cwd=main, capture_output=True, text=True,
                            input=payload(main, "lib/t0/m0.py"), check=True)
    if json.loads(leased.stdout)["hookSpecificOutput"].get("permissionDecision") != "ask":
        raise SystemExit(f"the check did not see T-0's exclusive lease:\n{leased.stdout}")
    bash = subprocess.run([str(BATON), "hook", "pre-tool-use"], cwd=main, capture_output=True, text=True,
                          input=bash_payload(main, f"sed -i 's/a/b/' {CONTESTED}"), check=True)
    if "ticket T-0 " not in bash.stdout:
        raise SystemExit(f"the check did not read the bash command's file:\n{bash.stdout}")


def claims(main: Path, repeat: int, pattern: str, fresh: Iterator[int]) -> list[float]:
    """Milliseconds of `repeat` fresh `baton claim` processes, each granted a lease of its own
    (pattern with a fresh number); one more first, not counted."""
    return [run_ms([str(BATON), "claim", pattern.format(next(fresh))], main) for _ in range(repeat + 1)][1:]


def runs(main: Path, repeat: int, run: int) -> list[tuple[str, list[float]]]:
    """run: which time the commands are timed, each post-tool-use on files of its own, each
    claim of its own pattern."""
    hook = [str(BATON), "hook", "pre-tool-use"]
    fresh = iter(range(run * 10**6, (run + 1) * 10**6))
    return [("python -c pass (the interpreter floor)", fresh_runs([sys.executable, "-c", "pass"], main, repeat)),
            ("post-tool-use, same Edit of a free file (reference)",
             fresh_runs([str(BATON), "hook", "post-tool-use"], main, repeat, quiet=True,
                        stdin=lambda: hook_payload("post_tool_use_edit", main, file=main / f"src/r{next(fresh)}.py"))),
            ("pre-tool-use, Edit of a file no other ticket holds",
             fresh_runs(hook, main, repeat, stdin=lambda: payload(main, "src/free.py"), quiet=True)),
            (f"pre-tool-use, Edit of a file {HOLDERS} other tickets touched",
             fresh_runs(hook, main, repeat, stdin=lambda: payload(main, CONTESTED), quiet=True)),
            ("pre-tool-use, Copilot bash writing nothing (git log)",
             fresh_runs(hook, main, repeat, stdin=lambda: bash_payload(main, "git log -3 | cat"), quiet=True)),
            (f"pre-tool-use, Copilot bash writing a file {HOLDERS} touched",
             fresh_runs(hook, main, repeat, quiet=True,
                        stdin=lambda: bash_payload(main, f"sed -i 's/a/b/' {CONTESTED} && echo ok > src/free.py"))),
            (f"pre-tool-use, Copilot bash writing {longest_command().count('>')} files",
             fresh_runs(hook, main, repeat, stdin=lambda: bash_payload(main, longest_command()), quiet=True)),
            ("claim src/c<N>/**, no lease near it", claims(main, repeat, "src/c{}/**", fresh)),
            ("claim lib/*.c<N>, which every lease may overlap", claims(main, repeat, "lib/*.c{}", fresh))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tickets", type=int, default=1000, help="other active tickets (default 1000)")
    parser.add_argument("--files", type=int, default=100, help="touched files per ticket (default 100)")
    parser.add_argument("--repeat", type=int, default=30, help="runs per figure (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-bench-pre-edit-") as scratch:
        root = Path(scratch)
        use_scratch_home(root)
        started = time.perf_counter()
        main_tree = build(root, args.tickets, args.files)
        print(f"data set: {args.tickets} active tickets, {args.tickets * args.files} touched files, "
              f"{args.tickets} leases; built in {time.perf_counter() - started:.0f} s")
        check(main_tree)
        alone = runs(main_tree, args.repeat, 0)
        os.environ["BATON_RESIDENT"] = "on"
        resident = start_resident(root / "home")
        try:
            check(main_tree)
            served = runs(main_tree, args.repeat, 1)
        finally:
            resident.terminate()
            resident.wait(30)
        # Each over the floor measured beside it: the machine's load moves both together.
        floor, served_floor = spread(alone[0][1])[0], spread(served[0][1])[0]
        print(f"{'fresh process':52} {'no resident':>11} {'p90':>7} {'over':>7} {'resident':>9} {'p90':>7} {'over':>7}")
        for (name, samples), (_, through) in zip(alone, served, strict=True):
            (median, _, p90), (rmedian, _, rp90) = spread(samples), spread(through)
            print(f"{name:52} {median:11.1f} {p90:7.1f} {median - floor:+7.1f} {rmedian:9.1f} {rp90:7.1f} "
                  f"{rmedian - served_floor:+7.1f}")


if __name__ == "__main__":
    main()
