"""The session store interface: one seam where a server backend plugs in."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from baton.backend import Backend
from baton.files import FileRef
from baton.outcome import Found, NotFound, Unavailable

if TYPE_CHECKING:
    from baton.registry.model import Event, Session

_NOT_LITERAL = frozenset("*?[\\")  # a glob's characters and gitignore's escape


# NamedTuples, not dataclasses: a fresh `baton touch` or hook defines them, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class SignalScope(NamedTuple):
    """What signals about a ticket can concern: its dependencies and its files (sorted by
    repository and path), and since when it exists."""

    created_at: datetime
    depends_on: tuple[str, ...]
    files: tuple[FileRef, ...]
    fork_of: str | None = None  # the ticket it was forked from: their overlap is expected


class HolderNote(NamedTuple):
    """Who works on a ticket and what they do next: what a warning before an edit of one of
    its files names."""

    agent: str | None
    branch: str | None
    next_action: str | None


class SessionOutline(NamedTuple):
    """Where a session is and where it stands, without the rest of its projection: what
    `baton recover` reads of every session (status and phase as their stored names; stage
    and next_stage from its workflow state, None for a ticket that uses no stages)."""

    task_id: str
    status: str
    phase: str
    repo: str | None
    worktree_path: str | None
    branch: str | None
    agent: str | None
    last_activity: datetime
    stage: str | None
    next_stage: str | None


class ListedSession(NamedTuple):
    """What `baton list` shows of a session: its outline and a few fields more, read
    without building the validated session where the backend can."""

    outline: SessionOutline
    files: tuple[str, ...]  # the paths it touched, newest first (Session.files_by_recency)
    handoff: dict | None  # its latest handoff verification, as VerificationRecord.public() gives it
    runs: int
    fork_of: str | None
    checkpoint: tuple[str, str] | None  # the latest checkpoint's id and boundary
    uses_stages: bool  # it has a workflow (its stage, None or not, is shown)
    leases: tuple[ListedLease, ...] = ()  # its leases not released, oldest first


class ListedLease(NamedTuple):
    """A lease not released, as the list, the pre-edit check and a claim's decision read it."""

    pattern: str
    exclusive: bool
    ends: datetime  # its TTL after the later of its grant and the ticket's last activity (the grace not added)
    repo: str
    agent: str | None
    reason: str | None
    lease_id: str
    granted_at: datetime


def handoff_held(*, changed: int, failed: int, not_run: int) -> bool:
    """Every claim re-ran and matched the record. A stale alarm is context that gates
    nothing, so it does not count against it."""
    return not (changed or failed or not_run)


def outline_status(lifecycle: str, lifecycle_at: datetime | None, last_activity: datetime) -> str:
    """Session.status from its parts: a stall turns active again once anything happens after it."""
    if lifecycle == "stalled" and lifecycle_at is not None and last_activity > lifecycle_at:
        return "active"
    return lifecycle


