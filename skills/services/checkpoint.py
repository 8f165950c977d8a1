"""The checkpoint skill: take a checkpoint of the bound worktree at a boundary (bind, the
end of a turn, after checks, a handoff, a completed ticket, by hand) and record it.

The content goes into the repository (baton.skills.core.checkpoints) and, at the boundaries
that matter to other clones (never a hook's), to its git remote before it is recorded. The
record is a checkpoint_taken event built without pydantic and handed to the sink, so the
Stop hook never imports the event models. The worktree's run and its environment manifest
are kept beside the binding in `.baton/run.json`: each checkpoint names them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from baton import clock
from baton.errors import BadInput, BatonError, GitFailed
from baton.files import write_whole
from baton.skills.core.binding import BINDING_DIR, ActiveTask, Place, resolve_task
from baton.skills.core.commit import WireEvent, read_binding_quietly, wire_event
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.skills.core.checkpoint_remote import Pushed
    from baton.skills.core.checkpoints import Checkpoint, Refused, Taken, Unchanged
    from baton.skills.core.environment import Manifest

RUN_FILE = "run.json"
MAX_LABEL = 200


@dataclass(frozen=True, slots=True)
class LocalRun:
    """The run this worktree works in, as its last bind, restore, fork or fresh start set it."""

    task_id: str
    run_id: str
    environment: tuple[str, bytes] | None  # (manifest id, manifest JSON)


def run_file(place: Place) -> Path:
    return place.root / BINDING_DIR / RUN_FILE


def local_run(place: Place, task_id: str) -> LocalRun | None:
    """The worktree's run of task_id, None when it has none recorded (or another ticket's)."""
    try:
        held = json.loads(run_file(place).read_text(encoding="utf-8"))
        if held["task_id"] != task_id or not isinstance(held["run_id"], str):
            return None
        manifest = held.get("environment")
        environment = (held["environment_id"], json.dumps(manifest, sort_keys=True, separators=(",", ":"),
                                                         ensure_ascii=True).encode()) if manifest else None
        return LocalRun(task_id, held["run_id"], environment)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_local_run(place: Place, task_id: str, run_id: str, manifest: Manifest | None) -> None:
    """Record the worktree's run, whole or not at all (the binding's directory exists)."""
    path = run_file(place)
    path.parent.mkdir(exist_ok=True)
    write_whole(path, json.dumps({"task_id": task_id, "run_id": run_id, "environment_id": manifest and manifest.id,
                                  "environment": manifest and manifest.body}))


def capture_environment(place: Place, lockfiles: Sequence[str] = (), deadline: Deadline | None = None
                        ) -> Manifest | None:
    """The environment manifest of the worktree, as bind records it (no setup commands, no
    service probes: it is cheap), or None outside git. lockfiles: `[environment] lockfiles`;
    deadline: the command's, which the toolchains' versions draw on."""
    if place.worktree is None:
        return None
    from baton.skills.core.environment import QUICK_WAIT, capture

    return capture(place.root, lockfiles=lockfiles, wait=QUICK_WAIT, deadline=deadline)


def checkpoint_event(task: ActiveTask, place: Place, checkpoint: Checkpoint, at: datetime,
                     remote: str | None = None) -> WireEvent:
    """remote: where it can be fetched from (the git remote's identity), None: only here."""
    return wire_event(
        "checkpoint_taken", task.task_id, task.session_id, at, checkpoint_id=checkpoint.id,
        boundary=checkpoint.boundary, label=checkpoint.label, base=checkpoint.base, staged_tree=checkpoint.staged_tree,
        worktree_tree=checkpoint.worktree_tree, artifacts_tree=checkpoint.artifacts_tree,
        environment=checkpoint.environment, run_id=checkpoint.run_id, repo=place.repo,
        worktree_path=str(place.root), remote=remote)


def take_checkpoint(stores: Stores, task: ActiveTask, place: Place, *, boundary: str, label: str | None = None,
                    run: LocalRun | None = None, timeout: float | None = None, push: bool = False,
                    by_hand: bool = False) -> tuple[Taken | Unchanged | Refused, str | None, list[str]]:
    """Checkpoint the worktree for the ticket and record the checkpoint taken (one taken
    before of the same state is recorded again: it is the latest now). push: pushed to the
    repository's git remote first, so its record says where another clone fetches it (one
    found unchanged that the push just brought there is recorded again); by_hand (`baton
    checkpoint --push`): pushed whatever `[checkpoints] push` says. A failed push is a warning.
    Answers the result, its remote (None: not pushed) and the warnings. Raises BadInput
    outside git and StoreUnavailable when git or the registry cannot take it."""
    from baton.skills.core.checkpoints import OPERATION_CAP, Refused, Taken, read, take

    if place.worktree is None:
        raise BadInput(f"{place.root} is not a git worktree: nothing to checkpoint")
    if label is not None and not 0 < len(label.strip()) <= MAX_LABEL:
        raise BadInput(f"a checkpoint label is 1 to {MAX_LABEL} characters")
    run = run or local_run(place, task.task_id)
    label = stores.redact(label.strip()) if label else None  # it is kept in the repository too
    settings = stores.settings
    result = take(place.root, boundary=boundary, label=label, run_id=run.run_id if run else None,
                  environment=run.environment if run else None, artifacts=settings.checkpoint_artifacts,
                  max_file_bytes=settings.checkpoint_max_file_bytes, timeout=timeout or OPERATION_CAP,
                  deadline=stores.deadline)
    if isinstance(result, Refused):
        return result, None, []
    pushed, warnings = None, list[str]()
    if push:
        checkpoint_id = result.checkpoint.id if isinstance(result, Taken) else result.checkpoint_id
        pushed, warnings = push_checkpoint(stores, place, checkpoint_id, by_hand=by_hand)
    where = pushed.remote.location if pushed is not None else None
    if isinstance(result, Taken):
        stores.sink.keep([checkpoint_event(task, place, result.checkpoint, clock.now(), remote=where)])
    elif pushed is not None and pushed.created:
        from baton.outcome import Found

        found = read(place.root, result.checkpoint_id, deadline=stores.deadline)
        if isinstance(found, Found):
            stores.sink.keep([checkpoint_event(task, place, found.value, clock.now(), remote=where)])
    return result, where, warnings


def push_checkpoint(stores: Stores, place: Place, checkpoint_id: str, *, by_hand: bool = False
                    ) -> tuple[Pushed | None, list[str]]:
    """Push one checkpoint to the repository's git remote (`[checkpoints] remote`), within
    the command's deadline. Not pushed, quietly: `[checkpoints] push = "off"`, a repository
    without a remote, a remote that refused an earlier push (said once, when it did); by_hand
    pushes all the same. Answers what was pushed (None: nothing) and the warnings."""
    from baton.skills.core.checkpoint_remote import Pushed, push, push_remote, refused

    settings, short = stores.settings, checkpoint_id[:12]
    if place.worktree is None or (settings.checkpoint_push == "off" and not by_hand):
        return None, []
    try:
        remote = push_remote(place.root, settings.checkpoint_remote, stores.deadline)
    except GitFailed as exc:
        return None, [f"checkpoint {short} not pushed: {exc}"]
    if remote is None:
        if settings.checkpoint_remote is not None:
            return None, [(f"checkpoint {short} not pushed: this repository has no remote "
                           f"{settings.checkpoint_remote!r} ([checkpoints] remote)")]
        return None, [f"checkpoint {short} not pushed: this repository has no remote"] if by_hand else []
    if not by_hand and refused(place.root, remote, stores.deadline) is not None:
        return None, []
    outcome = push(place.root, checkpoint_id, remote, stores.deadline)
    if isinstance(outcome, Pushed):
        return outcome, []
    if outcome.refused:
        return None, [(f"checkpoint {short} not pushed: {outcome.reason}; automatic pushes to {remote.name} are "
                       "off until `baton checkpoint --push` succeeds")]
    return None, [(f"checkpoint {short} not pushed to {remote.name}: {outcome.reason}; `baton checkpoint --push` "
                   "tries again")]


def boundary_checkpoint(stores: Stores, task: ActiveTask, place: Place, boundary: str, *,
                        timeout: float | None = None, push: bool = False, run: LocalRun | None = None
                        ) -> tuple[list[str], Taken | Unchanged | None]:
    """A checkpoint at a boundary the user did not ask for: whatever keeps it from being
    taken is a warning, never the command's failure. push: a boundary that matters to
    other clones (a handoff, `end`, a fork): the checkpoint is pushed too, as
    `[checkpoints] push` says (take_checkpoint); never a hook's. Answers the warnings and
    what was taken or found unchanged (None: nothing), whose `dirty` paths the Stop hook
    records as the turn's changed files. run: the worktree's run, when the caller has it."""
    from baton.skills.core.checkpoints import Refused

    if place.worktree is None:
        return [], None
    try:
        result, _, pushed = take_checkpoint(stores, task, place, boundary=boundary, run=run, timeout=timeout, push=push)
    except BatonError as exc:
        return [f"no checkpoint at {boundary}: {exc}"], None
    if isinstance(result, Refused):
        return [f"no checkpoint at {boundary}: {result.reason}"], None
    return skipped_warnings(result) + pushed, result


def skipped_warnings(result: Taken | Unchanged | Refused) -> list[str]:
    """One warning naming what a checkpoint just written left out (over the size cap,
    unreadable, ...), so no one trusts it to hold a file it does not."""
    from baton.skills.core.checkpoints import Taken

    if not isinstance(result, Taken) or not result.created or not result.checkpoint.skipped:
        return []
    skipped = result.checkpoint.skipped
    more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
    return [f"checkpoint {result.checkpoint.id[:12]} does not hold {skipped[0].path!r} ({skipped[0].reason}){more}"]


def checkpoint_here(stores: Stores, task: ActiveTask, place: Place, boundary: str, *, push: bool = False
                    ) -> list[str]:
    """A boundary's checkpoint, taken when this worktree works on the ticket (push: and
    pushed to the git remote, for other clones): its warnings."""
    binding = read_binding_quietly(place)
    if binding is None or binding.task_id != task.task_id:
        return []
    return boundary_checkpoint(stores, task, place, boundary, push=push)[0]


class CheckpointDone(NamedTuple):
    task: ActiveTask
    result: Taken | Unchanged
    warnings: list[str]  # as every answer has; a checkpoint's record is kept, never lost
    remote: str | None = None  # push: the git remote it is on now

    def to_json(self) -> dict:
        from baton.skills.core.checkpoints import Taken

        if isinstance(self.result, Taken):
            c = self.result.checkpoint
            return {"task_id": self.task.task_id, "status": "taken" if self.result.created else "existing",
                    "checkpoint": {"id": c.id, "boundary": c.boundary, "label": c.label, "base": c.base,
                                   "run_id": c.run_id, "environment": c.environment,
                                   "taken_at": c.taken_at.isoformat(),
                                   "skipped": [s._asdict() for s in c.skipped]},
                    "remote": self.remote, "warnings": self.warnings}
        return {"task_id": self.task.task_id, "status": "unchanged",
                "checkpoint": {"id": self.result.checkpoint_id}, "remote": self.remote, "warnings": self.warnings}


def checkpoint_by_hand(stores: Stores, place: Place, task_id: str | None, label: str | None, push: bool
                       ) -> CheckpointDone:
    """`baton checkpoint` for the ticket named, else the worktree's (push: and pushed to the
    git remote, whatever [checkpoints] push says); a refusal (an operation in progress) is
    BadInput, a push that fails a warning."""
    from baton.skills.core.checkpoints import Refused

    task = resolve_task(task_id, place, stores.settings.ambient)
    result, remote, warnings = take_checkpoint(stores, task, place, boundary="manual", label=label, push=push,
                                               by_hand=True)
    if isinstance(result, Refused):
        raise BadInput(f"no checkpoint taken: {result.reason}")
    return CheckpointDone(task, result, warnings, remote)
