"""The list skill: active sessions for a lead, with conflicts and staleness."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from baton import clock
from baton.files import FileRef
from baton.outcome import Found
from baton.skills.runtime.stores import Stores
from baton.skills.services.recover import Beat, recover
from baton.store_names import Store


@dataclass
class SessionLine:
    task_id: str
    status: str
    phase: str
    last_activity: datetime
    stale: bool
    files_touched: list[str]
    conflicts_with: list[str]
    handoff: dict | None = None  # the latest recorded re-verification of its handoff (never run here)
    agent: str | None = None
    repo: str | None = None
    runs: int = 1
    stage: str | None = None  # the workflow's status (baton stage), where the ticket uses stages
    interrupted: bool = False  # its agent is gone (baton recover), as this machine's heartbeats tell
    fork_of: str | None = None  # its overlap with that ticket is expected: not a conflict
    checkpoint: str | None = None  # the latest checkpoint: its short id and boundary

    def to_json(self) -> dict:
        return {"task_id": self.task_id, "status": self.status, "phase": self.phase,
                "last_activity": self.last_activity.isoformat(), "stale": self.stale,
                "files_touched": self.files_touched, "conflicts_with": self.conflicts_with,
                "handoff": self.handoff, "agent": self.agent, "repo": self.repo, "runs": self.runs,
                "stage": self.stage, "interrupted": self.interrupted, "fork_of": self.fork_of,
                "checkpoint": self.checkpoint}


@dataclass
class Listing:
    lines: list[SessionLine]
    warnings: list[str] = field(default_factory=list)
    # The files each pair of active tickets shares, both ways: {task: {other: [FileRef, ...]}}.
    overlaps: dict[str, dict[str, list[FileRef]]] = field(default_factory=dict)


def list_sessions(stores: Stores, *, include_inactive: bool = False, at: datetime | None = None,
                  heartbeats: Iterable[Beat] | None = None) -> Listing:
    """Sessions newest first; raises StoreUnavailable when the registry cannot answer.
    heartbeats: the hooks' heartbeats on this machine, to mark tickets whose agent is gone."""
    at = at or clock.now()
    sessions = stores.registry.list_sessions(include_inactive=include_inactive).unwrap(Store.SESSION_REGISTRY)
    warnings = []
    overlaps = stores.graph.active_overlaps()
    shared = overlaps.value if isinstance(overlaps, Found) else {}
    if isinstance(overlaps, Found):
        conflicts = {task: sorted(others) for task, others in overlaps.value.items()}
    else:
        conflicts = {}
        warnings.append(f"conflict graph unavailable: {overlaps.reason}; conflicts not shown")
    forks = {(s.task_id, s.fork_of) for s in sessions if s.fork_of}
    conflicts = {task: [o for o in others if (task, o) not in forks and (o, task) not in forks]
                 for task, others in conflicts.items()}
    stale_after = stores.settings.stale_after
    interrupted = set()
    if heartbeats is not None:
        interrupted = {found.task_id for found in recover(stores, None, heartbeats, all_repos=True, now=at).candidates}
    lines = [
        SessionLine(task_id=s.task_id, status=s.status.value, phase=s.phase.value, last_activity=s.last_activity,
                    stale=s.status.value == "active" and at - s.last_activity > stale_after,
                    files_touched=[t.path for t in s.files_by_recency()],
                    conflicts_with=conflicts.get(s.task_id, []) if s.status.value == "active" else [],
                    handoff=s.handoff_verification.public() if s.handoff_verification else None,
                    agent=s.agent, repo=s.repo, runs=s.runs,
                    stage=str(s.workflow.state.get("status")) if s.workflow else None,
                    interrupted=s.task_id in interrupted, fork_of=s.fork_of,
                    checkpoint=f"{s.checkpoint.id[:10]} ({s.checkpoint.boundary})" if s.checkpoint else None)
        for s in sessions
    ]
    return Listing(lines, warnings, shared)
