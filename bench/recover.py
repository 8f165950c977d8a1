"""What finding interrupted work costs at 1,000 active sessions: the decision itself.

1,000 active sessions over 10 repositories (100 branches each, a tenth of them deleted),
half with the heartbeat of a process that is gone, half of this live process; the
decision (`skills/core/interrupted.detect`, asking this machine: the worktrees, the
kernel and each repository's refs, read once) and its text, in-process, beside the same
decision over facts answered from memory (the pure logic, the baseline of this run). Reading
the sessions from the registry and starting the interpreter are the command's share: the
second table times `baton recover --all-repos` as a fresh process over the same 1,000
sessions in an embedded data home (registry and hooks' heartbeats), beside the same
command over an empty data home (the interpreter and imports) and `python -c pass` (the
interpreter alone, the floor), both measured in this run. The sessions belong to one named
project (BATON_PROJECT), which the command runs with: a command reads its own project's
sessions only, and a directory outside a repository is a project of its own. Both the
decision and the command must find the data set's interrupted sessions (the half whose
agent is gone), else the bench stops: a time over nothing found measures nothing. Rows are
sampled in rounds, and each shows its median CPU time beside the wall time: on this shared
machine the load moves the wall clock several times over, the CPU time much less.

    .venv/bin/python -m bench.recover [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from baton import clock
from baton.processes import process_start
from baton.skills.core.interrupted import (
    Heartbeat,
    MachineLiveness,
    SessionFacts,
    detect,
)
from bench.common import BATON, git, spread

REPOS, BRANCHES = 10, 100
PROJECT = "bench"  # the team's project, spanning the 10 repositories
# The odd branches' agents are gone and none of those branches is deleted (every tenth is,
# all even): half the sessions are interrupted.
INTERRUPTED = REPOS * BRANCHES // 2


def build(base: Path) -> list[SessionFacts]:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = Heartbeat(os.getpid(), clock.now() - timedelta(minutes=1), process_start=process_start(os.getpid()))
    dead = Heartbeat(gone.pid, clock.now() - timedelta(minutes=5), process_start="1")
    sessions = []
    for r in range(REPOS):
        repo = base / f"repo-{r}"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "commit", "-q", "--allow-empty", "-m", "init")
        for b in range(BRANCHES):
            if b % 10:  # every tenth branch is deleted
                git(repo, "branch", f"ticket-{r}-{b}")
            sessions.append(SessionFacts(
                task_id=f"BENCH-{r}-{b}", worktree=str(repo), branch=f"ticket-{r}-{b}",
                last_activity=clock.now() - timedelta(minutes=b), ended=False, stage="IMPLEMENTED",
                next_stage="code-review", heartbeat=dead if b % 2 else live))
    return sessions


class Remembered:
    """The same answers, from memory: what the decision costs without asking the machine."""

    def __init__(self, sessions: list[SessionFacts]) -> None:
        machine = MachineLiveness()
        self._branches = {(s.worktree, s.branch): machine.branch_exists(s.worktree, s.branch) for s in sessions}
        self._alive = {s.heartbeat.pid: machine.agent_alive(s.heartbeat) for s in sessions}

    def worktree_exists(self, worktree: str) -> bool:
        return True

    def branch_exists(self, worktree: str, branch: str) -> bool:
        return self._branches[(worktree, branch)]

    def agent_alive(self, heartbeat: Heartbeat) -> bool | None:
        return self._alive[heartbeat.pid]


def data_home(base: Path, sessions: list[SessionFacts]) -> Path:
    """An embedded data home holding sessions (bound, 20 files touched, a decision, a workflow
    stage: stored projections of a working size) and their heartbeats."""
    import uuid

    from baton.files import FileRef
    from baton.registry.model import Bound, DecisionRecorded, FilesTouched, StageRecorded
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.agent_sessions import AgentSessions, Beat
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    home = base / "home"
    stores = Stores(Settings.from_env({"BATON_HOME": str(home), "BATON_PROJECT": PROJECT}), projection=apply_events)
    at = clock.now() - timedelta(hours=1)
    events = []
    for s in sessions:
        common = {"task_id": s.task_id, "session_id": "bench", "at": at}
        files = [FileRef("github.com/acme/shop", f"src/{s.task_id.lower()}/m{n}.py") for n in range(20)]
        events += [Bound(event_id=uuid.uuid4(), repo=s.worktree, worktree_path=s.worktree, branch=s.branch, **common),
                   FilesTouched(event_id=uuid.uuid4(), files=files, **common),
                   DecisionRecorded(event_id=uuid.uuid4(), text=f"Keep {s.task_id}'s carts in PostgreSQL", **common),
                   StageRecorded(event_id=uuid.uuid4(), status="IMPLEMENTED", **common,
                                 state={"status": "IMPLEMENTED", "next_stage": "code-review"})]
    stores.registry.append(events)
    stores.close()
    beats = AgentSessions(home, timeout=5)
    for s in sessions:
        beat = s.heartbeat
        beats.beat(Beat(s.task_id, s.worktree, str(uuid.uuid4()), beat.pid, beat.process_start, None, beat.at))
    beats.close()
    return home


def expect_found(count: int, who: str) -> None:
    """Stop the bench unless who found the data set's interrupted sessions."""
    if count != INTERRUPTED:
        raise SystemExit(f"{who} found {count} interrupted sessions, not the {INTERRUPTED} seeded: "
                         "the figures would not measure finding them")


