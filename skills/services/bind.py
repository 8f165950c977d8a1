"""The bind skill: bind a worktree to a ticket and record the session (its events kept as a
touch's are, baton.skills.runtime.sink)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import GitFailed, StoreUnavailable
from baton.ids import BATON_NAMESPACE, TicketId, name_uuid
from baton.outcome import Found, NotFound, Unavailable
from baton.signals.wire import SignalType
from baton.skills.core.binding import ActiveTask, Binding, Place, write_binding
from baton.skills.core.commit import WireEvent, publish, read_binding_quietly, redacted, wire_event
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import WriteReport
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

if TYPE_CHECKING:
    from concurrent.futures import Future

    from baton.registry.model import Session
    from baton.skills.core.environment import Manifest
    from baton.skills.services.checkpoint import LocalRun


@dataclass(frozen=True, slots=True)
class RunStart:
    """A run a restore, fork or fresh start begins with its bind (a plain bind starts the
    ticket's first run, or a reopened ticket's next, itself)."""

    run_id: str
    kind: str  # restore | fork | fresh
    parent_run_id: str | None
    parent_task_id: str | None = None  # a fork: the ticket forked
    diverged_at: str | None = None  # the checkpoint it started from
    base: str | None = None


@dataclass(frozen=True, slots=True)
class BindReads:
    """What a bind reads before it writes: the worktree's binding (None when it is missing or
    unreadable: the bind rewrites it) and the ticket's session. A resume has read both already."""

    binding: Binding | None
    session: Found[Session] | NotFound | Unavailable


def bind(stores: Stores, task_id: TicketId, place: Place, *, agent: str | None = None,
         session_id: str | None = None, at: datetime | None = None, start: RunStart | None = None,
         read: BindReads | None = None, push_checkpoint: bool = False, take_over: bool = False) -> WriteReport:
    """Bind the worktree to task_id and record the session; a completed ticket is reopened.

    One run holds a ticket (baton.skills.services.takeover): while a live run holds it in
    another worktree, a plain bind writes nothing and raises Refused; take_over moves it here in
    a new run with the next fencing token, stored in the registry first (StoreUnavailable when
    it does not answer). A restore, fork or fresh start (start) starts its own run. A bind
    without an agent keeps the one recorded. Claim ids derive from the ticket, the session and
    the run, so binding again emits nothing new. The binding file is written even when the
    registry is down, so the worktree always knows its ticket. read: the binding and the session
    when the caller read them (else read here, after delivering this machine's kept writes);
    push_checkpoint: the bind's checkpoint goes to the git remote too (a fork's first)."""
    from baton.skills.services.checkpoint import local_run

    at = at or clock.now()
    report = WriteReport()
    here = local_run(place, task_id)  # the worktree's run of the ticket, read once
    environment = _environment_ahead(stores, place, here)
    if read is None:
        if start is None:  # whether another run holds the ticket is read with this machine's writes delivered
            report.warnings += stores.sink.deliver()
        read = BindReads(read_binding_quietly(place), stores.registry.get(task_id))
    previous = read.binding
    same_task = previous if previous is not None and previous.task_id == task_id else None
    if session_id is None:
        session_id = bound_session(previous, task_id)
    report.session_id = session_id
    report.previous_task = previous.task_id if previous and not same_task else None
    rebinding = same_task is not None and same_task.session_id == session_id
    current = read.session
    if start is None:
        start = _held_elsewhere(stores, task_id, place, session_id, current, at, take_over, report)
    write_binding(place, Binding(task_id, session_id, at, agent or (same_task.agent if same_task else None)))
    if isinstance(current, Unavailable) and stores.sink.writes_need_registry:
        raise StoreUnavailable(Store.SESSION_REGISTRY, current.reason)
    # Unknown while the server is down: the bind still makes the ticket active when it lands.
    reopens = isinstance(current, Found) and current.value.status == "completed"
    # The bind's number among the ticket's first bind and reopenings, which its run id and
    # claim derive from (so two reopening binds of one state start one run), not its runs.
    run = (1 + len(current.value.reopened_by) + reopens if isinstance(current, Found)
           else 1 if isinstance(current, NotFound) else None)
    claim = f"{task_id}:{session_id}:run {run}"
    event = wire_event("bound", task_id, session_id, at,
                       event_id=str(name_uuid(BATON_NAMESPACE, f"reopen:{claim}")) if reopens else None,
                       agent=agent, repo=place.repo, worktree_path=str(place.root),
                       branch=place.worktree.branch if place.worktree else None, reopens=reopens)
    # A run carried on here (joined, or taken over) from a clean worktree records no checkpoint
    # in front of the ticket's newest, which holds the work.
    joins = (start is None or start.kind == "takeover") and not reopens and _joins_from_elsewhere(here, current)
    events = [event, *_run_events(stores, task_id, session_id, place, current, run, reopens, start, at, here,
                                          environment)]
    # Kept as a touch is, without the event models (pydantic and the models were about 0.1 s of a
    # new data home's first bind): the registry projects them at its next read; the graph, the
    # one other store a bind changes, learns the ticket active now.
    stores.sink.keep(redacted(stores, events), derive=lambda: _graph_active(
        stores, task_id, session_id, at, current.value.depends_on if isinstance(current, Found) else (), report))
    if place.worktree is not None and not (joins and _clean(place, stores)):
        from baton.skills.services.checkpoint import boundary_checkpoint

        report.warnings += boundary_checkpoint(stores, ActiveTask(task_id, session_id, "bind"), place,
                                               start.kind if start else "bind", push=push_checkpoint)[0]
    if run is not None or not rebinding:  # with the run unknown, a session that bound already has claimed
        task = ActiveTask(task_id, session_id, "bind")
        publish(stores, [wire_signal(SignalType.ticket_claimed, claim, task, place.repo, at,
                                     reason="reopened" if reopens else "")], report)
    return report


