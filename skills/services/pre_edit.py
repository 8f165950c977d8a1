"""The check before an edit: the files a tool is about to change, looked up against other
active tickets' touches and leases, answered as a verdict (allow, ask or deny) the agent's
PreToolUse hook, `baton check` and the check_paths tool each give in their own form.

It runs in the hook's 100 ms budget: no pydantic, no signal model. The verdict is a pure
function of what the stores answered (verdict()); check_paths() asks them. A store that
cannot answer never blocks the edit: the verdict allows it and says what was not checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from baton import clock
from baton.errors import BadInput
from baton.files import FileRef, WorktreeLocator, check_path_text
from baton.outcome import Found, Unavailable
from baton.registry.base import HolderNote
from baton.shown_text import clipped, one_line
from baton.skills.core.binding import Place, read_binding, resolve_task
from baton.skills.runtime.stores import Stores
from baton.skills.services.leases import Lease, leases_covering

ASK, DENY, ALLOW = "ask", "deny", "allow"
ON_EXCLUSIVE = (ASK, DENY)  # what `[conflicts] on_exclusive` may say
SHOWN_HOLDERS = 5  # tickets named per file: the rest are counted
NEXT_ACTION_WIDTH = 160

Touch = tuple[str, datetime]  # another ticket, and when it last touched the file
_UNKNOWN = HolderNote(None, None, None)  # a holder the registry did not describe


@dataclass(frozen=True)
class Holding:
    """One other ticket's hold on one file: a touch, a shared lease or an exclusive one."""

    path: str
    task_id: str
    kind: str  # "touch", "shared lease" or "exclusive lease"
    at: datetime  # a touch: when it last touched the file; a lease: when it expires
    agent: str | None = None
    branch: str | None = None
    next_action: str | None = None
    reason: str | None = None  # a lease's own reason
    pattern: str | None = None  # the lease's pattern

    def public(self) -> dict:
        shown = {"path": self.path, "task_id": self.task_id, "kind": self.kind,
                 "expires_at" if self.kind.endswith("lease") else "last_touched_at": self.at.isoformat(),
                 "agent": self.agent, "branch": self.branch, "next_action": self.next_action,
                 "reason": self.reason, "pattern": self.pattern}
        return {key: value for key, value in shown.items() if value is not None}


