"""Checkpoints: what taking one costs the Stop hook, beside `git stash create` on the same tree.

Builds a repository of `--files` files (default 10,000, in 100 directories) with
`--changed` of them changed (default 100: modified, staged, deleted and untracked ones), then
times, each in the same run and on the same tree:

- `python -c pass`, the interpreter start every fresh hook process pays;
- `git stash create`, the floor: git's own snapshot of the index and tracked files (it holds
  no untracked files and writes no ref);
- the Stop hook's checkpoint path in a fresh process, in a bound worktree: the hook's
  imports, its stores, the take (the "unchanged?" check included) and the registry record,
  after one more file changed (so every run writes a new checkpoint): the budgeted figure;
- the whole `baton hook stop` (delivery, the sweep of changed files, the heartbeat and the
  checkpoint), for scale;
- the engine's take alone in a fresh process;
- the same call in-process (the engine without the interpreter);
- a fresh process when nothing changed (the idle Stop hook: the check alone);
- a restore into a new path, beside the `git worktree add` it starts with.

Prints medians with p10-p90 and the budget.

    .venv/bin/python -m bench.checkpoint [--files 10000] [--changed 100] [--repeat 30]
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

from bench.common import BATON, ROOT, git, spread

BUDGET_MS = 300
HOOK_PATH = ("from pathlib import Path; from baton.skills.frontends.hooks import locate; "
             "from baton.skills.services.checkpoint import boundary_checkpoint; "
             "from baton.skills.services.unit import unit_of_work; "
             "place, _, task = locate(Path({root!r})); s = unit_of_work(); stores = s.__enter__(); "
             "w = boundary_checkpoint(stores, task, place, 'stop', timeout=2.0)[0]; s.__exit__(None, None, None); "
             "assert not w, w")
TAKE = ("from pathlib import Path; from baton.skills.core import checkpoints; "
        "r = checkpoints.take(Path({root!r}), boundary='stop'); assert type(r).__name__ == {kind!r}, r")


def build(root: Path, files: int, changed: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n in range(files):
        path = repo / f"pkg{n % 100:02d}" / f"module_{n}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f'"""Module {n}."""\n\n' + "".join(f"def f{i}():\n    return {n * i}\n\n" for i in range(20)))
    git(repo, "add", "-A")
    # git's automatic gc after the commit runs now, not detached beside the figures.
    git(repo, "-c", "gc.autoDetach=false", "commit", "-q", "-m", "base")
    git(repo, "status")  # the index's stat information is fresh, as in a worktree in use
    # The changed files: 70 modified in the worktree, 10 staged, 10 deleted, 10 new untracked.
    quarter = max(1, changed // 10)
    for n in range(changed - 3 * quarter):
        path = repo / f"pkg{n % 100:02d}" / f"module_{n}.py"
        path.write_text(path.read_text() + f"# edit {n}\n")
    for n in range(changed - 3 * quarter, changed - 2 * quarter):
        path = repo / f"pkg{n % 100:02d}" / f"module_{n}.py"
        path.write_text(path.read_text() + "# staged\n")
        git(repo, "add", str(path.relative_to(repo)))
    for n in range(changed - 2 * quarter, changed - quarter):
        (repo / f"pkg{n % 100:02d}" / f"module_{n}.py").unlink()
    for n in range(quarter):
        (repo / "new" / f"untracked_{n}.py").parent.mkdir(exist_ok=True)
        (repo / "new" / f"untracked_{n}.py").write_text(f"new {n}\n")
    return repo


def timed(run, repeat: int, before=lambda run: None) -> list[float]:
    """Milliseconds per run; `before` prepares each run outside the timing; the first run
    warms the page cache and is not counted."""
    samples = []
    for n in range(repeat + 1):
        before(n)
        elapsed = once(run)
        if n:
            samples.append(elapsed)
    return samples


def once(run) -> float:
    """Milliseconds of one run."""
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def process(command: list[str], cwd: Path, stdin: str | None = None):
    def run():
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, input=stdin)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command[:3])} failed: {done.stderr[-800:]}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000, help="files in the repository (default 10000)")
    parser.add_argument("--changed", type=int, default=100, help="files changed (default 100)")
    parser.add_argument("--repeat", type=int, default=30, help="runs per figure (default 30)")
    args = parser.parse_args()
    # As installed: the fresh processes import compiled modules (the uncounted first run compiles them).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    from baton.skills.core import checkpoints

    with tempfile.TemporaryDirectory(prefix="baton-bench-checkpoint-") as scratch:
        started = time.perf_counter()
        repo = build(Path(scratch), args.files, args.changed)
        # A data home of its own, the embedded stores, the worktree bound as an agent's is.
        os.environ.update({"BATON_HOME": str(Path(scratch) / "home"), "BATON_RESIDENT": "off",
                           "BATON_BACKGROUND_DELIVERY": "off",
                           "BATON_BACKGROUND_INDEXING": "off"})
        for name in ("BATON_CONFIG", "BATON_DATABASE_URL", "BATON_GRAPH_URL", "BATON_KAFKA_BOOTSTRAP",
                     "BATON_QDRANT_URL", "BATON_TASK_ID", "BATON_SESSION_ID"):
            os.environ.pop(name, None)
        process([str(Path(sys.executable).with_name("baton")), "bind", "BENCH-1"], repo)()
        built = time.perf_counter() - started
        print(f"repository: {args.files} files, {args.changed} changed (built in {built:.1f} s)\n")
        edited = repo / "pkg00" / "module_0.py"

        def edit(n: int) -> None:  # one more change, so the take cannot answer "unchanged"
            edited.write_text(edited.read_text() + f"# run {n} {time.perf_counter_ns()}\n")

        rows = [("python -c pass (interpreter start)", timed(process([sys.executable, "-c", "pass"], repo),
                                                            args.repeat), None),
                ("git stash create (floor)", timed(process(["git", "stash", "create"], repo), args.repeat, edit),
                 None),
                ("Stop hook's checkpoint path, one more file changed",
                 timed(process([sys.executable, "-c", HOOK_PATH.format(root=str(repo))], ROOT), args.repeat, edit),
                 BUDGET_MS),
                ("whole `baton hook stop`, one more file changed",
                 timed(process([str(BATON), "hook", "stop"], repo,
                               json.dumps({"session_id": "bench", "cwd": str(repo)})), args.repeat, edit), None),
                ("take, fresh process, one more file changed",
                 timed(process([sys.executable, "-c", TAKE.format(root=str(repo), kind="Taken")], ROOT),
                       args.repeat, edit), None),
                ("take, in-process, one more file changed",
                 timed(lambda: checkpoints.take(repo, boundary="stop"), args.repeat, edit), None),
                ("take, fresh process, nothing changed (check only)",
                 timed(process([sys.executable, "-c", TAKE.format(root=str(repo), kind="Unchanged")], ROOT),
                       args.repeat), None)]
        last = checkpoints.take(repo, boundary="stop")
        checkpoint = last.checkpoint.id if hasattr(last, "checkpoint") else last.checkpoint_id
        targets = iter(range(10**6))
        holder = Path(scratch) / "restores"

        def fresh_target(n: int) -> None:
            shutil.rmtree(holder, ignore_errors=True)
            git(repo, "worktree", "prune")
            holder.mkdir()

        restores = min(args.repeat, 5)  # each checks out the whole tree
        plain, restored = [], []
        for n in range(restores + 1):  # in turns, so load weighs on both alike; the first warms the cache
            fresh_target(n)
            add = once(process(["git", "worktree", "add", "-q", "--detach", str(holder / "plain"), "HEAD"], repo))
            back = once(lambda: checkpoints.restore(repo, checkpoint, holder / f"r{next(targets)}", timeout=300))
            if n:
                plain.append(add)
                restored.append(back)
        rows.append(("git worktree add --detach (restore's floor)", plain, None))
        rows.append(("restore into a new path", restored, None))
        refs = len(git(repo, "for-each-ref", checkpoints.REF_PREFIX).splitlines())

        print(f"{'operation':50} {'median ms':>10} {'p10-p90 ms':>16} {'budget':>8}")
        for name, samples, budget in rows:
            median, low, high = spread(samples)
            shown = f"{budget} ms" if budget else ""
            print(f"{name:50} {median:10.1f} {f'{low:.1f}-{high:.1f}':>16} {shown:>8}")
        floor = statistics.median(rows[1][1])
        in_process = statistics.median(rows[5][1])
        print(f"\nin-process take / git stash create: {in_process / floor:.2f}x; checkpoints written: {refs}")
        print(f"restore / git worktree add of the same commit: "
              f"{statistics.median(restored) / statistics.median(plain):.2f}x (target 2x)")
        over = [name for name, samples, budget in rows if budget and statistics.median(samples) > budget]
        print("every median within its budget" if not over else f"OVER BUDGET: {', '.join(over)}")


if __name__ == "__main__":
    main()
