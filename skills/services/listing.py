"""The list skill: active sessions for a lead, with conflicts and staleness."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from baton import clock
from baton.budget import gather
from baton.errors import BadInput
from baton.graph.base import ConflictSummary
from baton.outcome import Found
from baton.skills.runtime.stores import Stores
from baton.skills.services.recover import Beat, recover
from baton.store_names import Store

# How many of a ticket's conflicting tickets a line names; the counts say the rest.
CONFLICT_SAMPLE = 5
# Lines a listing shows at most unless told otherwise: past them, a page.
PAGE = 1000
# A page is chosen from the order read a chunk at a time, the page's size first, each next
# chunk twice the last, up to MAX_CHUNK; and up to FEW_CONFLICTS pages' worth of the tickets
# in conflict read at once (_page).
MAX_CHUNK = 20_000
FEW_CONFLICTS = 2


@dataclass
class SessionLine:
    task_id: str
    status: str
    phase: str
    last_activity: datetime
    stale: bool
    files_touched: list[str]
    conflicts_with: list[str]  # up to CONFLICT_SAMPLE of its conflicting tickets (the first the graph finds), by id
    handoff: dict | None = None  # the latest recorded re-verification of its handoff (never run here)
    agent: str | None = None
    repo: str | None = None
    runs: int = 1
    stage: str | None = None  # the workflow's status (baton stage), where the ticket uses stages
    interrupted: bool = False  # its agent is gone (baton recover), as this machine's heartbeats tell
    fork_of: str | None = None  # its overlap with that ticket is expected: not a conflict
    checkpoint: str | None = None  # the latest checkpoint: its short id and boundary
    conflicting_tickets: int = 0  # all the active tickets it shares files with (forks aside)
    conflicting_files: int = 0  # its files that one of them touches too
    leases: list[dict] = field(default_factory=list)  # its active leases: pattern, exclusive, expires_at
    project: str | None = None  # set in the lead's view of every project only (and only then shown)

    def to_json(self) -> dict:
        shown = vars(self) | {"last_activity": self.last_activity.isoformat()}
        return shown if self.project is not None else {k: v for k, v in shown.items() if k != "project"}


@dataclass
class Listing:
    lines: list[SessionLine]
    warnings: list[str] = field(default_factory=list)
    total: int = 0  # the sessions the listing would show without its limit (lines holds a page of them)

    def more(self) -> str | None:
        """What a page leaves out, and how to see it; None when every line is shown."""
        if self.total <= len(self.lines):
            return None
        return (f"{len(self.lines):,} of {self.total:,} sessions shown (in conflict first, then newest); "
                f"--limit N shows N, --limit 0 every one")


def list_sessions(stores: Stores, *, include_inactive: bool = False, at: datetime | None = None,
                  heartbeats: Iterable[Beat] | None = None, limit: int = PAGE) -> Listing:
    """Sessions newest first, up to limit (0: every one; past it, a page chosen by _page, which
    Listing.total counts whole); raises StoreUnavailable when the registry cannot answer.
    heartbeats: the hooks' heartbeats on this machine, to mark tickets whose agent is gone."""
    if limit < 0:
        raise BadInput(f"--limit must be 0 (every session) or more, not {limit}")
    at = at or clock.now()
    warnings: list[str] = []
    page: list[str] | None = None
    graph_answers = True
    total = stores.registry.session_count(include_inactive=include_inactive).unwrap(Store.SESSION_REGISTRY)
    if limit and total > limit:
        page, graph_answers = _page(stores, include_inactive, limit, warnings)
    # One read of the registry, of what the list shows only (no validated sessions where the
    # backend can; the interrupted-work check reads the same outlines), beside the graph's
    # counts of the same tickets: each waits on its server, and on servers a page's took
    # 250 and 300 ms.
    reads: dict[str, Callable[[], object]] = {
        "sessions": lambda: stores.registry.listed_sessions(include_inactive=include_inactive, task_ids=page)}
    if graph_answers:
        # Counted in the graph, per ticket: the listing never holds the pairs of tickets.
        reads["conflicts"] = lambda: stores.graph.conflict_summaries(sample=CONFLICT_SAMPLE, task_ids=page)
    answers = gather(reads, stores.budget)
    sessions = answers["sessions"].unwrap(Store.SESSION_REGISTRY)
    if page is not None:
        place = {task_id: n for n, task_id in enumerate(page)}
        sessions.sort(key=lambda s: place.get(s.outline.task_id, len(place)))
    summaries: dict[str, ConflictSummary] = {}
    if graph_answers:
        summed = answers["conflicts"]
        # A fork's overlap with its parent is expected, not a conflict: the two are counted
        # again without it (the kept counts hold it).
        forks = [(s.outline.task_id, s.fork_of) for s in sessions if s.fork_of]
        involved = {task for pair in forks for task in pair}
        if forks and isinstance(summed, Found):
            again = stores.graph.conflict_summaries(sample=CONFLICT_SAMPLE, expected=forks, task_ids=involved)
            summed = again if not isinstance(again, Found) else Found(
                {task: summary for task, summary in summed.value.items() if task not in involved} | again.value)
        if isinstance(summed, Found):
            summaries = summed.value
        else:
            warnings.append(f"conflict graph unavailable: {summed.reason}; conflicts not shown")
    stale_after, grace = stores.settings.stale_after, stores.settings.lease_grace
    interrupted = set()
    if heartbeats is not None:
        outlines = [s.outline for s in sessions if s.outline.status == "active"]
        interrupted = {found.task_id for found in recover(stores, None, heartbeats, all_repos=True, now=at,
                                                          outlines=outlines).candidates}
    lines = []
    for s in sessions:
        o = s.outline
        active = o.status == "active"
        summary = summaries.get(o.task_id) if active else None
        lines.append(SessionLine(
            task_id=o.task_id, status=o.status, phase=o.phase, last_activity=o.last_activity,
            stale=active and at - o.last_activity > stale_after, files_touched=list(s.files),
            conflicts_with=list(summary.sample) if summary else [],
            conflicting_tickets=summary.tickets if summary else 0,
            conflicting_files=summary.files if summary else 0,
            handoff=s.handoff, agent=o.agent, repo=o.repo, runs=s.runs,
            stage=str(o.stage) if s.uses_stages else None,
            interrupted=o.task_id in interrupted, fork_of=s.fork_of,
            checkpoint=f"{s.checkpoint[0][:10]} ({s.checkpoint[1]})" if s.checkpoint else None,
            leases=[{"pattern": lease.pattern, "exclusive": lease.exclusive,
                     "expires_at": (lease.ends + grace).isoformat()}
                    for lease in s.leases if active and lease.ends + grace >= at]))
    return Listing(lines, warnings, total=total if page is not None else len(lines))


