"""The dashboard's overview: the listing of `baton list --json` and the recent signals of
`baton signals --json`, kept as one snapshot that is rebuilt only when the stores changed.

Listing 1,000 active tickets costs the services far more than the 100 ms a page may take
(bench/dashboard.py prints both), so pages and the live feed read the snapshot, and a
cheap change marker says when to rebuild it: on the embedded default the watermarks of
the registry and the signal log and the graph file's size and time (every write moves one
of them, and no read does: the registry's file changes when a read applies pending events,
so its file is not the mark); with a server, whose writes leave no trace here, the
snapshot is rebuilt once it is older than SERVER_REFRESH, and on either when a lease it shows
starts to expire soon or ends. The dashboard only reads: it neither delivers kept writes nor
runs a probe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from baton import clock
from baton.errors import StoreUnavailable
from baton.outcome import Found
from baton.skills.frontends.answers import listing_answer, signals_answer
from baton.skills.runtime.agent_sessions import local_heartbeats
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores
from baton.skills.services.lease_views import lease_conflicts, next_mark
from baton.skills.services.listing import list_sessions
from baton.skills.services.queries import signals_since

SERVER_REFRESH = 1.0  # seconds a snapshot read from servers is served before it is rebuilt
FEED_WINDOW = timedelta(hours=1)  # the feed shows what happened in the last hour
FEED_LIMIT = 50


@dataclass(frozen=True)
class Filters:
    repo: str = ""
    agent: str = ""
    only_conflicts: bool = False
    include_ended: bool = False

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        return cls(repo=query.get("repo", ""), agent=query.get("agent", ""),
                   only_conflicts=query.get("conflicts") == "1", include_ended=query.get("all") == "1")

    def keeps(self, row: dict) -> bool:
        return ((self.include_ended or row["status"] == "active")
                and (not self.repo or row["repo"] == self.repo)
                and (not self.agent or row["agent"] == self.agent)
                and (not self.only_conflicts or row["conflicts_with"]))


@dataclass
class Snapshot:
    """Every session (ended ones too, for the filter), newest first, as `baton list --json`
    prints them, and the last hour's signals. The files tickets share are read for the map's
    tickets only, when it asks (OverviewSource.shared_among), and kept with the snapshot."""

    version: int
    built_at: datetime
    rows: list[dict] = field(default_factory=list)
    signals: list[dict] = field(default_factory=list)
    registry: str = "ok"  # or "unavailable: reason"
    signal_log: str = "ok"
    warnings: list[str] = field(default_factory=list)
    total: int = 0  # the sessions there are: past the listing's page (rows), more than rows holds
    # Where active leases meet other active tickets (LeaseConflict.to_json), and when one
    # shown here starts to expire soon or ends (the snapshot is then rebuilt).
    lease_conflicts: list[dict] = field(default_factory=list)
    leases: str = "ok"  # or the store that did not answer, and why
    changes_at: datetime | None = None
    # {tickets asked: {task: {other: [FileRef]}}, both ways}, as the graph answered for this snapshot.
    overlaps: dict[tuple[str, ...], dict[str, dict[str, list]]] = field(default_factory=dict, repr=False)

    def rows_for(self, filters: Filters) -> list[dict]:
        return [row for row in self.rows if filters.keeps(row)]

    def choices(self) -> tuple[list[str], list[str]]:
        """The repositories and agents to filter by."""
        return (sorted({row["repo"] for row in self.rows if row["repo"]}),
                sorted({row["agent"] for row in self.rows if row["agent"]}))


def reading(settings: Settings) -> Stores:
    """The stores, opened to read: the dashboard writes nothing, and so keeps nothing to deliver."""
    stores = Stores(settings)
    stores.deliver_on_close = False
    return stores


def build_snapshot(settings: Settings, version: int) -> Snapshot:
    """Read the stores once, through the services the CLI uses; a store that does not
    answer is recorded in the snapshot, never raised."""
    now = clock.now()
    snapshot = Snapshot(version=version, built_at=now)
    with closing(reading(settings)) as stores:
        try:
            listing = list_sessions(stores, include_inactive=True, at=now, heartbeats=local_heartbeats(settings))
            snapshot.rows = listing_answer(listing)
            snapshot.total = listing.total
            more = listing.more()
            snapshot.warnings = [*listing.warnings, *([more.replace("--limit", "`baton list --limit`", 1)]
                                                      if more else [])]
        except StoreUnavailable as exc:
            snapshot.registry = f"unavailable: {exc.reason}"
        try:
            snapshot.lease_conflicts = [c.to_json() for c in lease_conflicts(stores, at=now)]
        except StoreUnavailable as exc:
            snapshot.leases = str(exc)
        expiries = [clock.parse(lease["expires_at"]) for row in snapshot.rows for lease in row["leases"]]
        snapshot.changes_at = next_mark(expiries, now, settings.lease_grace)
        try:
            since = clock.to_text(now - FEED_WINDOW)
            snapshot.signals = signals_answer(signals_since(stores, task_id=None, since=since, limit=FEED_LIMIT))
        except StoreUnavailable as exc:
            snapshot.signal_log = f"unavailable: {exc.reason}"
    return snapshot


class OverviewSource:
    """The current snapshot, rebuilt (by one thread at a time) when the marker moved."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._marker: tuple | None = None
        self._marks = reading(settings)  # kept open: the marker is read every POLL seconds per open page
        self._marking = threading.Lock()

    def marker(self) -> tuple | None:
        """What changes with every write to the embedded stores, read without decoding
        anything: the registry's and the signal log's watermarks and the graph file's size
        and time (the dashboard never writes the graph). None with a server."""
        if self.settings.uses_servers:
            return None
        with self._marking:
            marks = []
            for store in ("registry", "signals"):
                try:
                    marks.append(getattr(self._marks, store).watermark())
                except StoreUnavailable as exc:
                    marks.append(str(exc))
            for suffix in ("", "-wal"):
                try:
                    stat = (self.settings.home / f"graph.db{suffix}").stat()
                    marks.append((stat.st_mtime_ns, stat.st_size))
                except OSError:
                    marks.append(None)
            return tuple(marks)

    def _fresh(self, marker: tuple | None) -> bool:
        if self._snapshot is None:
            return False
        if self._snapshot.changes_at is not None and clock.now() >= self._snapshot.changes_at:
            return False
        if marker is None:
            return (clock.now() - self._snapshot.built_at).total_seconds() < SERVER_REFRESH
        return marker == self._marker

    def shared_among(self, snapshot: Snapshot, task_ids: list[str]) -> dict[str, dict[str, list]]:
        """The files each pair of these tickets shares, read once per snapshot; {} (and the
        map draws no edges) when the graph does not answer."""
        asked = tuple(sorted(task_ids))
        if asked not in snapshot.overlaps:
            with self._marking:
                found = self._marks.graph.shared_files_of(asked, among=True)
            snapshot.overlaps[asked] = found.value if isinstance(found, Found) else {}
        return snapshot.overlaps[asked]

    def current(self) -> Snapshot:
        marker = self.marker()
        if self._snapshot is not None and self._fresh(marker):
            return self._snapshot
        with self._lock:
            marker = self.marker()  # taken before the read: a write during it moves it again
            if self._snapshot is None or not self._fresh(marker):
                version = self._snapshot.version + 1 if self._snapshot else 1
                self._snapshot, self._marker = build_snapshot(self.settings, version), marker
            return self._snapshot