class SessionStore(Backend):
    """Appends events to per-ticket logs and keeps their projections, for one project
    (baton.projects): every read and write is of that project's tickets only.

    Writes raise StoreUnavailable when the store cannot take them; reads answer
    Found, NotFound or Unavailable and never raise for an unreachable store.
    """

    @abstractmethod
    def append(self, events: Sequence[Event], *, whole: bool = True) -> dict[str, Session]:
        """Append events and apply each new one to its ticket's projection, atomically.

        An event whose id is already stored is skipped. A new SecretsRedacted event also
        rewrites the fields it names in the stored events, and the ticket's projection is
        folded again from them, so neither holds the text it replaced. Returns the resulting
        session of every ticket the events touch; whole=False (a batch's projection), each as
        Session.batch_view of the events' decisions' texts, but whole for a ticket an event
        of theirs redacts: a server sends no more of it than that.
        """

    @abstractmethod
    def append_unless(self, events: Sequence[Event], repo: str, patterns: Sequence[str],
                      refusal: Callable[[list[tuple[str, ListedLease]]], str | None]) -> str | None:
        """Append events as append does, unless refusal, given the leases a claim of
        patterns in repo may overlap as stored just before (meeting_leases of the active
        tickets' leases not released, by ticket), says why not: then it answers that and
        stores nothing. A backend that indexes the leases by anchor reads only those, not
        every session. One such decision at a time per project, so every answer is
        consistent with one serial order of them (a lease's grant). Never queued; raises
        StoreUnavailable."""

    @abstractmethod
    def append_body(self, event_id: str, task_id: str, at: datetime, event_type: str, body: str) -> None:
        """Append one event's JSON without projecting it yet: the hot path of `baton touch`
        and `baton decide` (baton.registry.wire builds the body). Must not import the pydantic
        models. The projection catches up before the next read; an id already stored is skipped."""

    @abstractmethod
    def get(self, task_id: str) -> Found[Session] | NotFound | Unavailable:
        """The ticket's projection."""

    def get_many(self, task_ids: Sequence[str]) -> Found[dict[str, Session]] | Unavailable:
        """The projections of those of task_ids the registry holds, by ticket (a server
        answers them in one read)."""
        sessions = {}
        for task_id in task_ids:
            found = self.get(task_id)
            if isinstance(found, Unavailable):
                return found
            if isinstance(found, Found):
                sessions[task_id] = found.value
        return Found(sessions)

    @abstractmethod
    def prune(self, ended_before: datetime, *, dry_run: bool = False) -> list[str]:
        """Remove the sessions that ended (completed or stalled) with no activity since
        ended_before, with their events, except those an active session depends on; returns
        their ticket ids, sorted. Each leaves a tombstone: an event of that ticket as old as
        what was removed (a replay, a late delivery) is dropped, while a new bind of the
        same ticket id starts afresh. Raises StoreUnavailable."""

    @abstractmethod
    def forget_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        """Remove the checkpoint_taken records of these checkpoints (their refs are gone:
        `baton gc --checkpoints`); answers how many records went. A ticket's latest
        checkpoint, which its projection holds, is never asked for. Raises StoreUnavailable."""

    @abstractmethod
    def held_events(self, event_ids: Sequence[str]) -> Found[set[str]] | Unavailable:
        """Those of event_ids the store holds (projected or about to be)."""

    @abstractmethod
    def pruned(self) -> Found[set[str]] | Unavailable:
        """The ticket ids ever pruned (their tombstones), for the derived stores to forget."""

    def signal_scope(self, task_id: str) -> Found[SignalScope] | NotFound | Unavailable:
        """The ticket's SignalScope, for the prompt hook: a backend that can read it without
        building the validated session (and importing pydantic) says so here."""
        found = self.get(task_id)
        if not isinstance(found, Found):
            return found
        session = found.value
        files = sorted({(t.repo, t.path) for t in session.files.values()})
        return Found(SignalScope(session.created_at, tuple(session.depends_on),
                                 tuple(FileRef(repo, path) for repo, path in files), session.fork_of))

    @abstractmethod
    def holder_notes(self, task_ids: Sequence[str]) -> Found[dict[str, HolderNote]] | Unavailable:
        """The HolderNote of each of task_ids the store holds, for the check before an edit,
        read without building the validated sessions."""

    @abstractmethod
    def list_sessions(self, *, include_inactive: bool = False) -> Found[list[Session]] | Unavailable:
        """Sessions by last activity, newest first; active ones only unless include_inactive."""

    @abstractmethod
    def session_outlines(self, *, include_inactive: bool = False) -> Found[list[SessionOutline]] | Unavailable:
        """list_sessions' outlines, in its order, read without building the validated
        sessions (and importing pydantic)."""

    @abstractmethod
    def listed_sessions(self, *, include_inactive: bool = False, task_ids: Collection[str] | None = None
                        ) -> Found[list[ListedSession]] | Unavailable:
        """list_sessions' sessions (those of task_ids only, when given: a page of them) as
        `baton list` shows them, in its order, read without building the validated sessions."""

    @abstractmethod
    def session_order(self, *, include_inactive: bool = False, offset: int = 0,
                      limit: int | None = None) -> Found[list[tuple[str, str]]] | Unavailable:
        """(ticket, status) of list_sessions' sessions, in its order, from the offset-th on
        (at most limit of them): what `baton list` chooses a page by before it reads the
        page's sessions, answered from an index, reading no session."""

    @abstractmethod
    def session_count(self, *, include_inactive: bool = False) -> Found[int] | Unavailable:
        """How many sessions list_sessions would answer: what session_order would."""

    @abstractmethod
    def lease_holders(self) -> Found[set[str]] | Unavailable:
        """The tickets that were granted a lease (a superset of those holding one now): what
        a view of every active lease reads, answered from the leases' index, not every session."""

    @abstractmethod
    def leases_near(self, repo: str, paths: Sequence[str]) -> Found[list[tuple[str, ListedLease]]] | Unavailable:
        """The active tickets' leases in repo not released whose pattern may cover one of
        paths (its lease_anchor is one of path_anchors'), with their ticket, in list_sessions'
        order: what the check before an edit matches, read through the leases' index by
        anchor, not every session."""

    def watermark(self) -> str | None:
        """An opaque mark that changes whenever an event is stored or a session pruned, read
        without decoding any session (the dashboard checks it before listing again); None
        when the backend cannot give one cheaply. Raises StoreUnavailable."""
        return None

    def queued(self) -> int:
        """How many writes wait in this store's write queue: those it could not take at once
        (only the embedded store queues, baton.registry.sqlite)."""
        return 0

    def apply_queued(self, *, patient: bool) -> bool:
        """Apply the queued writes, waiting for the store the command's timeout if patient,
        else a moment; whether nothing is left waiting. Raises StoreUnavailable."""
        return True

    @abstractmethod
    def projects(self) -> Found[list[str]] | Unavailable:
        """Every project that has a session, sorted: the one read across projects, for the
        lead's `baton list --all-projects` (which then reads each through its own store)."""

    @abstractmethod
    def events(self, task_id: str) -> Found[list[Event]] | Unavailable:
        """The ticket's event log in time order."""


