"""Several agent processes writing at once lose nothing and never see "database is locked"."""

import json
import os
import subprocess
import sys

import pytest

from tests.workspace import ROOT

WORKER = """
import sys
from baton.skills.frontends.cli import main
task, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    assert main(["touch", "--task", task, f"src/{task}-{i}.py", "src/shared.py"]) == 0
    if i % 8 == 0:
        assert main(["decide", "--task", task, f"decision {i} of {task}"]) == 0
"""


@pytest.mark.slow
def test_concurrent_writers(shared_home, worktrees, cli):
    main, _ = worktrees
    tasks = [f"T-{n}" for n in range(4)]
    for task in tasks:
        cli(main, "bind", task)
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, task, "40"], cwd=main, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
               for task in tasks]
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        assert "locked" not in err and "unavailable" not in err, err
    if os.environ.get("BATON_KAFKA_BOOTSTRAP"):
        # Every write was acknowledged into the data home's outbox: deliver it all, then let
        # the projector take it with room to spare (the fixture's short idle is for one
        # command's few events, not for 180 at once on a busy machine).
        assert cli(main, "deliver")[0] == 0
        from baton.skills.frontends.cli import main as baton

        assert baton(["projector", "--once", "--idle", "3"]) == 0
    for task in tasks:
        session = json.loads(cli(main, "resume", task, "--json")[1])["session"]
        assert len(session["files_touched"]) == 41
        assert len(session["decisions"]) == 5
        conflicts = json.loads(cli(main, "resume", task, "--json")[1])["conflicts"]
        assert sorted(c["other_task_id"] for c in conflicts) == sorted(set(tasks) - {task})