def conflict_map(snapshot: Snapshot, filters: Filters, limit: int,
                 shared_among: Callable[[Snapshot, list[str]], dict[str, dict[str, list]]]) -> dict:
    """Tickets as nodes and shared files as edges, for the map: the `limit` tickets with the
    most conflicts among those the filters keep (a map stays legible up to about 50); only
    their shared files are read. A fork and its parent sharing files are an edge marked
    "fork of", expected and not counted as a conflict; a fork or parent whose only overlap
    is that one comes after every ticket in conflict. A lease that meets another ticket
    (baton.skills.services.lease_views) is an edge marked with the lease, from its holder;
    those tickets come after the ones sharing files."""
    kept = {row["task_id"]: row for row in snapshot.rows_for(filters) if row["status"] == "active"}
    parents = {row["fork_of"] for row in kept.values() if row["fork_of"] in kept}

    def fork_of(task: str, other: str) -> str | None:
        if kept[task]["fork_of"] == other:
            return f"{task} is a fork of {other}"
        if kept[other]["fork_of"] == task:
            return f"{other} is a fork of {task}"
        return None

    in_conflict = sorted((row for row in kept.values() if row["conflicting_tickets"]),
                         key=lambda row: (-row["conflicting_tickets"], row["task_id"]))
    forks_only = sorted(task for task, row in kept.items()
                        if not row["conflicting_tickets"] and (row["fork_of"] in kept or task in parents))
    leased = [c for c in snapshot.lease_conflicts if c["holder"] in kept and c["other"] in kept]
    by_lease = sorted({task for c in leased for task in (c["holder"], c["other"])})
    asked = list(dict.fromkeys([row["task_id"] for row in in_conflict] + forks_only + by_lease))[:limit]
    shared = shared_among(snapshot, asked) if asked else {}
    in_lease = {task for task in by_lease if task in asked}
    shown = [task for task in asked if kept[task]["conflicting_tickets"] or shared.get(task) or task in in_lease]
    exclusive = {c["holder"] for c in leased if c["exclusive"]}
    nodes = [{"id": task, "conflicts": kept[task]["conflicting_tickets"], "stale": kept[task]["stale"],
              "agent": kept[task]["agent"], "exclusive_lease": task in exclusive} for task in shown]
    edges: list[dict[str, object]] = [
        {"a": task, "b": other, "files": sorted({ref.path for ref in refs}), "fork_of": fork_of(task, other),
         "lease": None}
        for task in sorted(shared) for other, refs in sorted(shared[task].items()) if task < other]
    edges += [{"a": c["holder"], "b": c["other"], "files": c["paths"], "fork_of": None, "lease": c}
              for c in leased if c["holder"] in in_lease and c["other"] in in_lease]
    graph = next((w for w in snapshot.warnings if w.startswith("conflict graph unavailable")), "ok")
    return {"nodes": nodes, "edges": edges, "in_conflict": len(in_conflict), "graph": graph, "leases": snapshot.leases}


