"""Leases: a ticket's advisory reservation of paths (`baton claim`, `baton release`, `baton leases`).

A lease is the ticket's LeaseGranted event, its end a LeaseReleased one. It needs no renewal:
it lasts its TTL plus the grace after the ticket's last activity, which only grows, so its
expiry only grows too; past it the lease has lapsed and another ticket may take what it held.
A grant is decided by the registry one at a time per project (SessionStore.append_unless),
from the leases the claim may overlap: overlapping another ticket's exclusive lease, or an
exclusive claim overlapping any, is refused with the holder named, and nothing is stored (a
claim is all or nothing). Patterns are gitignore patterns relative to the repository's root
(baton.skills.core.path_patterns); leases of another repository never meet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import BadInput, Refused
from baton.outcome import Unavailable
from baton.registry.base import lease_ends
from baton.skills.core.path_patterns import matches, normal_pattern, overlap

if TYPE_CHECKING:
    from baton.registry.base import ListedLease
    from baton.registry.model import Event, LeaseEntry, ReleaseEntry, Session
    from baton.skills.core.binding import ActiveTask, Place
    from baton.skills.runtime.stores import Stores

MAX_PATTERNS = 100
MAX_REASON = 500
_RELEASE_NAMESPACE = "5b7f3a52-2f0e-4d0b-9d8e-3b1c0c6f4a17"  # uuid imported only by a write (the pre-edit check reads)


@dataclass(frozen=True)
class Lease:
    """A lease as it stands at a moment: active, lapsed, released or ended (its ticket ended)."""

    lease_id: str
    task_id: str
    repo: str
    pattern: str
    exclusive: bool
    agent: str | None
    reason: str | None
    granted_at: datetime
    expires_at: datetime
    state: str
    released_at: datetime | None = None
    released_by: str | None = None
    release_reason: str | None = None
    forced: bool = False

    @property
    def active(self) -> bool:
        return self.state == "active"

    def public(self) -> dict:
        return {**asdict(self), "granted_at": self.granted_at.isoformat(), "expires_at": self.expires_at.isoformat(),
                "released_at": self.released_at.isoformat() if self.released_at else None}

    def line(self) -> str:
        kind = "exclusive" if self.exclusive else "shared"
        if self.state == "active":
            when = f"until {clock.minute(self.expires_at)}"
        elif self.state == "released":
            by = f"force-released by {self.released_by}" if self.forced else "released"
            when = f"{by}" + (f" ({self.release_reason})" if self.release_reason else "")
        else:
            when = self.state
        reason = f" - {self.reason}" if self.reason else ""
        return f"{self.task_id} {kind} {self.pattern} {when}{reason}"


def leases_of(session: Session, at: datetime, grace: timedelta) -> list[Lease]:
    releases: dict[str, ReleaseEntry] = {r.text: r for r in session.lease_releases}
    ended = session.status.value != "active"  # ended completed or stalled: its leases end with it
    return [_lease(session, entry, releases.get(entry.text), ended, at, grace) for entry in session.leases]


def _lease(session: Session, entry: LeaseEntry, release: ReleaseEntry | None, ended: bool, at: datetime,
           grace: timedelta) -> Lease:
    expires = lease_ends(entry.at, session.last_activity, entry.ttl_seconds) + grace
    state = ("released" if release is not None else "ended" if ended else "lapsed" if at > expires else "active")
    return Lease(lease_id=entry.text, task_id=session.task_id, repo=entry.repo, pattern=entry.pattern,
                 exclusive=entry.exclusive, agent=entry.agent, reason=entry.reason, granted_at=entry.at,
                 expires_at=expires, state=state, released_at=release.released_at if release else None,
                 released_by=release.by if release else None, release_reason=release.reason if release else None,
                 forced=release.forced if release else False)


def _held(task_id: str, lease: ListedLease, at: datetime, grace: timedelta) -> Lease:
    """A lease not released of an active ticket (as a claim's decision and the pre-edit check read it), at `at`."""
    expires = lease.ends + grace
    return Lease(lease_id=lease.lease_id, task_id=task_id, repo=lease.repo, pattern=lease.pattern,
                 exclusive=lease.exclusive, agent=lease.agent, reason=lease.reason, granted_at=lease.granted_at,
                 expires_at=expires, state="lapsed" if at > expires else "active")


def refusal_line(pattern: str, lease: Lease) -> str:
    who = f"{lease.task_id}" + (f" ({lease.agent})" if lease.agent else "")
    why = f": {lease.reason}" if lease.reason else ""
    kind = "exclusive" if lease.exclusive else "shared"
    return (f"{pattern} overlaps {lease.pattern}, held {kind} by {who} until "
            f"{clock.minute(lease.expires_at)}{why}; ask its holder to release it, or a lead may "
            f"`baton release --force --ticket {lease.task_id} --reason TEXT`")


@dataclass
class ClaimReport:
    granted: list[Lease] = field(default_factory=list)
    already: list[Lease] = field(default_factory=list)  # held already, as asked
    shared_with: list[Lease] = field(default_factory=list)  # others' shared leases a shared claim overlaps
    warnings: list[str] = field(default_factory=list)


def claim_answer(task_id: str, report: ClaimReport) -> dict:
    return {"task_id": task_id, "granted": [lease.public() for lease in report.granted],
            "held_already": [lease.public() for lease in report.already],
            "shared_with": [lease.public() for lease in report.shared_with], "warnings": report.warnings}


def _reason(value: str | None, stores: Stores) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_REASON:
        raise BadInput(f"--reason is longer than {MAX_REASON} characters")
    return stores.redact(value)


def _patterns(raw: Sequence[str]) -> list[str]:
    if not raw:
        raise BadInput("no paths or patterns given")
    if len(raw) > MAX_PATTERNS:
        raise BadInput(f"too many patterns in one call: {len(raw)} (at most {MAX_PATTERNS})")
    return list(dict.fromkeys(normal_pattern(p) for p in raw))


def claim(stores: Stores, task: ActiveTask, place: Place, raw_patterns: Sequence[str], *, exclusive: bool = False,
          ttl: str | None = None, reason: str | None = None, agent: str | None = None) -> ClaimReport:
    """Grant the ticket a lease on each pattern, or none: raises Refused naming the first
    holder in the way, BadInput for a bad pattern, TTL or reason, StoreUnavailable."""
    import uuid

    from baton.registry.model import LeaseGranted

    patterns = _patterns(raw_patterns)
    try:
        lasting = stores.settings.lease_ttl if ttl is None else clock.parse_duration(ttl)
    except ValueError as exc:
        raise BadInput(f"--ttl: {exc}") from None
    reason = _reason(reason, stores)
    grace = stores.settings.lease_grace
    report = ClaimReport(warnings=stores.sink.deliver())  # this ticket's kept writes move its leases' time too
    events: list[Event] = []

    def refusal(near: list[tuple[str, ListedLease]]) -> str | None:
        at = clock.now()  # the decision's time: grants are stamped in the order they were decided
        held = [_held(task_id, lease, at, grace) for task_id, lease in near]
        mine = {(lease.pattern, lease.exclusive): lease for lease in held
                if lease.task_id == task.task_id and lease.active and lease.repo == place.repo}
        # Each other active lease a pattern overlaps, decided once: the refusal and the
        # shared leases of a grant are drawn from them.
        overlapping = {pattern: [lease for lease in held if lease.active and lease.task_id != task.task_id
                                 and lease.repo == place.repo and overlap(lease.pattern, pattern)]
                       for pattern in patterns}
        for pattern in patterns:
            in_the_way = [lease for lease in overlapping[pattern] if lease.exclusive or exclusive]
            if in_the_way:
                return refusal_line(pattern, in_the_way[0])
        events.clear()
        report.granted.clear()
        report.already.clear()
        for pattern in patterns:
            if (pattern, exclusive) in mine:
                report.already.append(mine[(pattern, exclusive)])
                continue
            other = mine.get((pattern, not exclusive))
            if other is not None:  # the same pattern held the other way: the new lease replaces it
                events.append(_release_event(other, task.session_id, at, by=task.task_id, forced=False,
                                             reason="claimed again " + ("exclusive" if exclusive else "shared"),
                                             holder_last=at))
            event_id = uuid.uuid4()
            events.append(LeaseGranted(event_id=event_id, task_id=task.task_id, session_id=task.session_id, at=at,
                                       repo=place.repo, pattern=pattern, exclusive=exclusive,
                                       ttl_seconds=max(1, int(lasting.total_seconds())), reason=reason, agent=agent))
            report.granted.append(Lease(lease_id=str(event_id), task_id=task.task_id, repo=place.repo,
                                        pattern=pattern, exclusive=exclusive, agent=agent, reason=reason,
                                        granted_at=at, expires_at=at + lasting + grace, state="active"))
        report.shared_with = [lease for pattern in patterns for lease in overlapping[pattern]]
        return None

    refused = stores.registry.append_unless(events, place.repo, patterns, refusal)
    if refused is not None:
        raise Refused(refused)
    if events:
        stores.sink.keep_decided(events)
    return report


def _release_event(lease: Lease, session_id: str, at: datetime, *, by: str, forced: bool, reason: str | None,
                   holder_last: datetime) -> Event:
    import uuid

    from baton.registry.model import LeaseReleased

    return LeaseReleased(event_id=uuid.uuid5(uuid.UUID(_RELEASE_NAMESPACE), lease.lease_id), task_id=lease.task_id,
                         session_id=session_id, at=holder_last, lease_id=uuid.UUID(lease.lease_id),
                         released_at=at, forced=forced, by=by, reason=reason)


def releaser(task: ActiveTask | None) -> str:
    """Who a release is recorded as made by: the releasing ticket, else the user on this host."""
    if task is not None:
        return task.task_id
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass
class ReleaseReport:
    holder: str  # the ticket whose leases were released
    released: list[Lease] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def release(stores: Stores, holder_id: str, repo: str, raw_patterns: Sequence[str], *, by: str,
            session_id: str | None = None, force: bool = False, reason: str | None = None) -> ReleaseReport:
    """End the holder's active leases in repo on the patterns given (all of them without),
    and answer them, with the warnings of a store that missed them. A release of another
    ticket's leases needs force and a reason (a lead's, recorded with who and why). BadInput
    for a pattern it does not hold."""
    patterns = _patterns(raw_patterns) if raw_patterns else []
    reason = _reason(reason, stores)
    if force and not reason:
        raise BadInput("--force needs --reason: a forced release is recorded with who and why")
    at = clock.now()
    stores.sink.deliver()
    session = stores.registry.get(holder_id).unwrap("registry")
    if session is None:
        raise BadInput(f"no ticket {holder_id} in this project")
    active = [lease for lease in leases_of(session, at, stores.settings.lease_grace)
              if lease.active and (lease.repo == repo or force)]
    if patterns:
        unknown = [p for p in patterns if p not in {lease.pattern for lease in active}]
        if unknown:
            raise BadInput(f"{holder_id} holds no active lease on {', '.join(unknown)}")
        active = [lease for lease in active if lease.pattern in patterns]
    # The holder's own session when it releases; a lead's release carries one of the holder's
    # sessions and its latest time (LeaseReleased), moving nothing of it.
    events = [_release_event(lease, session_id or session.session_ids[-1], at, by=by, forced=force, reason=reason,
                             holder_last=at if not force else session.last_activity) for lease in active]
    report = ReleaseReport(holder_id, [replace(lease, state="released", released_at=at, released_by=by,
                                               release_reason=reason, forced=force) for lease in active])
    if events:
        stores.registry.append(events)
        stores.sink.keep_decided(events)
    return report


def release_asked(stores: Stores, place: Place, active: Callable[[], ActiveTask], *, ticket: str | None,
                  paths: Sequence[str], force: bool, reason: str | None) -> ReleaseReport:
    """`baton release` as asked: the active ticket's own leases, or (--force --ticket T) a
    lead's release of T's, recorded as made by the active ticket if any, else the user."""
    from baton.ids import parse_ticket_id

    if ticket is None:
        if force:
            raise BadInput("--force goes with --ticket: the ticket whose leases a lead releases")
        task = active()
        return release(stores, task.task_id, place.repo, paths, by=task.task_id, session_id=task.session_id,
                       reason=reason)
    holder = parse_ticket_id(ticket)
    try:
        releasing: ActiveTask | None = active()
    except BadInput:
        releasing = None
    if not force and (releasing is None or releasing.task_id != holder):
        raise BadInput(f"{holder}'s leases are its own: a lead releases them with --force --reason TEXT")
    if not force and releasing is not None:
        return release(stores, holder, place.repo, paths, by=holder, session_id=releasing.session_id, reason=reason)
    return release(stores, holder, place.repo, paths, by=releaser(releasing), force=True, reason=reason)


def release_line(holder: str, released: Sequence[Lease]) -> str:
    return "\n".join(f"released {lease.line()}" for lease in released) or f"{holder} held no active lease to release"


def project_leases(stores: Stores, *, include_ended: bool = False, at: datetime | None = None) -> list[Lease]:
    """The project's active leases (include_ended: every lease), by ticket then grant time."""
    at = at or clock.now()
    listed = stores.registry.list_sessions(include_inactive=True).unwrap("registry") or []
    leases = [lease for s in listed for lease in leases_of(s, at, stores.settings.lease_grace)
              if include_ended or lease.active]
    return sorted(leases, key=lambda lease: (lease.task_id, lease.granted_at, lease.pattern))


def leases_covering(stores: Stores, repo: str, paths: Sequence[str], *, exclude_task: str | None
                    ) -> dict[str, list[Lease]] | Unavailable:
    """For each path (repository-relative) under another ticket's active lease in repo, those
    leases; paths under none are left out. The pre-edit check's question: it reads only the
    leases whose pattern may cover one of paths (SessionStore.leases_near, indexed by each
    pattern's fixed leading directories), and pathspec only when there is one."""
    at, grace = clock.now(), stores.settings.lease_grace
    near = stores.registry.leases_near(repo, paths)
    if isinstance(near, Unavailable):
        return near
    held = [(task_id, lease) for task_id, lease in near.value
            if task_id != exclude_task and lease.ends + grace >= at]
    covering: dict[str, list[Lease]] = {}
    for path in paths if held else ():
        hits = [_held(task_id, lease, at, grace) for task_id, lease in held if matches(lease.pattern, path)]
        if hits:
            covering[path] = hits
    return covering


def notices(session: Session, sessions: Sequence[Session], at: datetime, grace: timedelta) -> list[str]:
    """What the holder should be told of its leases that ended without it: lapsed (and taken,
    when another ticket was granted an overlapping lease after), or force-released by a lead."""
    told: list[str] = []
    held = leases_of(session, at, grace)
    if not held or session.status.value != "active":
        return told
    # Told until the holder claims anew: a lease that ended before its latest grant is old news.
    latest = max(lease.granted_at for lease in held)
    others = [lease for s in sessions if s.task_id != session.task_id for lease in leases_of(s, at, grace)]
    for lease in held:
        if (lease.released_at or lease.expires_at) < latest:
            continue
        if lease.state == "released" and lease.forced:
            told.append(f"lease {lease.pattern} was released by {lease.released_by}"
                        + (f": {lease.release_reason}" if lease.release_reason else ""))
        elif lease.state == "lapsed":
            taken = [o for o in others if o.repo == lease.repo and o.granted_at > lease.expires_at
                     and (o.exclusive or lease.exclusive) and overlap(o.pattern, lease.pattern)]
            told.append(f"lease {lease.pattern} lapsed at {clock.minute(lease.expires_at)}"
                        + (f" and was taken by {taken[0].task_id} ({taken[0].pattern})" if taken else "")
                        + "; claim it again to hold it")
    return told
