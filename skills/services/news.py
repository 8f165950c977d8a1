"""What an agent hears at its next prompt: the signals about its ticket that concern it and
that its agent session was not told yet, read in their stored form (the prompt hook never
builds the validated models)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from baton.signals.wire import WireSignal, file_subject
from baton.skills.runtime.agent_sessions import AgentSessions
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

# How the reason of a ticket_claimed signal starts when it tells the ticket's holder of
# another worktree's bind (baton.skills.services.takeover): refused, or a take-over.
CONTESTED = "contested: "
TAKEN_OVER = "taken over: "
HEARD_SLACK = timedelta(minutes=10)  # signals can be stored a little after the time they carry
SIGNALS_READ = 50


def untold_news(stores: Stores, sessions: AgentSessions, agent_session: str, task_id: str,
                heard: tuple[datetime, str | None] | None, *, bound_at: datetime | None = None,
                bound_session: str | None = None) -> list[WireSignal]:
    """Signals about task_id that concern the agent and that agent_session was not told
    (heard: when it last heard, if ever, and the signal log's watermark then; bound_at: when
    the worktree was bound to task_id; bound_session: the session its binding names)."""
    scope = stores.registry.signal_scope(task_id).unwrap(Store.SESSION_REGISTRY)  # None: no session yet
    # An agent that never heard (it bound mid-session, after its session start) hears
    # everything since the binding; the session's own activity must not move that forward.
    start = heard[0] if heard else bound_at or (scope.created_at if scope else None)
    since = start - HEARD_SLACK if start else None
    depends_on = list(scope.depends_on) if scope else []
    subjects = [f"task:{task_id}", *(f"task:{d}" for d in depends_on)]
    if scope is not None:
        subjects += [file_subject(f.repo, f.path) for f in scope.files]
    found = stores.signals.concerning_wire(subjects, after=since, limit=SIGNALS_READ).unwrap(Store.SIGNAL_LOG)
    relevant = [s for s in found if concerns(s, task_id, depends_on, bound_session)]
    fresh = set(sessions.untold(agent_session, [str(s.signal_id) for s in relevant]))
    return [s for s in relevant if str(s.signal_id) in fresh]


def concerns(signal: WireSignal, task_id: str, depends_on: list[str], bound_session: str | None = None) -> bool:
    """Whether a signal is news for task_id's agent: an overlap it is part of, a dependency
    completed, a rebase needed, another ticket's merged PR on its files, another worktree's
    bind of its ticket (refused or a take-over: news for every session but the binder's)."""
    kind = signal.signal_type.value
    if kind == "ticket_claimed":
        return (signal.task_id == task_id and signal.session_id != bound_session
                and signal.reason.startswith((CONTESTED, TAKEN_OVER)))
    if kind == "conflict_detected":
        return task_id in (signal.task_id, signal.related_task_id)
    if kind == "ticket_completed":
        return signal.task_id in depends_on
    if kind == "rebase_needed":
        return True
    if kind == "pr_merged":
        return signal.task_id != task_id
    return False


def overlapping_task(task_id: str, signal: WireSignal) -> str | None:
    if getattr(signal.signal_type, "value", signal.signal_type) != "conflict_detected":
        return None
    return signal.related_task_id if signal.task_id == task_id else signal.task_id


def forks_among(stores: Stores, task_id: str, news: Sequence[WireSignal]) -> dict[str, str]:
    """{other: "A is a fork of B"} for the tickets news's overlaps name that task_id forked
    from or that forked from it (baton.skills.core.overlaps.fork_related)."""
    from baton.skills.core.overlaps import fork_related

    return fork_related(stores, task_id, filter(None, (overlapping_task(task_id, s) for s in news)))