def _page(stores: Stores, include_inactive: bool, limit: int, warnings: list[str]) -> tuple[list[str], bool]:
    """The tickets of a page of limit sessions (the tickets in conflict first, then the other
    active ones, then the ended ones, each newest first), and whether the graph answered.

    Chosen from the registry's status index, read a chunk at a time, newest first, until the
    page is settled, and the graph's kept counts (a fork's expected overlap counted there,
    not on its line): with 100,000 sessions on servers, reading both whole took 2.5 s of
    the list's 1 s (bench/scale.py --servers)."""
    few = limit * FEW_CONFLICTS  # beyond, each chunk of the order asks the graph which of its tickets conflict
    counted = stores.graph.conflict_counts(at_most=few)
    graph_answers = isinstance(counted, Found)
    known: set[str] | None = set()
    if isinstance(counted, Found):
        known = set(counted.value) if len(counted.value) < few else None  # None: too many to hold, asked chunk by chunk
    else:
        warnings.append(f"conflict graph unavailable: {counted.reason}; conflicts not shown")
    in_conflict: list[str] = []
    quiet: list[str] = []
    ended: list[str] = []
    seen: set[str] = set()
    offset, chunk = 0, limit
    while True:
        read = stores.registry.session_order(include_inactive=include_inactive, offset=offset,
                                             limit=chunk).unwrap(Store.SESSION_REGISTRY)
        offset += len(read)
        # A write between two chunks can move a ticket into the next one: it is kept once.
        rows = [(task_id, status) for task_id, status in read if task_id not in seen]
        seen.update(task_id for task_id, _ in rows)
        conflicting = known
        if conflicting is None:
            asked = stores.graph.conflict_counts([task_id for task_id, status in rows if status == "active"])
            conflicting = set(asked.value) if isinstance(asked, Found) else set()
            if not isinstance(asked, Found):
                graph_answers, known = False, set()
                warnings.append(f"conflict graph unavailable: {asked.reason}; conflicts not shown")
        for task_id, status in rows:  # newest first, each kept so
            if status != "active":
                ended.append(task_id)
            elif task_id in conflicting:
                in_conflict.append(task_id)
            else:
                quiet.append(task_id)
        settled = len(in_conflict) >= limit or (
            # every ticket in conflict found, and enough active ones to fill the page
            known is not None and len(in_conflict) >= len(known) and len(in_conflict) + len(quiet) >= limit)
        if settled or len(read) < chunk:
            break
        chunk = min(chunk * 2, MAX_CHUNK)
    return (in_conflict + quiet + ended)[:limit], graph_answers


def list_every_project(stores: Stores, *, include_inactive: bool = False, at: datetime | None = None,
                       heartbeats: Iterable[Beat] | None = None, limit: int = PAGE) -> Listing:
    """The lead's view: each project's listing (its conflicts its own, each paged by limit),
    by project, each line naming its project. Raises StoreUnavailable when the registry
    cannot answer."""
    beats = None if heartbeats is None else list(heartbeats)
    every = Listing([])
    for project in stores.registry.projects().unwrap(Store.SESSION_REGISTRY):
        listing = list_sessions(stores.for_project(project), include_inactive=include_inactive, at=at,
                                heartbeats=beats, limit=limit)
        for line in listing.lines:
            line.project = project
        every.lines += listing.lines
        every.total += listing.total
        every.warnings += [w for w in listing.warnings if w not in every.warnings]
    return every
