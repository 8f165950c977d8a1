"""The end of an agent's turn, as the stop and session-end hooks record it: deliver what waits
locally, (stop) checkpoint a changed tree, record the files changed since this agent
session's last sweep (shell edits included) or else the turn's activity, write a handoff
where the configuration names this hook, and (at the session's end) forget the agent
session. Each step runs whatever an earlier one did and answers its own result, which the
hook renders. Nothing here imports the event models: the hooks stay off pydantic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.skills.core.batons_own import BATONS_OWN
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.runtime.agent_sessions import FILE, AgentSessions
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.files import WorktreeLocator

STOP, SESSION_END = "stop", "session-end"
MAX_SWEEP = 1000  # files recorded at one end of turn; the rest at the next
STOP_BUDGET = 2.0  # seconds the stop hook's checkpoint may use, counted from the hook's start


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The turn that ended, as the hook read it from its payload."""

    hook: str  # STOP or SESSION_END
    agent_session: str
    task: ActiveTask | None  # None: the worktree works on no ticket
    place: Place
    locator: WorktreeLocator
    started: float  # time.monotonic() when the hook started: the checkpoint's budget counts from it


@dataclass
class StepResult:
    doing: str  # what the step does, as its failure is reported ("recording changed files")
    warnings: list[str] = field(default_factory=list)
    failure: Exception | None = None  # what stopped it; the next step ran anyway


def end_of_turn(stores: Stores, turn: TurnEnd) -> list[StepResult]:
    task, place = turn.task, turn.place
    results = [_run("delivering kept writes", lambda: stores.sink.deliver())]
    listed: list[tuple[str, ...]] = []  # the checkpoint's `git status`, which the sweep reuses
    if task is not None and turn.hook == STOP and place.worktree is not None:
        results.append(_run("taking a checkpoint", lambda: _checkpoint(stores, turn, task, listed)))
    swept: list[int] = []
    if task is not None and place.worktree is not None:
        results.append(_run("recording changed files", lambda: _sweep(stores, turn, task, listed, swept)))
    if task is not None and not any(swept):
        results.append(_run("recording activity", lambda: _record_activity(stores, task)))
    if task is not None and stores.settings.hook_handoff == turn.hook:
        from baton.skills.handoff.write import write_handoff

        results.append(_run("writing the handoff", lambda: write_handoff(stores, task, place).warnings))
    if turn.hook == SESSION_END and (stores.settings.home / FILE).exists():  # nothing to forget: create nothing
        results.append(_run("forgetting the agent session", lambda: _forget(stores, turn.agent_session)))
    return results


def _run(doing: str, step: Callable[[], list[str]]) -> StepResult:
    try:
        return StepResult(doing, step())
    except Exception as exc:  # noqa: BLE001 -- the next step must run: answered, not raised
        return StepResult(doing, failure=exc)


def _checkpoint(stores: Stores, turn: TurnEnd, task: ActiveTask, listed: list[tuple[str, ...]]) -> list[str]:
    """Only when the tree changed since the last checkpoint: the take answers Unchanged from
    one `git status`, hashing nothing. A refusal is a warning."""
    from baton.skills.services.checkpoint import boundary_checkpoint

    warnings, taken = boundary_checkpoint(stores, task, turn.place, STOP,
                                          timeout=max(0.2, STOP_BUDGET - (time.monotonic() - turn.started)))
    if taken is not None:
        listed.append(taken.dirty)
    return warnings


def _sweep(stores: Stores, turn: TurnEnd, task: ActiveTask, listed: list[tuple[str, ...]],
           swept: list[int]) -> list[str]:
    """Record the worktree's files changed since this agent session's last sweep (at most
    MAX_SWEEP; the rest at the next), and only then count them as swept; how many goes to
    swept. listed: the changed paths the checkpoint's git status just named (else git
    status is asked)."""
    from baton.skills.services.touch import touch

    root = turn.place.root
    dirty = without_batons_own(dirty_files(root, listed[0] if listed else None, stores.deadline))
    with _agent_sessions(stores) as sessions:
        changed = sessions.changed_since_sweep(turn.agent_session, task.task_id, dirty)[:MAX_SWEEP]
        if not changed:
            return []
        warnings = touch(stores, task, changed, root, turn.locator, skip_refused=True).warnings
        sessions.record_sweep(turn.agent_session, task.task_id, {path: dirty[path] for path in changed}, clock.now())
    swept.append(len(changed))
    return warnings


def _record_activity(stores: Stores, task: ActiveTask) -> list[str]:
    """An end of turn with no file changed still counts as the ticket's activity. Its event
    is built by hand and kept as a touch's is (the embedded registry takes it unprojected,
    projecting it before its next read)."""
    from baton.skills.core.commit import wire_event

    stores.sink.keep([wire_event("activity_recorded", task.task_id, task.session_id, clock.now())])
    return []


def _forget(stores: Stores, agent_session: str) -> list[str]:
    with _agent_sessions(stores) as sessions:
        sessions.forget(agent_session, now=clock.now())
    return []


def _agent_sessions(stores: Stores) -> closing[AgentSessions]:
    return closing(AgentSessions(stores.settings.home, timeout=stores.settings.store_timeout))


def dirty_files(root: Path, listed: tuple[str, ...] | None = None, deadline: Deadline | None = None
                ) -> dict[str, float]:
    """Changed, added, deleted and untracked files of the worktree at root: {relative path:
    modification time, -1 for a deleted file}; listed: their paths, when known already (else
    git status is asked, within the deadline). GitFailed when git cannot say."""
    if listed is None:
        from baton.git import run_git

        # No optional locks (run_git): a status run by a hook must not take the index lock from the agent's git.
        out = run_git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                      deadline=deadline).stdout
        listed = tuple(entry[3:] for entry in out.decode("utf-8", "surrogateescape").split("\0") if len(entry) > 3)
    dirty = {}
    for path in listed:
        try:
            dirty[path] = (root / path).stat().st_mtime
        except FileNotFoundError:
            dirty[path] = -1.0
    return dirty


def without_batons_own(dirty: dict[str, float]) -> dict[str, float]:
    """dirty without the files Baton writes itself (baton.skills.core.batons_own): every
    ticket writes these, so sweeping them as touches would make every ticket overlap every other."""
    return {path: mtime for path, mtime in dirty.items() if not path.startswith(BATONS_OWN)}
