"""The handoff skill's entry points: for the CLI, for resume, and (as plain JSON-able dicts)
for the MCP tools `write_handoff` and `verify_handoff`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import WorktreeLocator
from baton.ids import parse_ticket_id, random_uuid
from baton.outcome import NotFound, Unavailable
from baton.registry.model import HandoffVerified
from baton.skills.core.binding import ActiveTask, Place, place_of, resolve_task
from baton.skills.core.commit import record_events
from baton.skills.handoff.verify import Verification, verify_handoff_at
from baton.skills.handoff.write import HandoffReport, write_handoff
from baton.skills.runtime.stores import Stores


@dataclass
class CheckedHandoff:
    verification: Verification
    warnings: list[str] = field(default_factory=list)


def verify_and_record(stores: Stores, place: Place, *, task: ActiveTask | None, path: Path | None = None,
                      only_for: str | None = None, allow_unsigned: bool = False,
                      at: datetime | None = None) -> CheckedHandoff:
    """Verify the handoff at path, else the worktree's current one (only_for: skip other
    tickets' handoffs), and record the verification as an event of the document's ticket,
    else of task. A ticket other than task's is recorded only when it already has a session:
    a file names any ticket it likes, and verifying it must not create one. Never raises
    for a store that is down: that becomes a warning."""
    verification = verify_handoff_at(place.root, place.repo, stores.settings.home, stores.settings.handoff,
                                     path=path, task_id=only_for, allow_unsigned=allow_unsigned,
                                     redact=stores.redact, deadline=stores.deadline)
    checked = CheckedHandoff(verification)
    if verification.path is None or verification.note is not None:
        return checked
    task_id = verification.task_id or (task.task_id if task else None)
    if task_id is None:
        checked.warnings.append("the verification is not recorded: the handoff names no ticket and none is bound here")
        return checked
    try:
        parse_ticket_id(task_id)
    except BadInput:
        checked.warnings.append(f"the verification is not recorded: the handoff names an invalid ticket {task_id!r}")
        return checked
    ours = task if task is not None and task.task_id == task_id else None
    looked = None if ours else stores.registry.get(task_id)
    if isinstance(looked, Unavailable):
        checked.warnings.append(f"session registry unavailable: {looked.reason}; the verification is not recorded")
        return checked
    if isinstance(looked, NotFound):
        checked.warnings.append(f"the verification is not recorded: the handoff names {task_id}, which has no "
                                "session here (bind it, or verify with --task)")
        return checked
    session_id = ours.session_id if ours else "handoff-verify"
    # The counts' keys are the statuses, which name the event's fields.
    event = HandoffVerified.model_validate({
        "event_id": random_uuid(), "task_id": task_id, "session_id": session_id, "at": at or clock.now(),
        "path": verification.path, "written_at": verification.written_at, **verification.counts()})
    try:
        checked.warnings += record_events(stores, [event])
    except StoreUnavailable as exc:
        checked.warnings.append(f"{exc}; the verification is not recorded")
    return checked


def place_for(path: Path | None, cwd: Path) -> tuple[Place, Path | None]:
    """The worktree a handoff belongs to, and the file to verify (None: its current one). PATH
    may be a handoff file or a directory of a worktree; the probes run in the root of the
    worktree holding it (outside git: the directory above docs/handoffs/)."""
    locator = WorktreeLocator()
    if path is None:
        return place_of(cwd, locator), None
    path = cwd / path  # an absolute path stays as it is
    if path.is_dir():
        return place_of(path, locator), None
    if not path.is_file():
        raise BadInput(f"no handoff at {path}")
    place = place_of(path.parent, locator)
    if place.worktree is None and path.parent.name == "handoffs" and path.parent.parent.name == "docs":
        place = Place(path.parent.parent.parent.resolve(), None)
    return place, path


def probes_from_options(given: list[str]) -> tuple[tuple[str, str], ...]:
    probes = []
    for option in given:
        name, sep, command = option.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise BadInput(f"--probe wants NAME=CMD, got {option!r}")
        probes.append((name.strip(), command))
    return tuple(probes)


def handoff_asked(stores: Stores, place: Place, task_id: str | None, checks: Sequence[str],
                  probes: Sequence[tuple[str, str]], timeout: float | None) -> HandoffReport:
    """`baton handoff` for the ticket named, else the worktree's: written, then checkpointed
    and pushed for the next session."""
    from baton.skills.services.checkpoint import checkpoint_here

    task = resolve_task(task_id, place, stores.settings.ambient)
    report = write_handoff(stores, task, place, checks=list(checks), probes=list(probes), timeout=timeout)
    report.warnings += checkpoint_here(stores, task, place, "handoff", push=True)
    return report


def verify_asked(stores: Stores, cwd: Path, path: Path | None, task_id: str | None, allow_unsigned: bool
                 ) -> CheckedHandoff:
    """`baton handoff verify`: the handoff at path (a handoff or a worktree; None: this
    worktree's current one), only one of task_id when given, verified and recorded."""
    place, path = place_for(path, cwd)
    try:
        task: ActiveTask | None = resolve_task(task_id, place, stores.settings.ambient)
    except BadInput:
        if task_id is not None:
            raise
        task = None  # neither named nor bound: recorded under the ticket the handoff names
    return verify_and_record(stores, place, task=task, path=path, only_for=task_id, allow_unsigned=allow_unsigned)
