"""Runs of a ticket and the verbs that start one from recorded state: restore (a checkpoint
into a new worktree, or in place), fork (a new ticket from a checkpoint of another) and
fresh (the same ticket on a new base); the lineage, the checkpoint list and their gc.

Each verb writes the worktree first, then binds it with a RunStart, so the run, its manifest
and its first checkpoint are recorded through the one write path. A checkpoint another clone
took is fetched from the git remote its record names; one that cannot be is an error naming
it, never a reason to start from another.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import WorktreeLocator
from baton.git import first_line, run_git
from baton.ids import TicketId, parse_ticket_id, random_uuid
from baton.outcome import Found, NotFound
from baton.registry.model import CheckpointRecord, CheckpointTaken, Session
from baton.skills.core.binding import Place, place_of, resolve_task
from baton.skills.core.commit import commit, wire_event
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores
from baton.skills.services.bind import RunStart, bind
from baton.skills.services.checkpoint import push_checkpoint
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.skills.core.checkpoint_remote import NotFetched
    from baton.skills.core.checkpoints import Checkpoint, Restored

CHECKOUT_CAP = 60.0  # seconds a new worktree's checkout may take, within the command's deadline
_NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")


def session_of(stores: Stores, task_id: str) -> Session:
    """The ticket's session; BadInput when there is none, StoreUnavailable when the registry
    does not answer (a verb never starts from state it cannot see)."""
    found = stores.registry.get(parse_ticket_id(task_id)).unwrap(Store.SESSION_REGISTRY)
    if found is None:
        raise BadInput(f"no session for {task_id}")
    return found


def _repository(place: Place) -> Path:
    if place.worktree is None:
        raise BadInput(f"{place.root} is not a git worktree: run this inside the ticket's repository")
    return place.root


def _checkpoint(stores: Stores, place: Place, session: Session, checkpoint_id: str | None) -> Checkpoint:
    """The checkpoint asked for (default: the ticket's newest, wherever it was taken), read
    from this repository, fetched from its git remote first when this clone lacks it. Never
    another than the one asked: one that cannot be had is an error saying which and why."""
    from baton.skills.core.checkpoints import read

    wanted = checkpoint_id or (session.checkpoint.id if session.checkpoint else None)
    if wanted is None:
        raise BadInput(f"{session.task_id} has no checkpoint: take one with `baton checkpoint`")
    root = _repository(place)
    found = read(root, wanted, deadline=stores.deadline)
    if isinstance(found, NotFound):  # fetched from the git remote its record names, else an error saying why
        not_fetched = _fetch(stores, place, session, wanted, checkpoint_id is None)
        if not_fetched is not None:
            message = (f"{not_fetched.reason}; nothing written. Another one: `baton restore {session.task_id}@ID` "
                       f"(`baton checkpoints {session.task_id}`)")
            if not_fetched.unreachable:
                raise StoreUnavailable("checkpoints", message)
            raise BadInput(message)
        found = read(root, wanted, deadline=stores.deadline)
    checkpoint = found.unwrap("checkpoints")
    if checkpoint is None:
        raise BadInput(f"no checkpoint {wanted} in {place.root}'s repository (deleted, or taken in another clone)")
    return checkpoint


def _fetch(stores: Stores, place: Place, session: Session, wanted: str, newest: bool) -> NotFetched | None:
    """Why the ticket's checkpoint `wanted` (an id or a prefix of one the registry records),
    which this clone lacks, could not be fetched from the git remote its record names,
    naming it (None: it was). BadInput when the registry records no such checkpoint."""
    from baton.skills.core.checkpoint_remote import NotFetched, fetch

    recorded = recorded_checkpoint(stores, session, wanted)
    if recorded is None:
        raise BadInput(f"no checkpoint {wanted} of {session.task_id} is recorded or held here "
                       f"(`baton checkpoints {session.task_id}` lists them)")
    if stores.settings.checkpoint_push == "off":
        outcome: object = NotFetched("checkpoints stay in the clone that took them here ([checkpoints] push = "
                                     "\"off\")", unreachable=False)
    else:
        outcome = fetch(_repository(place), recorded.id, recorded.remote, stores.settings.checkpoint_remote,
                        stores.deadline)
    if not isinstance(outcome, NotFetched):
        return None
    which = (f"{session.task_id}'s {'newest ' if newest else ''}checkpoint {recorded.id[:12]} ({recorded.boundary}, "
             f"taken {recorded.taken_at.isoformat(timespec='seconds')} in {recorded.worktree_path})")
    return NotFetched(f"{which} is not in this clone and could not be fetched: {outcome.reason}", outcome.unreachable)


def recorded_checkpoint(stores: Stores, session: Session, wanted: str) -> CheckpointRecord | None:
    """The registry's record of the ticket's checkpoint whose id is wanted or starts with it
    (its newest record, saying where it was pushed if any of its records does); None when
    none, BadInput when the prefix names several."""
    latest = session.checkpoint
    if latest is not None and latest.id.startswith(wanted) and latest.remote:
        return latest
    events = stores.registry.events(session.task_id).unwrap(Store.SESSION_REGISTRY) or []
    taken = sorted((e for e in events if isinstance(e, CheckpointTaken) and e.checkpoint_id.startswith(wanted)),
                   key=lambda e: e.at, reverse=True)
    if len({e.checkpoint_id for e in taken}) > 1:
        raise BadInput(f"checkpoint id prefix {wanted} is ambiguous: {len({e.checkpoint_id for e in taken})} "
                       "checkpoints")
    if not taken:
        return latest if latest is not None and latest.id.startswith(wanted) else None
    terms = taken[0].model_dump(include=set(CheckpointRecord.model_fields))  # what the event states of it
    return CheckpointRecord.model_validate({**terms, "id": taken[0].checkpoint_id, "taken_at": taken[0].at,
                                            "remote": next((e.remote for e in taken if e.remote), None)})


def _target(place: Place, into: Path | None, name: str) -> Path:
    if into is not None:
        return Path(os.path.abspath(into))
    return place.root.parent / f"{place.root.name}-{name}"


def _git(cwd: Path, *args: str, deadline: Deadline) -> str:
    """git's answer; BadInput when it refuses (the ref or branch asked for), GitFailed when
    it does not answer."""
    done = run_git(cwd, *_NO_HOOKS, *args, cap=CHECKOUT_CAP, deadline=deadline, check=False)
    if done.returncode != 0:
        raise BadInput(f"git {args[0]}: {first_line(done.stderr) or f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "replace").strip()


def _branch_free(root: Path, branch: str, deadline: Deadline) -> None:
    _git(root, "check-ref-format", "--branch", branch, deadline=deadline)
    if run_git(root, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", deadline=deadline,
               check=False).returncode == 0:
        raise BadInput(f"branch {branch} exists already; nothing written")


@dataclass
class Started:
    """What a restore, fork or fresh start made: where, the run, and what to tell."""

    task_id: str
    worktree: Path
    run_id: str
    kind: str
    parent_run_id: str | None
    diverged_at: str | None
    base: str | None
    branch: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"task_id": self.task_id, "worktree": str(self.worktree), "branch": self.branch,
                "run": {"run_id": self.run_id, "parent_run_id": self.parent_run_id, "kind": self.kind,
                        "diverged_at": self.diverged_at},
                "base": self.base, "notes": self.notes, "warnings": self.warnings}


def parse_task_at(text: str) -> tuple[TicketId, str | None]:
    """TASK[@CHECKPOINT] as (task, checkpoint id or None)."""
    task, sep, checkpoint = text.partition("@")
    if sep and not checkpoint:
        raise BadInput(f"{text!r}: give a checkpoint id after @, or leave out the @")
    return parse_ticket_id(task), checkpoint or None


def restore(stores: Stores, place: Place, target: str, *, at: str | None = None, into: Path | None = None,
            in_place: bool = False) -> Started:
    """A checkpoint of the ticket (target: TASK[@CHECKPOINT], or at: a checkpoint id) brought
    back into a new worktree (or, in place, into this clean one), bound to the ticket in a
    new child run that diverged at the checkpoint."""
    from baton.skills.core import checkpoints

    task_id, checkpoint_id = parse_task_at(target)
    if at is not None and checkpoint_id is not None and at != checkpoint_id:
        raise BadInput(f"two checkpoints asked for: {checkpoint_id} and --at {at}")
    checkpoint_id = checkpoint_id or at
    if in_place and into is not None:
        raise BadInput("give --into PATH or --in-place, not both")
    session = session_of(stores, task_id)
    checkpoint = _checkpoint(stores, place, session, checkpoint_id)
    where = place.root if in_place else _target(place, into, f"{task_id}-{checkpoint.id[:8]}")
    restored = checkpoints.restore(place.root, checkpoint.id, where, in_place=in_place, deadline=stores.deadline)
    return _bound(stores, session, task_id, checkpoint, restored, "restore")[0]


def _bound(stores: Stores, session: Session, task_id: TicketId, checkpoint: Checkpoint, restored: Restored, kind: str,
           **start: str) -> tuple[Started, Place, WriteReport]:
    """The worktree a checkpoint was restored into, bound to task_id in a new run that
    diverged at the checkpoint (kind: restore or fork); the run started says the bind's
    warnings, which a fork's later steps add to."""
    parent = checkpoint.run_id or (session.current_run.text if session.current_run else None)
    started = Started(task_id, restored.path, random_uuid(), kind, parent, checkpoint.id, checkpoint.base,
                      notes=list(restored.notes))
    new_place = place_of(restored.path, WorktreeLocator())
    report = bind(stores, task_id, new_place, push_checkpoint=kind == "fork", start=RunStart(
        started.run_id, kind, parent, diverged_at=checkpoint.id, base=checkpoint.base, **start))
    started.branch, started.warnings = new_place.worktree.branch if new_place.worktree else None, report.warnings
    return started, new_place, report


def fork(stores: Stores, place: Place, task_id: str, new_task_id: str, *, at: str | None = None,
         into: Path | None = None) -> Started:
    """A new ticket from a checkpoint of task_id, in its own worktree and branch (named
    after it); its journal starts with the parent's goal, constraints and decisions, marked
    inherited. Parent and fork both stay active."""
    from baton.skills.core import checkpoints

    new_task_id = parse_ticket_id(new_task_id)
    if new_task_id == task_id:
        raise BadInput("a fork needs a new ticket id (--as)")
    session = session_of(stores, task_id)
    existing = stores.registry.get(new_task_id)
    if isinstance(existing, Found):
        raise BadInput(f"{new_task_id} exists already; fork into a new ticket id")
    checkpoint = _checkpoint(stores, place, session, at)
    _branch_free(place.root, new_task_id, stores.deadline)
    restored = checkpoints.restore(place.root, checkpoint.id, _target(place, into, new_task_id),
                                   deadline=stores.deadline)
    # Keeps the restored index and files.
    _git(restored.path, "checkout", "-q", "-b", new_task_id, deadline=stores.deadline)
    started, new_place, report = _bound(stores, session, new_task_id, checkpoint, restored, "fork",
                                        parent_task_id=task_id)
    report.warnings += _inherit(stores, session, new_task_id, report.session_id or "fork", new_place.repo)
    # The checkpoint the fork diverged at goes with it, so another clone can follow the lineage.
    report.warnings += push_checkpoint(stores, place, checkpoint.id)[1]
    return started


def _inherit(stores: Stores, parent: Session, task_id: str, session_id: str, repo: str) -> list[str]:
    common = (task_id, session_id, clock.now())
    events = []
    if parent.goal:
        events.append(wire_event("goal_set", *common, text=parent.goal, inherited_from=parent.task_id))
    events += [wire_event("constraint_added", *common, text=c.text, inherited_from=parent.task_id)
               for c in parent.constraints]
    events += [wire_event("decision_recorded", *common, text=d.text, context=d.context, repo=repo,
                          inherited_from=parent.task_id) for d in parent.decisions]
    report = WriteReport()
    if events:
        commit(stores, events, report)
    return report.warnings


def default_base(root: Path, deadline: Deadline | None = None) -> str:
    """The repository's default branch: origin's HEAD, else main or master, else HEAD."""
    for ref in ("refs/remotes/origin/HEAD", "refs/heads/main", "refs/heads/master", "HEAD"):
        if run_git(root, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", deadline=deadline,
                   check=False).returncode == 0:
            return ref
    raise BadInput(f"{root} has no commit to start from: give --base REF")


def fresh(stores: Stores, place: Place, task_id: str, *, base: str | None = None,
          into: Path | None = None) -> Started:
    """The ticket again on a new base (default: the repository's default branch), in a new
    worktree on a branch of its own: the journal stays (earlier runs' evidence shows as
    inherited), a new environment manifest and run are recorded, the previous run is
    superseded."""
    from baton.skills.core.checkpoints import read

    task_id = parse_ticket_id(task_id)
    session = session_of(stores, task_id)
    root = _repository(place)
    ref = base or default_base(root, stores.deadline)
    commit_id = _git(root, "rev-parse", "-q", "--verify", "--end-of-options", f"{ref}^{{commit}}",
                     deadline=stores.deadline)
    run_id = random_uuid()
    branch = f"baton/{task_id}/fresh-{run_id[:8]}"
    _branch_free(root, branch, stores.deadline)
    target = _target(place, into, f"{task_id}-fresh-{run_id[:8]}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BadInput(f"{target} is not an empty directory; nothing written")
    _git(root, "worktree", "add", "-q", "-b", branch, str(target), commit_id, deadline=stores.deadline)
    parent = session.current_run.text if session.current_run else None
    started = Started(task_id, target, run_id, "fresh", parent, None, commit_id, branch=branch)
    # The superseded run's newest checkpoint stays within reach of this clone (to compare,
    # or restore it later): fetched when missing; one that cannot be is a warning.
    fetching: list[str] = []
    if session.checkpoint is not None and isinstance(read(root, session.checkpoint.id, deadline=stores.deadline),
                                                     NotFound):
        not_fetched = _fetch(stores, place, session, session.checkpoint.id, True)
        fetching += [not_fetched.reason] if not_fetched is not None else []
    report = bind(stores, task_id, place_of(target, WorktreeLocator()),
                  start=RunStart(run_id, "fresh", parent, base=commit_id))
    started.warnings = fetching + report.warnings
    return started


@dataclass(frozen=True, slots=True)
class RunLine:
    task_id: str
    run_id: str
    kind: str
    parent_run_id: str | None
    parent_task_id: str | None
    diverged_at: str | None
    started_at: str
    state: str  # current | superseded | earlier
    depth: int
    late_writes: int = 0  # the writes a take-over fenced out of this run (Session.late_writes)

    def to_json(self) -> dict:
        return asdict(self)


def named_or_bound(stores: Stores, place: Place, task_id: str | None) -> str:
    return task_id or resolve_task(None, place, stores.settings.ambient).task_id


def lineage(stores: Stores, task_id: str) -> list[RunLine]:
    """The ticket's runs and the forks started from them, as a tree in depth-first order."""
    session = session_of(stores, task_id)
    listed = stores.registry.list_sessions(include_inactive=True)
    others = listed.value if isinstance(listed, Found) else []
    # The ticket's forks, each with all its runs (a fork's later runs follow its first).
    forks = [s for s in others if any(r.kind == "fork" and r.parent_task_id == task_id for r in s.run_log)]
    runs = [(owner, r) for owner in [session, *forks] for r in owner.run_log]
    ids = {r.text for _, r in runs}
    children: dict[str | None, list] = {}
    for owner, run in runs:
        children.setdefault(run.parent_run_id if run.parent_run_id in ids else None, []).append((owner, run))
    lines: list[RunLine] = []

    def walk(parent: str | None, depth: int) -> None:
        for owner, run in sorted(children.get(parent, []), key=lambda item: (item[1].at, item[1].text)):
            current = owner.current_run
            state = ("superseded" if run.text in owner.superseded_runs()
                     else "current" if current is not None and current.text == run.text else "earlier")
            lines.append(RunLine(owner.task_id, run.text, run.kind, run.parent_run_id, run.parent_task_id,
                                 run.diverged_at, run.at.isoformat(), state, depth,
                                 sum(1 for w in owner.late_writes if w.run_id == run.text)))
            walk(run.text, depth + 1)

    walk(None, 0)
    return lines


@dataclass(frozen=True, slots=True)
class CheckpointLine:
    id: str
    boundary: str
    label: str | None
    run_id: str | None
    base: str | None
    worktree_path: str
    taken_at: str
    present: bool | None  # its ref exists in this repository (None: not asked, outside git)
    remote: str | None = None  # the git remote it was pushed to (where another clone fetches it)

    def to_json(self) -> dict:
        return asdict(self)


def checkpoints_of(stores: Stores, place: Place, task_id: str) -> list[CheckpointLine]:
    """The checkpoints recorded for the ticket, newest first, each said present or not in
    this worktree's repository."""
    from baton.skills.core.checkpoints import list_checkpoints

    session_of(stores, task_id)
    events = stores.registry.events(task_id).unwrap(Store.SESSION_REGISTRY) or []
    present = None
    if place.worktree is not None:
        listed = list_checkpoints(place.root, deadline=stores.deadline)
        present = {c.id for c in listed.value} if isinstance(listed, Found) else None
    taken = sorted((e for e in events if isinstance(e, CheckpointTaken)), key=lambda e: e.at, reverse=True)
    # A checkpoint recorded again once pushed: any of its records names the remote.
    remotes = {e.checkpoint_id: e.remote for e in reversed(taken) if e.remote}
    newest: dict[str, CheckpointTaken] = {}
    for event in taken:
        newest.setdefault(event.checkpoint_id, event)
    return [CheckpointLine(e.checkpoint_id, e.boundary, e.label, e.run_id, e.base, e.worktree_path, e.at.isoformat(),
                           None if present is None else e.checkpoint_id in present, remotes.get(e.checkpoint_id))
            for e in newest.values()]


@dataclass(frozen=True, slots=True)
class Collected:
    removed: tuple[str, ...]
    kept: int
    dry_run: bool
    records_removed: int = 0  # their checkpoint_taken records in the registry
    remote_removed: tuple[str, ...] = ()  # the refs this clone had pushed, deleted on the git remote
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return asdict(self)


def collect(stores: Stores, place: Place, *, keep: int | None = None, dry_run: bool = False) -> Collected:
    """Remove the checkpoints of this repository that nothing needs: their refs, the refs this
    clone pushed of them on the git remote (each while it still names the commit pushed), then
    their records. Kept: every ticket's latest, each run's divergence points, the newest `keep`
    of each run (default `[checkpoints] keep_per_run`) and its newest handoff checkpoint; a
    fetched checkpoint keeps its record (its own clone's gc decides). Nothing is removed when
    the registry does not answer; what fails is removed by the next gc."""
    from baton.skills.core import checkpoint_remote
    from baton.skills.core.checkpoints import gc, list_checkpoints

    keep = stores.settings.checkpoint_keep if keep is None else keep
    if keep < 1:
        raise BadInput("--keep must be at least 1")
    sessions = stores.registry.list_sessions(include_inactive=True).unwrap(Store.SESSION_REGISTRY) or []
    root = _repository(place)
    held_list: Sequence[Checkpoint] = list_checkpoints(root, deadline=stores.deadline).unwrap("checkpoints") or []
    needed = {s.checkpoint.id for s in sessions if s.checkpoint}
    needed |= {r.diverged_at for s in sessions for r in s.run_log if r.diverged_at}
    per_run: dict[str | None, list] = {}
    for checkpoint in held_list:  # newest first
        per_run.setdefault(checkpoint.run_id, []).append(checkpoint)
    for taken in per_run.values():
        needed |= {c.id for c in taken[:keep]}
        needed |= {c.id for c in [c for c in taken if c.boundary == "handoff"][:1]}
    doomed = tuple(sorted(c.id for c in held_list if c.id not in needed))
    held = {c.id for c in held_list}
    # Pushed by this clone and gone from it since (deleted by an earlier gc whose remote
    # deletion failed): deleted on the remote now, unless something still needs them.
    pushed = set(checkpoint_remote.pushed(root, stores.deadline))
    remote_doomed = sorted((pushed & set(doomed)) | {i for i in pushed - held if i not in needed})
    if dry_run or not (doomed or remote_doomed):
        return Collected(doomed, len(held_list) - len(doomed), dry_run, remote_removed=tuple(remote_doomed))
    # An unreadable record goes too.
    doomed = gc(root, {c.id for c in held_list if c.id not in doomed}, deadline=stores.deadline)
    pruned = checkpoint_remote.prune(root, remote_doomed, stores.deadline)
    fetched = checkpoint_remote.fetched(root, stores.deadline)
    checkpoint_remote.forget_fetched(root, doomed, stores.deadline)
    records = stores.registry.forget_checkpoints([i for i in doomed if i not in fetched])
    return Collected(doomed, len(held_list) - len(doomed), dry_run, records, pruned.deleted, pruned.warnings)