def outline_of(s: Session) -> SessionOutline:
    """A session's outline, from its projection."""
    return SessionOutline(s.task_id, s.status.value, s.phase.value, s.repo, s.worktree_path, s.branch, s.agent,
                          s.last_activity, *((s.workflow.state.get("status"), s.workflow.state.get("next_stage"))
                                             if s.workflow else (None, None)))


def in_list_order(sessions: Iterable[Session], include_inactive: bool) -> list[Session]:
    """As list_sessions answers: by last activity, newest first, then by ticket; the active ones only unless
    include_inactive."""
    kept = sorted((s for s in sessions if include_inactive or s.status.value == "active"), key=lambda s: s.task_id)
    return sorted(kept, key=lambda s: s.last_activity, reverse=True)


def listed_of(s: Session) -> ListedSession:
    """What `baton list` shows of a session, from its projection."""
    return ListedSession(outline_of(s), tuple(t.path for t in s.files_by_recency()),
                         s.handoff_verification.public() if s.handoff_verification else None, s.runs, s.fork_of,
                         (s.checkpoint.id, s.checkpoint.boundary) if s.checkpoint else None, s.workflow is not None,
                         unreleased_leases([e.model_dump(mode="json") for e in s.leases],
                                           [{"text": r.text} for r in s.lease_releases], s.last_activity))


# What outline_row and listed_row read of a stored projection, in their order: the JSON
# paths a backend extracts in its query (SQLite's json_extract, PostgreSQL's jsonb), so a
# page of `baton list` sends neither whole sessions nor validates them.
OUTLINE_PATHS = (("phase",), ("repo",), ("worktree_path",), ("branch",), ("agent",), ("workflow", "state", "status"),
                 ("workflow", "state", "next_stage"))
LISTED_PATHS = (*OUTLINE_PATHS, ("files",), ("handoff_verification",), ("reopened_by",), ("checkpoint", "id"),
                ("checkpoint", "boundary"), ("run_log",), ("workflow",), ("leases",), ("lease_releases",))


def outline_row(task_id: str, status: str, last_activity: datetime, fields: Sequence) -> SessionOutline:
    """A session's outline from the values at OUTLINE_PATHS of its stored projection."""
    phase, repo, worktree_path, branch, agent, *stages = fields  # a workflow's fields: text, else None
    return SessionOutline(task_id, status, phase or "planning", repo, worktree_path, branch, agent, last_activity,
                          *(stage if isinstance(stage, str) else None for stage in stages))


def listed_row(task_id: str, status: str, last_activity: datetime, fields: Sequence) -> ListedSession:
    """What `baton list` shows of a session, from the values at LISTED_PATHS of its stored
    projection (as listed_of gives it from the validated session)."""
    from baton import clock

    files, verification, reopened_by, checkpoint, boundary, run_log, workflow, leases, releases = fields[7:]
    by_recency = sorted((-datetime.fromisoformat(touch["last_at"]).timestamp(), touch["path"])
                        for touch in (files or {}).values())
    if verification:
        written = verification.get("written_at")
        verification = {
            "path": verification["path"], "written_at": clock.parse(written).isoformat() if written else None,
            "verified_at": clock.parse(verification["verified_at"]).isoformat(),
            "held": handoff_held(changed=verification["changed"], failed=verification["failed"],
                                 not_run=verification["not_run"]),
            **{key: verification[key] for key in ("verified", "changed", "failed", "not_run", "stale")}}
    return ListedSession(
        outline_row(task_id, status, last_activity, fields[:7]), tuple(path for _, path in by_recency),
        verification or None, runs_started(run_log or (), reopened_by or ()),
        next((run["parent_task_id"] for run in run_log or () if run["kind"] == "fork"), None),
        (checkpoint, boundary) if checkpoint is not None else None, workflow is not None,
        unreleased_leases(leases, releases, last_activity))


