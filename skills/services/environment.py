"""`baton env record`: run the setup commands (no shell, in the worktree, their output on
standard error), then record the environment manifest (baton.skills.core.environment) as
the worktree run's, and take a checkpoint at the "environment" boundary, which holds and
names it. The manifest is content-addressed: the same environment recorded twice has one
id, and the checkpoints taken after it name it (the worktree's run file holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baton.errors import BadInput
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.skills.core.environment import Manifest

MAX_SETUP = 20


@dataclass
class Recorded:
    task: ActiveTask
    manifest: Manifest
    checkpoint: str | None  # the id of the checkpoint at the "environment" boundary
    warnings: list[str] = field(default_factory=list)

    @property
    def setup_failed(self) -> bool:
        return any(s["exit_status"] != 0 for s in self.manifest.body["setup"])

    def to_json(self) -> dict:
        return {"task_id": self.task.task_id, "environment": {"id": self.manifest.id, **self.manifest.body},
                "checkpoint": self.checkpoint, "warnings": self.warnings}


def record_environment(stores: Stores, task: ActiveTask, place: Place, setup: Sequence[str]) -> Recorded:
    """Run the setup commands in order (every one, even after one failed), record the
    manifest as the worktree run's and checkpoint it. BadInput outside git, for a worktree
    with no run recorded, or a setup command that cannot be split into words."""
    from baton.skills.core.checkpoints import Taken
    from baton.skills.core.environment import capture, run_setup
    from baton.skills.runtime.command_words import parse_command
    from baton.skills.services.checkpoint import LocalRun, boundary_checkpoint, local_run, write_local_run

    if place.worktree is None:
        raise BadInput(f"{place.root} is not a git worktree: nothing to record")
    if len(setup) > MAX_SETUP:
        raise BadInput(f"at most {MAX_SETUP} setup commands, got {len(setup)}")
    run = local_run(place, task.task_id)
    if run is None:
        raise BadInput(f"{place.root} has no run of {task.task_id} recorded: run `baton bind {task.task_id}` first")
    commands = []
    for text in setup:  # every one checked before any runs
        try:
            commands.append((text, parse_command(text)))
        except BadInput as exc:
            raise BadInput(f"--setup: {exc}") from None
    results = [run_setup(place.root, stores.redact(text), argv) for text, argv in commands]
    settings = stores.settings
    manifest = capture(place.root, setup=results, lockfiles=settings.environment_lockfiles,
                       services=settings.environment_services, deadline=stores.deadline)
    write_local_run(place, task.task_id, run.run_id, manifest)
    warnings, taken = boundary_checkpoint(stores, task, place, "environment",
                                          run=LocalRun(task.task_id, run.run_id, manifest.for_checkpoint()))
    checkpoint = None if taken is None else taken.checkpoint.id if isinstance(taken, Taken) else taken.checkpoint_id
    return Recorded(task, manifest, checkpoint, warnings)
