"""The agent's native continuation of a ticket's run, offered by resume as an optimisation
(`claude --resume SESSION_ID`, run in the worktree, continues the previous transcript): only
when this machine's data home holds the run's provider reference
(baton.skills.runtime.provider_refs), the resuming agent is the one that worked, here, and
its transcript still exists; otherwise resume says why not.
"""

from __future__ import annotations

import shlex
import socket
from dataclasses import dataclass
from pathlib import Path

from baton.registry.model import Session
from baton.skills.core.interrupted import NATIVE_RESUME
from baton.skills.runtime import provider_refs


@dataclass(frozen=True, slots=True)
class Continuation:
    command: str | None  # what to run, in `worktree`; None: not offered, and `reason` says why
    worktree: str | None
    reason: str | None


def native_continuation(home: Path, session: Session, worktree: Path, agent: str | None) -> Continuation:
    """Whether the agent resuming session's current run (agent: as resume was told, else
    the one the ticket recorded) can continue the previous conversation natively here."""
    run = session.current_run
    if run is None:
        return Continuation(None, None, "the ticket has no run recorded")
    ref = provider_refs.read(home, run.text)
    if ref is None:
        return Continuation(None, None, f"no agent session of run {run.text[:8]} was recorded on this machine "
                                        "(a restore, fork or fresh start begins a new conversation)")
    resuming = agent or session.agent
    if resuming is not None and resuming.lower() not in (ref.agent, f"{ref.agent}-code"):
        return Continuation(None, None, f"the resuming agent ({resuming}) is not the one that worked ({ref.agent})")
    if ref.host != socket.gethostname():
        return Continuation(None, None, "the previous agent session ran on another machine")
    if not ref.transcript_path or not Path(ref.transcript_path).expanduser().is_file():
        return Continuation(None, None, "the previous agent session's transcript no longer exists")
    command = shlex.join([*NATIVE_RESUME[ref.agent], ref.session_id])
    return Continuation(command, session.worktree_path or str(worktree), None)