def runs_started(run_log: Collection[object], reopened_by: Collection[object]) -> int:
    """How many runs the ticket started: one per entry of its run log (a bind, a reopening, a
    restore, a fork, a fresh start, a take-over each start one), and at least its first bind
    and each reopening (a ticket bound before runs were recorded, or a reopening whose run the
    registry, down then, never learnt). What `baton list`, the dashboard, `resume --json` and
    `baton runs` all count."""
    return max(len(run_log), 1 + len(reopened_by))


def lease_ends(granted_at: datetime, last_activity: datetime, ttl_seconds: int) -> datetime:
    """When a lease ends, the grace not added: its TTL after the later of its grant and the
    ticket's last activity (which every event of the ticket moves, so it only grows)."""
    from datetime import timedelta

    return max(granted_at, last_activity) + timedelta(seconds=ttl_seconds)


def unreleased_leases(leases: list[dict] | None, releases: list[dict] | None,
                      last_activity: datetime) -> tuple[ListedLease, ...]:
    """A session's leases not released, as ListedSession holds them, from the stored JSON
    of its leases and releases."""
    from baton import clock

    ended = {release["text"] for release in releases or ()}
    listed = []
    for lease in leases or ():
        if lease["text"] not in ended:
            granted = clock.parse(lease["at"])
            listed.append(ListedLease(lease["pattern"], bool(lease["exclusive"]),
                                      lease_ends(granted, last_activity, lease["ttl_seconds"]), lease["repo"],
                                      lease.get("agent"), lease.get("reason"), lease["text"], granted))
    return tuple(listed)


def lease_anchor(pattern: str) -> str:
    """The fixed leading segments of a lease pattern (baton.skills.core.path_patterns): every
    path the pattern matches is that path or under it. Empty for a pattern gitignore matches
    at any depth (no slash but a trailing one) or whose first segment is not literal; a
    segment with a glob character or an escape ends it."""
    body = pattern.rstrip("/")
    inner = body.removeprefix("/")
    if "/" not in inner and not body.startswith("/"):
        return ""
    fixed = []
    for segment in inner.split("/"):
        if segment in {"", ".", ".."} or _NOT_LITERAL.intersection(segment):
            break
        fixed.append(segment)
    return "/".join(fixed)


def meeting_anchors(patterns: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """Where a lease that overlaps one of patterns can be anchored: (the anchors that lead
    one of the patterns' anchors or are one, the empty one included; those anchors followed
    by a slash, the prefixes of the anchors under them). None when a pattern is anchored
    nowhere: any lease may overlap it. Two patterns overlap only where their fixed leading
    segments agree as far as both go (path_patterns.overlap meets a literal segment with an
    equal one only), so one's anchor leads the other's."""
    anchors = {lease_anchor(pattern) for pattern in patterns}
    if "" in anchors:
        return None
    return (sorted({above for anchor in anchors for above in path_anchors(anchor)}),
            sorted(f"{anchor}/" for anchor in anchors))


def anchors_meet(reach: tuple[list[str], list[str]] | None, anchor: str) -> bool:
    """Whether a lease anchored at anchor may overlap a claim that reaches reach (meeting_anchors)."""
    return reach is None or anchor in reach[0] or any(anchor.startswith(under) for under in reach[1])


def path_anchors(path: str) -> list[str]:
    """The anchors a lease covering path (repository-relative) can have: none, each of its
    leading directories, the path itself."""
    segments = path.split("/")
    return ["", *("/".join(segments[:n]) for n in range(1, len(segments) + 1))]


def near_leases(sessions: Iterable[tuple[str, Sequence[ListedLease]]], repo: str, paths: Sequence[str]
                ) -> list[tuple[str, ListedLease]]:
    """SessionStore.leases_near's answer from the leases of each ticket given."""
    anchors = {anchor for path in paths for anchor in path_anchors(path)}
    return [(task_id, lease) for task_id, leases in sessions for lease in leases
            if lease.repo == repo and lease_anchor(lease.pattern) in anchors]


def meeting_leases(sessions: Iterable[tuple[str, Sequence[ListedLease]]], repo: str, patterns: Sequence[str]
                   ) -> list[tuple[str, ListedLease]]:
    """The leases of each ticket given that a claim of patterns in repo may overlap (their
    anchors meet: meeting_anchors), with their ticket: what SessionStore.append_unless hands
    a claim's decision."""
    reach = meeting_anchors(patterns)
    return [(task_id, lease) for task_id, leases in sessions for lease in leases
            if lease.repo == repo and anchors_meet(reach, lease_anchor(lease.pattern))]