@dataclass
class Verdict:
    """allow (the agent's own permission rules apply), ask or deny; reason: why it asks or
    denies; context: the overlaps the model is to read before it edits; warnings: what
    could not be checked (the edit goes ahead)."""

    decision: str = ALLOW
    reason: str | None = None
    context: str | None = None
    holdings: list[Holding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def public(self) -> dict:
        return {"decision": self.decision, "reason": self.reason, "context": self.context, "files": self.files,
                "holdings": [h.public() for h in self.holdings], "warnings": self.warnings}


def verdict(touches: Mapping[str, Sequence[Touch]], leases: Mapping[str, Sequence[Lease]],
            holders: Mapping[str, HolderNote], *, on_exclusive: str) -> Verdict:
    """The verdict on editing the files named in touches and leases (by path; other tickets'
    holds only): another ticket's exclusive lease asks or denies, as on_exclusive says;
    a touch or a shared lease allows, with the overlap as context; nothing allows, silently."""
    if on_exclusive not in ON_EXCLUSIVE:
        raise ValueError(f"on_exclusive is {on_exclusive!r}, not one of {', '.join(ON_EXCLUSIVE)}")
    holdings = []
    for path in sorted(set(touches) | set(leases)):
        for lease in sorted(leases.get(path, ()), key=lambda lease: (not lease.exclusive, lease.task_id)):
            note = holders.get(lease.task_id, _UNKNOWN)
            holdings.append(Holding(path, lease.task_id, "exclusive lease" if lease.exclusive else "shared lease",
                                    lease.expires_at, lease.agent or note.agent, note.branch, note.next_action,
                                    lease.reason, lease.pattern))
        for task_id, at in sorted(touches.get(path, ()), key=lambda touch: touch[0]):
            holdings.append(Holding(path, task_id, "touch", at, *holders.get(task_id, _UNKNOWN)))
    result = Verdict(holdings=holdings)
    exclusive = [h for h in holdings if h.kind == "exclusive lease"]
    if exclusive:
        result.decision, result.reason = on_exclusive, _exclusive_reason(exclusive, on_exclusive)
    rest = [h for h in holdings if h.kind != "exclusive lease"]
    if rest:
        result.context = _overlap_context(rest)
    return result


def _exclusive_reason(exclusive: list[Holding], on_exclusive: str) -> str:
    held = "; ".join(f"{h.path} is held exclusively by {_who(h)} until {clock.shown(h.at)}"
                     + (f" ({clipped(one_line(h.reason), NEXT_ACTION_WIDTH)})" if h.reason else "")
                     for h in exclusive[:SHOWN_HOLDERS])
    more = f"; and {len(exclusive) - SHOWN_HOLDERS} more" if len(exclusive) > SHOWN_HOLDERS else ""
    tickets = ", ".join(dict.fromkeys(h.task_id for h in exclusive))
    if on_exclusive == DENY:
        return (f"Baton: {held}{more}. The edit is refused ([conflicts] on_exclusive = \"deny\"): ask the holder "
                f"of {tickets} to release the lease, or wait until it expires.")
    return f"Baton: {held}{more}. Edit it anyway? The holder of {tickets} may be changing it now."


def _overlap_context(holdings: list[Holding]) -> str:
    lines = [("Baton: before this edit, note that another active ticket works on these files "
              "(advisory: coordinate with its holder, or keep your change apart):")]
    for h in holdings[:SHOWN_HOLDERS * 2]:
        what = (f"touched it, last at {clock.shown(h.at)}" if h.kind == "touch"
                else f"holds a shared lease on it ({one_line(h.pattern or h.path)}) until {clock.shown(h.at)}")
        line = f"- {h.path}: {_who(h)} {what}"
        if h.reason:
            line += f"; lease reason: {clipped(one_line(h.reason), NEXT_ACTION_WIDTH)}"
        if h.next_action:
            line += f"; their next action: {clipped(one_line(h.next_action), NEXT_ACTION_WIDTH)}"
        lines.append(line)
    if len(holdings) > SHOWN_HOLDERS * 2:
        lines.append(f"- and {len(holdings) - SHOWN_HOLDERS * 2} more")
    return "\n".join(lines)


def _who(h: Holding) -> str:
    parts = [f"agent {one_line(h.agent)}"] if h.agent else []
    if h.branch:
        parts.append(f"branch {one_line(h.branch)}")
    return f"ticket {one_line(h.task_id)}" + (f" ({', '.join(parts)})" if parts else "")


def target_refs(raw_paths: Sequence[str], cwd: Path, locator: WorktreeLocator) -> list[FileRef]:
    """The files raw_paths name (relative to cwd, or absolute), each relative to the worktree
    that holds it, which need not be cwd's: an agent may edit another worktree's file. A path
    outside every worktree, or one no file can have, is not checked (the edit's own hook
    reports it)."""
    refs: dict[str, FileRef] = {}
    for raw in raw_paths:
        try:
            check_path_text(raw)
        except BadInput:
            continue
        real = Path(os.path.realpath(os.path.join(cwd, raw)))
        worktree = locator.locate(real.parent)
        if worktree is None or real == worktree.root:
            continue
        ref = FileRef(repo=worktree.repo, path=real.relative_to(worktree.root).as_posix())
        refs.setdefault(ref.key, ref)
    return list(refs.values())


def checking_task(explicit: str | None, place: Place, ambient: tuple[str | None, str | None]) -> str | None:
    """The ticket whose edit is checked (resolve_task's), or None outside any ticket: then
    every active ticket's holds count."""
    if explicit is None and read_binding(place) is None and not ambient[0]:
        return None
    return resolve_task(explicit, place, ambient).task_id


def check_paths(stores: Stores, task_id: str | None, raw_paths: Sequence[str], cwd: Path,
                locator: WorktreeLocator) -> Verdict:
    """The verdict on editing raw_paths for task_id (None: every ticket is another's), as
    `[conflicts] on_exclusive` sets it. A store that cannot answer allows the edit, with a
    warning saying what was not checked; it never raises for one."""
    refs = target_refs(raw_paths, cwd, locator)
    if not refs:
        return Verdict()
    warnings: list[str] = []
    found = stores.graph.touchers(refs, exclude=task_id)
    if isinstance(found, Unavailable):
        warnings.append(f"other tickets' touches not checked: conflict graph unavailable: {found.reason}")
    touched = found.value if isinstance(found, Found) else {}
    touches: dict[str, list[Touch]] = {_shown(ref, refs): touched[ref] for ref in refs if ref in touched}
    leased: dict[str, Sequence[Lease]] = {}
    for repo in dict.fromkeys(ref.repo for ref in refs):
        paths = [ref.path for ref in refs if ref.repo == repo]
        covering = leases_covering(stores, repo, paths, exclude_task=task_id)
        if isinstance(covering, Unavailable):
            warnings.append(f"leases not checked: {covering.reason}")
            continue
        leased |= {_shown(FileRef(repo, path), refs): hits for path, hits in covering.items() if hits}
    others = {task for held in touches.values() for task, _ in held} | {h.task_id for hits in leased.values()
                                                                           for h in hits}
    notes: Mapping[str, HolderNote] = {}
    if others:
        read = stores.registry.holder_notes(sorted(others))
        notes = read.value if isinstance(read, Found) else {}
    result = verdict(touches, leased, notes, on_exclusive=stores.settings.on_exclusive)
    result.files, result.warnings = [ref.path for ref in refs], warnings
    return result


def _shown(ref: FileRef, refs: Sequence[FileRef]) -> str:
    """A file as the verdict names it: its path, or its key where files of two repositories are checked."""
    return ref.path if len({r.repo for r in refs}) == 1 else ref.key
