"""The resume skill: one context for a ticket, assembled from every store within a deadline."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from baton import clock
from baton.budget import gather
from baton.errors import BadInput, Refused, StoreUnavailable
from baton.graph.conflicts import FileConflict
from baton.ids import TicketId
from baton.outcome import Found, NotFound, Unavailable
from baton.registry.model import Session
from baton.signals.model import Signal, file_subject
from baton.skills.core.binding import ActiveTask, Binding, Place
from baton.skills.core.commit import read_binding_quietly
from baton.skills.core.interrupted import MachineLiveness, Recovery, prizmkit_records_of
from baton.skills.core.overlaps import conflicts_of
from baton.skills.handoff.verify import Verification
from baton.skills.runtime.stores import Stores
from baton.skills.services.bind import BindReads, bind, bound_session
from baton.skills.services.compatibility import Check, compatibility
from baton.skills.services.continuation import Continuation, native_continuation
from baton.skills.services.handoff import verify_and_record
from baton.skills.services.stage import WorkflowView, workflow_view
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.skills.services.leases import Lease

STORES = ("registry", "graph", "recall", "signals")
# What `stores` says of each: it answered, it was not needed for this answer, or why it failed.
OK, NOT_QUERIED = "ok", "not queried"
SIGNAL_LIMIT = 50
CONFLICT_LIMIT = 20  # the conflicting tickets a resume names, first by id; the rest are counted


@dataclass
class RelatedDecision:
    task_id: str
    text: str
    score: float
    context: str = ""
    marks: tuple[str, ...] = ()  # why it is not current (baton.skills.services.decision_age)


@dataclass
class ResumeResult:
    status: str  # found | not_found | unavailable
    task_id: str
    reason: str | None = None
    session: Session | None = None
    conflicts: list[FileConflict] = field(default_factory=list)
    conflict_paths: dict[str, list[str]] = field(default_factory=dict)
    conflicts_more: int = 0  # conflicting tickets beyond the CONFLICT_LIMIT named
    related_decisions: list[RelatedDecision] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    stores: dict[str, str] = field(default_factory=lambda: dict.fromkeys(STORES, NOT_QUERIED))
    bound: bool = False
    handoff: Verification | None = None  # the worktree's current handoff, re-verified
    workflow: WorkflowView | None = None  # the ticket's stages, each claim re-checked (None: it uses none)
    prizmkit: Recovery | None = None  # the worktree's PrizmKit records of the ticket, read only (None: none)
    compatibility: list = field(default_factory=list)  # baton.skills.services.compatibility.Check
    forks: list[str] = field(default_factory=list)  # overlapping tickets forked from this one, or its parent
    continuation: Continuation | None = None  # the agent's native continuation, or why not (None: not asked)
    leases: list[Lease] = field(default_factory=list)  # the ticket's active leases
    lease_notices: list[str] = field(default_factory=list)  # its leases that lapsed or a lead released
    # This worktree's run, superseded by a take-over (baton.skills.services.takeover.superseded_notice).
    superseded: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        run = self.session.current_run if self.session else None
        return {
            "status": self.status,
            "task_id": self.task_id,
            "reason": self.reason,
            "session": self.session.public() if self.session else None,
            "conflicts": [{"other_task_id": c.other_task_id, "shared_files": self.conflict_paths[c.other_task_id],
                           "signal_id": str(c.signal_id)} for c in self.conflicts],
            "conflicts_more": self.conflicts_more,
            "related_decisions": [{"task_id": r.task_id, "text": r.text, "score": r.score,
                                   **({"marks": list(r.marks)} if r.marks else {})}
                                  for r in self.related_decisions],
            "signals": [s.model_dump(mode="json") for s in self.signals],
            "stores": self.stores,
            "bound": self.bound,
            "workflow": self.workflow.to_json() if self.workflow else None,
            "prizmkit": None if self.prizmkit is None else {
                "resumable": [c.as_dict() for c in self.prizmkit.candidates],
                "not_resumable": [e._asdict() for e in self.prizmkit.excluded],
                "malformed": [m._asdict() for m in self.prizmkit.malformed]},
            "run": None if run is None else {"run_id": run.text, "parent_run_id": run.parent_run_id,
                                             "kind": run.kind, "diverged_at": run.diverged_at},
            "checkpoint": None if self.session is None or self.session.checkpoint is None else {
                "id": self.session.checkpoint.id, "boundary": self.session.checkpoint.boundary,
                "taken_at": self.session.checkpoint.taken_at.isoformat()},
            "compatibility": [asdict(c) for c in self.compatibility],
            "fork_of": self.session.fork_of if self.session else None,
            "forks_overlapping": self.forks,
            "continuation": asdict(self.continuation) if self.continuation else None,
            "leases": [lease.public() for lease in self.leases],
            "lease_notices": self.lease_notices,
            "superseded": self.superseded,
            # What could not be done or read, and why (a part cut by the command's deadline says so).
            "warnings": self.warnings,
            **(self.handoff.to_json() if self.handoff else {"handoff": None, "live_state": []}),
        }


def _conflicts(stores: Stores, session: Session
               ) -> tuple[list[FileConflict], dict[str, list[str]], int] | Unavailable:
    """The first CONFLICT_LIMIT conflicting tickets with their shared files, and how many
    more there are (a ticket on a file everyone touches may share it with thousands)."""
    shared = stores.graph.shared_files(session.task_id, partners=CONFLICT_LIMIT)
    if not isinstance(shared, Found):
        return shared
    more = 0
    if len(shared.value) == CONFLICT_LIMIT:
        counted = stores.graph.conflict_summaries(sample=0, task_ids=[session.task_id])
        if isinstance(counted, Found) and session.task_id in counted.value:
            more = counted.value[session.task_id].tickets - CONFLICT_LIMIT
    conflicts, paths, _ = conflicts_of(session.task_id, shared.value)
    return conflicts, paths, more


def _set_forks_apart(stores: Stores, session: Session, result: ResumeResult) -> None:
    """An overlap with the ticket's parent or one of its forks is expected: shown as a fork,
    not as a conflict."""
    for conflict in list(result.conflicts):
        other = conflict.other_task_id
        related = other == session.fork_of
        if not related:
            found = stores.registry.get(other)
            related = isinstance(found, Found) and found.value.fork_of == session.task_id
        if related:
            result.conflicts.remove(conflict)
            result.forks.append(other)


def _related(stores: Stores, session: Session, limit: int,
             all_decisions: bool) -> tuple[list[RelatedDecision], str | None]:
    """Related decisions of other tickets, found with the stored vectors of this ticket's own and
    of its query (baton.skills.core.ticket_query) and with their words; decisions and a query the
    index lacks are queued for the indexer (a resume never embeds). Only current ones unless
    all_decisions (then the others follow, marked, each superseded one under its replacement, in
    its place of the limit);
    twice the limit is searched so that those left out leave room. With them, why the vectors
    did not answer, when the words alone found them."""
    from baton.skills.core.indexing import decision_record, queue_unindexed_decisions
    from baton.skills.core.ticket_query import ticket_query_text, ticket_query_vector
    from baton.skills.services.decision_age import aged

    own = [decision_record(stores.project, session, d) for d in session.decisions]
    about = ticket_query_text(session)
    found = stores.recall().search_related(
        session.task_id, 2 * limit, own=own, about=about,
        about_vector=ticket_query_vector(stores, session.task_id, about) if about else None,
        min_score=stores.settings.recall_min_score)
    queue_unindexed_decisions(stores, found.unindexed)
    results = [[d for d in (a, *(a.replaces if all_decisions else ())) if d.hit.record.task_id != session.task_id]
               for a in aged(stores, found.hits, clock.now()) if all_decisions or a.current]
    return [RelatedDecision(task_id=d.hit.record.task_id, text=d.hit.record.text, score=round(d.hit.score, 4),
                            context=d.hit.record.context, marks=d.marks)
            for result in [r for r in results if r][:limit] for d in result], found.vectors_unavailable


def _missed_signals(stores: Stores, session: Session) -> list[Signal] | Unavailable:
    subjects = [f"task:{session.task_id}", *(f"task:{d}" for d in session.depends_on),
                *(file_subject(t.repo, t.path) for t in session.files.values())]
    found = stores.signals.concerning(subjects, after=session.last_activity, limit=SIGNAL_LIMIT)
    return found.value if isinstance(found, Found) else found


def resume_session(stores: Stores, task_id: TicketId, place: Place, *, limit: int = 5, bind_task: bool = True,
                   agent: str | None = None, verify_handoff: bool = True, allow_unsigned_probes: bool = False,
                   check_workflow: bool = True, at: datetime | None = None,
                   all_decisions: bool = False, take_over: bool = False) -> ResumeResult:
    """Everything Baton knows about task_id, then bind this worktree to it and re-verify the
    worktree's current handoff for task_id.

    The reads come first, each once (_read): the binding, the registry's session, then the
    graph, recall and signals side by side within the command's budget, each marked
    "unavailable: reason" when it fails; nothing here raises for a store that is down. Then the
    writes (_write): the binding, then the handoff's verification, whose probes run whatever the
    stores answered (a handoff committed to the branch is worth checking without history). The
    compatibility checks run beside them. check_workflow re-checks each completed stage's proof;
    all_decisions shows superseded, abandoned and old decisions too, marked; take_over moves here
    a ticket a live run holds elsewhere (without it nothing is bound, and the warning says so)."""
    if limit < 0:
        raise BadInput("limit must not be negative")
    # Only the writes need the binding (a session start makes none).
    binding = read_binding_quietly(place) if bind_task or verify_handoff else None
    with ThreadPoolExecutor(max_workers=1) as pool:
        result, looked, checked = _read(stores, task_id, limit=limit, pool=pool,
                                        workflow_root=place.root if check_workflow else None,
                                        compatible_with=place if verify_handoff else None, all_decisions=all_decisions)
        _write(stores, task_id, place, result, looked, binding, bind_task=bind_task, verify_handoff=verify_handoff,
               agent=agent, allow_unsigned_probes=allow_unsigned_probes, at=at, take_over=take_over)
        # Checked beside the writes: the toolchains' versions take about as long as they do.
        result.compatibility = checked.result() if checked is not None else []
    return result


def _write(stores: Stores, task_id: TicketId, place: Place, result: ResumeResult,
           looked: Found[Session] | NotFound | Unavailable, binding: Binding | None, *, bind_task: bool,
           verify_handoff: bool, agent: str | None, allow_unsigned_probes: bool, at: datetime | None,
           take_over: bool) -> None:
    """What resume_session does after its reads: what it tells of the worktree (PrizmKit's
    records, the native continuation, a take-over), then its writes: the binding, then the
    handoff's verification."""
    liveness = MachineLiveness(stores.deadline)
    result.prizmkit = prizmkit_records_of(place.root, task_id,
                                          lambda branch: liveness.branch_exists(str(place.root), branch))
    at = at or clock.now()
    if verify_handoff and result.session is not None:
        result.continuation = native_continuation(stores.settings.home, result.session, place.root, agent)
    if result.session is not None and result.session.takeovers:
        from baton.skills.services.takeover import superseded_notice

        here = binding if bind_task or verify_handoff else read_binding_quietly(place)
        result.superseded = superseded_notice(result.session, here.session_id if here is not None
                                              and here.task_id == task_id else None)
    session_id = binding.session_id if binding is not None and binding.task_id == task_id else None
    if bind_task:
        chosen = bound_session(binding, task_id)
        if _bind(stores, task_id, place, BindReads(binding, looked), chosen, result, agent, at, take_over):
            session_id = chosen
            if take_over and result.bound:
                result.superseded = None  # it holds the ticket again
    if verify_handoff:  # the second write: the handoff re-verified, and the verification recorded
        checked = verify_and_record(stores, place, task=ActiveTask(task_id, session_id or "resume", "resume"),
                                    only_for=task_id, allow_unsigned=allow_unsigned_probes, at=at)
        result.handoff = checked.verification
        # With the registry down, the bind has already said so; say each thing once.
        result.warnings += [warning for warning in checked.warnings if warning not in result.warnings]


