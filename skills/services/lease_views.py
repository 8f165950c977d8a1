"""Leases as a lead looks at them (the dashboard's ticket page and conflict map): who holds
what, which expire soon, and where a lease meets another active ticket: covering a file it
touched (the conflict graph answers who touched the files under the pattern's literal start)
or overlapping its own lease. Leases are read as the pre-edit check reads them (the
registry's listed sessions), so the expiry is the registry's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from itertools import combinations
from typing import TYPE_CHECKING

from baton import clock
from baton.registry.base import lease_anchor
from baton.shown_text import clipped, one_line
from baton.skills.core.path_patterns import matches, overlap
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.leases import Lease

EXPIRING_SOON = timedelta(minutes=10)  # or the grace window, when it is longer
REASON_SHOWN = 200  # characters of a lease's reason a page shows
PATHS_SHOWN = 20  # covered files named per conflict


def expiring(expires_at: datetime, at: datetime, grace: timedelta) -> bool:
    """Whether a lease ends within the grace window or EXPIRING_SOON, whichever is longer."""
    return expires_at - at <= max(grace, EXPIRING_SOON)


def shown_reason(reason: str | None) -> str | None:
    """A lease's reason as a page shows it: agent text, one line, clipped (the page escapes it)."""
    return clipped(one_line(reason), REASON_SHOWN) if reason else None


def held_view(leases: list[Lease], at: datetime, grace: timedelta) -> list[dict]:
    return [{"pattern": lease.pattern, "exclusive": lease.exclusive, "holder": lease.task_id, "agent": lease.agent,
             "reason": shown_reason(lease.reason), "expires_at": lease.expires_at.isoformat(),
             "expiring": expiring(lease.expires_at, at, grace)} for lease in leases if lease.active]


@dataclass(frozen=True)
class LeaseConflict:
    """A lease of `holder` that meets the active ticket `other`: covering files it touched
    (paths), or overlapping its lease (other_pattern)."""

    holder: str
    other: str
    repo: str
    pattern: str
    exclusive: bool
    agent: str | None
    reason: str | None
    expires_at: datetime
    expiring: bool
    paths: tuple[str, ...] = ()
    paths_more: int = 0
    other_pattern: str | None = None
    other_exclusive: bool = False

    def to_json(self) -> dict:
        return {**asdict(self), "reason": shown_reason(self.reason), "expires_at": self.expires_at.isoformat(),
                "paths": list(self.paths)}


def lease_conflicts(stores: Stores, *, at: datetime | None = None) -> list[LeaseConflict]:
    """Every active lease of the project that meets another active ticket, by holder, other
    ticket and pattern. Raises StoreUnavailable when the registry or the graph does not answer."""
    at, grace = at or clock.now(), stores.settings.lease_grace
    holders = stores.registry.lease_holders().unwrap(Store.SESSION_REGISTRY) or set[str]()
    listed = stores.registry.listed_sessions(task_ids=holders).unwrap(Store.SESSION_REGISTRY) or []
    held = [(s.outline.task_id, lease) for s in listed if s.outline.status == "active"
            for lease in s.leases if lease.ends + grace >= at]
    found: list[LeaseConflict] = []
    under: dict[tuple[str, str], dict[str, list[str]]] = {}  # one read of the graph per repository and start
    for holder, lease in held:
        expires = lease.ends + grace
        start = (lease.repo, lease_anchor(lease.pattern))  # the paths under it and a few beside, which matches sorts
        if start not in under:
            under[start] = stores.graph.touchers_under(*start).unwrap(Store.CONFLICT_GRAPH)
        for other, touched in sorted(under[start].items()):
            paths = sorted(p for p in touched if matches(lease.pattern, p)) if other != holder else []
            if paths:
                found.append(LeaseConflict(holder, other, lease.repo, lease.pattern, lease.exclusive, lease.agent,
                                           lease.reason, expires, expiring(expires, at, grace),
                                           tuple(paths[:PATHS_SHOWN]), max(0, len(paths) - PATHS_SHOWN)))
    for (a, first), (b, second) in combinations(held, 2):
        if a != b and first.repo == second.repo and overlap(first.pattern, second.pattern):
            # Drawn from the exclusive one, else the first by ticket.
            (holder, lease), (other, theirs) = sorted(((a, first), (b, second)),
                                                      key=lambda pair: (not pair[1].exclusive, pair[0]))
            expires = lease.ends + grace
            found.append(LeaseConflict(holder, other, lease.repo, lease.pattern, lease.exclusive, lease.agent,
                                       lease.reason, expires, expiring(expires, at, grace),
                                       other_pattern=theirs.pattern, other_exclusive=theirs.exclusive))
    return sorted(found, key=lambda c: (c.holder, c.other, c.pattern, c.other_pattern or ""))


def next_mark(expiries: list[datetime], at: datetime, grace: timedelta) -> datetime | None:
    """The next moment after `at` a lease shown as of `at` would be shown otherwise: it
    starts to expire soon, or it ends."""
    window = max(grace, EXPIRING_SOON)
    return min((moment for ends in expiries for moment in (ends - window, ends) if moment > at), default=None)