def changes(before: Snapshot | None, after: Snapshot, filters: Filters) -> dict:
    """What an open page must redraw: rows changed, added or gone, their order, and the
    feed's new items (touches found by comparing the rows, and new signals)."""
    old = {row["task_id"]: row for row in before.rows} if before else {}
    kept = after.rows_for(filters)
    changed = [row for row in kept if old.get(row["task_id"]) != row]
    order = [row["task_id"] for row in kept]
    old_order = [row["task_id"] for row in before.rows_for(filters)] if before else []
    gone = sorted(set(old_order) - set(order))
    touches = []
    for row in changed:
        previous = old.get(row["task_id"])
        if previous is None or (previous["files_touched"][:1] == row["files_touched"][:1] \
                and len(previous["files_touched"]) == len(row["files_touched"])):
            continue
        fresh = [path for path in row["files_touched"] if path not in set(previous["files_touched"])]
        touches.append({"task_id": row["task_id"], "files": fresh or row["files_touched"][:1],
                        "at": row["last_activity"]})
    seen = {s["signal_id"] for s in before.signals} if before else set()
    signals = [s for s in after.signals if s["signal_id"] not in seen]
    return {"changed": changed, "gone": gone, "order": order if order != old_order else None,
            "touches": touches, "signals": signals}