def _bind(stores: Stores, task_id: TicketId, place: Place, read: BindReads, session_id: str, result: ResumeResult,
          agent: str | None, at: datetime, take_over: bool) -> bool:
    """The resume's first write: the worktree bound to task_id in session_id, from what the
    resume read. Answers whether the binding file names it now (not when a live run holds
    the ticket elsewhere: the warning names it and the take-over)."""
    result.bound = True
    try:
        report = bind(stores, task_id, place, agent=agent, session_id=session_id, at=at, read=read,
                      take_over=take_over)
    except Refused as exc:
        result.bound = False
        result.warnings.append(str(exc))
        return False
    except StoreUnavailable as exc:
        written = read_binding_quietly(place) if take_over else None
        if take_over and (written is None or (written.task_id, written.session_id) != (task_id, session_id)):
            result.bound = False  # a take-over the registry did not answer writes nothing
            result.warnings.append(f"{exc}; nothing bound")
            return False
        if result.status != "unavailable":
            result.warnings.append(f"{exc}; bound locally only")
        return exc.store != Store.BINDING_FILE  # bind writes the binding before it refuses a registry down
    result.warnings += report.warnings
    return True


def _leases(stores: Stores, session: Session, result: ResumeResult) -> None:
    """The ticket's active leases, and what its holder is told of those that ended without it."""
    from baton.skills.services.leases import leases_of, notices

    at, grace = clock.now(), stores.settings.lease_grace
    held = leases_of(session, at, grace)
    result.leases = [lease for lease in held if lease.active]
    # Taken? only another ticket's grant tells.
    listed = stores.registry.list_sessions() if any(lease.state == "lapsed" for lease in held) else None
    result.lease_notices = notices(session, listed.value if isinstance(listed, Found) else [], at, grace)