def _cpu_ms() -> float:
    """CPU time used so far by this process and its finished children: on a loaded machine it
    moves far less than the wall clock."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime) * 1000


def table(rows: list[tuple[str, object, str]], repeat: int) -> None:
    """Each row's median and p10-p90 of wall time, and its median CPU time, over repeat
    rounds; a round runs each row once, in turn, so a change in the machine's load weighs
    on every row alike."""
    runs = [run for _, run, _ in rows]
    for run in runs:
        run()  # warm
    wall: list[list[float]] = [[] for _ in runs]
    cpu: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for run, walls, cpus in zip(runs, wall, cpu, strict=True):
            start, used = time.perf_counter(), _cpu_ms()
            run()
            walls.append((time.perf_counter() - start) * 1000)
            cpus.append(_cpu_ms() - used)
    print(f"{'':58}{'median ms':>10}{'p10-p90 ms':>17}{'cpu ms':>9}   budget")
    for (name, _, budget), walls, cpus in zip(rows, wall, cpu, strict=True):
        median, low, high = spread(walls)
        print(f"{name:58}{median:10.2f}{f'{low:.2f}-{high:.2f}':>17}{statistics.median(cpus):9.1f}   {budget}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-recover-bench-") as tmp:
        started = time.perf_counter()
        sessions = build(Path(tmp))
        print(f"data set: {len(sessions)} active sessions in {REPOS} repositories (built in "
              f"{time.perf_counter() - started:.1f} s)")
        found = detect(sessions, MachineLiveness())
        print(f"found {len(found.candidates)} interrupted, excluded {len(found.excluded)} ({found.reason})\n")
        expect_found(len(found.candidates), "the decision in this process")
        remembered = Remembered(sessions)
        table([("decision over remembered facts (baseline)", lambda: detect(sessions, remembered).text(), ""),
               ("decision asking this machine (refs, kernel, worktrees)",
                lambda: detect(sessions, MachineLiveness()).text(), "300 ms")], args.repeat)
        home = data_home(Path(tmp), sessions)
        empty = Path(tmp) / "empty-home"
        command = [str(BATON), "recover", "--all-repos"]

        def fresh(home: Path):
            env = {**os.environ, "BATON_HOME": str(home), "BATON_PROJECT": PROJECT, "BATON_RESIDENT": "off"}
            # As installed: the processes import compiled modules (the uncounted first run
            # compiles what an editable install left uncompiled), not Baton's sources again.
            for name in ("BATON_CONFIG", "PYTHONDONTWRITEBYTECODE"):
                env.pop(name, None)
            return lambda: subprocess.run(command, cwd=tmp, env=env, check=True, capture_output=True)

        answer = fresh(home)().stdout.decode()
        print(f"\n`baton recover --all-repos`, a fresh process: {answer.count('ticket: ')} interrupted found")
        expect_found(answer.count("ticket: "), "`baton recover --all-repos`")
        floor = [sys.executable, "-c", "pass"]
        table([("python -c pass (the interpreter, floor)",
                lambda: subprocess.run(floor, check=True, capture_output=True), ""),
               ("empty data home (interpreter and imports, baseline)", fresh(empty), ""),
               ("1,000 sessions with heartbeats", fresh(home), "300 ms")], args.repeat)


if __name__ == "__main__":
    main()
