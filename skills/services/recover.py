"""The recover skill: which sessions of this repository lost their agent, and the exact
command that continues each (`baton recover`). It reads the registry, the heartbeats the
hooks kept on this machine (baton.skills.runtime.agent_sessions, unless the caller read
them already), the worktrees, branches and processes, and any PrizmKit records in the worktree;
it never runs a command, changes state or deletes anything (baton.skills.core.interrupted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from baton.skills.core.interrupted import Heartbeat, MachineLiveness, Recovery, SessionFacts, detect, read_prizmkit
from baton.skills.runtime.agent_sessions import Beat, local_heartbeats
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.registry.base import SessionOutline
    from baton.skills.core.binding import Place
    from baton.skills.runtime.stores import Stores

HOOKS_AGENT = "claude"  # the hooks that keep heartbeats are Claude Code's


def recover(stores: Stores, place: Place | None, beats: Iterable[Beat] | None = None, *, all_repos: bool = False,
            verbose: bool = False, now: datetime | None = None,
            outlines: Sequence[SessionOutline] | None = None) -> Recovery:
    """The interrupted sessions of this repository (all_repos: of every repository of the
    stores' project on this machine; what place None asks, without reading a worktree's
    PrizmKit records), newest first; with verbose, the ended ones are listed among the
    excluded too. outlines: the registry's, when the caller has read them already (the listing).
    Raises StoreUnavailable when the registry cannot answer."""
    if outlines is None:
        # The outlines, not the sessions: a thousand validated sessions would cost more than the rest.
        outlines = stores.registry.session_outlines(include_inactive=verbose).unwrap(Store.SESSION_REGISTRY) or []
    if beats is None:
        beats = local_heartbeats(stores.settings)
    heartbeats = {(b.task_id, b.worktree): b for b in beats}
    facts = []
    for session in outlines:
        if not session.worktree_path or (not all_repos and place is not None and session.repo != place.repo):
            continue
        beat = heartbeats.get((session.task_id, session.worktree_path))
        facts.append(SessionFacts(
            task_id=session.task_id, worktree=session.worktree_path, branch=session.branch,
            last_activity=session.last_activity, ended=session.status != "active",
            stage=session.stage or session.phase, next_stage=session.next_stage,
            agent=session.agent or (HOOKS_AGENT if beat is not None else None),
            heartbeat=None if beat is None else Heartbeat(pid=beat.pid, at=beat.at,
                                                          agent_session_id=beat.agent_session,
                                                          process_start=beat.process_start, host=beat.host)))
    liveness = MachineLiveness(stores.deadline)
    found = detect(facts, liveness, now=now)
    if place is None:
        return found
    return read_prizmkit(place.root, lambda branch: liveness.branch_exists(str(place.root), branch), found=found)
