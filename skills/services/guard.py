"""The pre-commit guard (`baton guard`): are the staged files also being changed by another
active ticket?

The staged files are recorded as touches of this worktree's ticket (committing them is
touching them), then the ticket's overlaps concerning a staged file are read from the
conflict graph: advisory, unless the caller is strict. A staged path (both sides of a
rename) under another ticket's exclusive lease blocks the commit unless BATON_GUARD=warn; a
shared lease only warns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import BadInput
from baton.files import WorktreeLocator
from baton.git import first_line, run_git
from baton.outcome import Found, Unavailable
from baton.skills.core.binding import Place, read_binding, resolve_task
from baton.skills.runtime.stores import Stores

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.skills.services.leases import Lease


@dataclass
class GuardReport:
    task_id: str | None
    staged: list[str] = field(default_factory=list)
    overlaps: dict[str, list[str]] = field(default_factory=dict)  # other ticket -> staged files it shares
    leased: dict[str, list[Lease]] = field(default_factory=dict)  # staged path -> other tickets' leases on it
    warnings: list[str] = field(default_factory=list)


def staged_files(root: Path, deadline: Deadline | None = None) -> list[str]:
    """Paths staged for commit, relative to the worktree root (both sides of a rename).
    BadInput when git refuses, GitFailed when it does not answer."""
    out = run_git(root, "diff", "--cached", "--name-only", "-z", "--no-renames", deadline=deadline, check=False)
    if out.returncode != 0:
        raise BadInput(f"cannot list staged files: {first_line(out.stderr)}")
    return [p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def guard(stores: Stores, place: Place, locator: WorktreeLocator) -> GuardReport:
    if place.worktree is None:
        raise BadInput(f"{place.root} is not in a git repository")
    if read_binding(place) is None and not stores.settings.task_id:
        return GuardReport(None)
    task = resolve_task(None, place, stores.settings.ambient)
    report = GuardReport(task.task_id, staged_files(place.root, stores.deadline))
    if not report.staged:
        return report
    from baton.skills.services.touch import MAX_PATHS_PER_CALL, touch

    staged_keys = set()
    for start in range(0, len(report.staged), MAX_PATHS_PER_CALL):
        chunk = report.staged[start:start + MAX_PATHS_PER_CALL]
        # A staged link that leads out of the repository is committed but not a touch.
        touched = touch(stores, task, chunk, place.root, locator, skip_refused=True)
        staged_keys |= {ref.key for ref in touched.files}
        report.warnings += touched.warnings
    from baton.skills.services.leases import leases_covering

    covering = leases_covering(stores, place.repo, report.staged, exclude_task=task.task_id)
    if isinstance(covering, Unavailable):
        report.warnings.append(f"session registry unavailable: {covering.reason}; leases not checked")
    else:
        report.leased = covering
    shared = stores.graph.shared_files(task.task_id)
    if not isinstance(shared, Found):
        report.warnings.append(f"conflict graph unavailable: {shared.reason}; staged files not checked")
        return report
    for other, files in sorted(shared.value.items()):
        paths = sorted(f.path for f in files if f.key in staged_keys)
        if paths:
            report.overlaps[other] = paths
    return report


def blocking_leases(report: GuardReport) -> dict[str, Lease]:
    """Each staged path under another ticket's exclusive lease, with the first such lease."""
    return {path: next(hit for hit in hits if hit.exclusive) for path, hits in report.leased.items()
            if any(hit.exclusive for hit in hits)}