def read_session(stores: Stores, task_id: TicketId) -> ResumeResult:
    """What resume_session reads of task_id, binding nothing and running no probe nor check
    of the worktree (what the dashboard shows)."""
    return _read(stores, task_id)[0]


def _read(stores: Stores, task_id: TicketId, *, limit: int = 5, pool: ThreadPoolExecutor | None = None,
          workflow_root: Path | None = None, compatible_with: Place | None = None, all_decisions: bool = False
          ) -> tuple[ResumeResult, Found[Session] | NotFound | Unavailable, Future[list[Check]] | None]:
    """read_session, what the registry answered (a resume's bind starts from it), and the
    compatibility checks against compatible_with, running on pool (None: none asked)."""
    result = ResumeResult(status="found", task_id=task_id)
    checked: Future[list[Check]] | None = None
    budget = stores.budget  # one budget for the whole resume: the registry, then the rest side by side
    looked = gather({"registry": lambda: stores.registry.get(task_id)}, budget)["registry"]
    result.stores["registry"] = OK
    if isinstance(looked, Unavailable):
        result.status, result.reason = "unavailable", looked.reason
        result.stores["registry"] = f"unavailable: {looked.reason}"
    elif isinstance(looked, NotFound):
        result.status = "not_found"
    else:
        session = result.session = looked.value
        asked: dict[str, Callable[[], object]] = {"graph": lambda: _conflicts(stores, session),
                                                  "signals": lambda: _missed_signals(stores, session)}
        # Related decisions are found from the ticket's own and from what it is about.
        if session.decisions or session.goal or session.next_action:
            asked["recall"] = lambda: _related(stores, session, limit, all_decisions)
        if compatible_with is not None and pool is not None:
            checked = pool.submit(compatibility, session, compatible_with, stores.settings.environment_lockfiles,
                                  stores.deadline, fetch_from=stores.settings.checkpoint_remote,
                                  fetch=stores.settings.checkpoint_push != "off")
        parts = gather(asked, budget)
        for name, part in parts.items():
            result.stores[name] = f"unavailable: {part.reason}" if isinstance(part, Unavailable) else OK
        if not isinstance(parts["graph"], Unavailable):
            result.conflicts, result.conflict_paths, result.conflicts_more = parts["graph"]
            _set_forks_apart(stores, session, result)
        if "recall" in parts and not isinstance(parts["recall"], Unavailable):
            result.related_decisions, vectors_down = parts["recall"]
            if vectors_down is not None:
                result.warnings.append(f"recall: {vectors_down}; related decisions found by their words alone")
        if not isinstance(parts["signals"], Unavailable):
            result.signals = parts["signals"]
        if session.leases:
            _leases(stores, session, result)
        # Before resume_session's bind moves the session's location: the claims are the worktree's.
        if workflow_root is not None:
            result.workflow = workflow_view(stores.settings, session, workflow_root, stores.deadline)
    return result, looked, checked