def _graph_active(stores: Stores, task_id: TicketId, session_id: str, at: datetime, depends_on: Sequence[str],
                  report: WriteReport) -> None:
    """The bind's part of the projection in the graph (its events touch no file): the ticket active."""
    try:
        stores.graph.record(task_id, "active", [], at, session_id=session_id, depends_on=depends_on)
    except StoreUnavailable as exc:
        report.warnings.append(str(exc))


def _held_elsewhere(stores: Stores, task_id: TicketId, place: Place, session_id: str,
                    current: Found[Session] | NotFound | Unavailable, at: datetime, take_over: bool,
                    report: WriteReport) -> RunStart | None:
    """The run a take-over starts (None: the bind goes on as it would); raises Refused for a
    plain bind while a live run holds the ticket in another worktree. With the registry
    down a plain bind cannot tell and goes on; a take-over needs its answer."""
    if isinstance(current, Unavailable):
        if take_over:
            raise StoreUnavailable(Store.SESSION_REGISTRY, f"{current.reason}; a take-over needs the registry's answer")
        return None
    if not isinstance(current, Found):
        return None
    from baton.skills.services.takeover import holder_elsewhere, refuse_contested, take_over as move

    holder = holder_elsewhere(stores, current.value, place, session_id, at)
    if holder is None:
        return None
    if take_over:
        run_id, superseded_run = move(stores, task_id, place, session_id, holder, current.value, at, report)
        return RunStart(run_id, "takeover", superseded_run)
    if holder.live:
        raise refuse_contested(stores, task_id, place, session_id, holder, current.value, at)
    return None


def bound_session(previous: Binding | None, task_id: TicketId) -> str:
    """The session a bind of task_id records: the binding's own when it names task_id, else a new one."""
    return previous.session_id if previous is not None and previous.task_id == task_id else uuid.uuid4().hex


def _run_events(stores: Stores, task_id: TicketId, session_id: str, place: Place,
                current: Found[Session] | NotFound | Unavailable, run: int | None, reopens: bool,
                start: RunStart | None, at: datetime, here: LocalRun | None,
                environment: Future[Manifest | None] | None) -> list[WireEvent]:
    """The run this bind starts (none when it joins the current one), recorded in the
    worktree's run file. A bind's run id derives from the ticket and the run's number, so
    a second bind, or a replay, starts nothing new. here: the worktree's run as the bind
    found it; environment: the manifest being captured."""
    from baton.skills.services.checkpoint import capture_environment, write_local_run

    session = current.value if isinstance(current, Found) else None
    latest = session.current_run if session else None
    if start is None:
        if run is None:  # the registry is down: the run is not known yet
            return []
        run_id = str(name_uuid(BATON_NAMESPACE, f"run:{task_id}:{run}"))
        if not reopens and latest is not None:
            if here is None or here.run_id != latest.text:
                write_local_run(place, task_id, latest.text, None)
            return []
        start = RunStart(run_id, "reopen" if reopens else "bind", latest.text if latest else None)
    base = start.base
    if base is None and place.worktree is not None:  # asked while the toolchains answer
        from baton.skills.core.stage_authority import head_commit

        base = head_commit(place.root, stores.deadline)
    manifest = environment.result() if environment is not None else \
        capture_environment(place, stores.settings.environment_lockfiles, stores.deadline)
    write_local_run(place, task_id, start.run_id, manifest)
    return [wire_event("run_started", task_id, session_id, at, event_id=start.run_id, run_kind=start.kind,
                       parent_run_id=start.parent_run_id, parent_task_id=start.parent_task_id,
                       diverged_at=start.diverged_at, base=base, environment=manifest.id if manifest else None)]


def _environment_ahead(stores: Stores, place: Place, here: LocalRun | None) -> Future[Manifest | None] | None:
    """The manifest, captured beside the bind's own work where the worktree holds no run of the
    ticket yet (here: so the bind likely starts one): the toolchains' versions take 0.1 s or more."""
    from baton.skills.services.checkpoint import capture_environment

    if place.worktree is None or here is not None:
        return None
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(capture_environment, place, stores.settings.environment_lockfiles, stores.deadline)
    finally:
        pool.shutdown(wait=False)


def _joins_from_elsewhere(here: LocalRun | None, current: Found[Session] | NotFound | Unavailable) -> bool:
    """Whether the bind joins the ticket's current run from a worktree that was not in it
    (here: its run, as the bind found it; another clone resuming the ticket, say)."""
    latest = current.value.current_run if isinstance(current, Found) else None
    return latest is not None and (here is None or here.run_id != latest.text)


def _clean(place: Place, stores: Stores) -> bool:
    """Whether the worktree has nothing but its commit: a checkpoint of it would hold none of
    the run's work, and recorded it would stand as the ticket's newest in front of the
    checkpoint that does (what `baton restore` brings back by default). False when git
    does not say."""
    from baton.git import run_git

    try:
        done = run_git(place.root, "status", "--porcelain=v1", "-z", "--untracked-files=normal",
                       deadline=stores.deadline, check=False)
    except GitFailed:
        return False
    return done.returncode == 0 and not done.stdout
