"""One run holds a ticket: a bind in another worktree (or on another machine) while a live
run holds the ticket is refused and both sides are told; `--take-over` moves the ticket with
a fencing token (baton.registry.model.TakenOver).

The holder is the session whose bind set the ticket's location (Session.bound_session); it
is live while the ticket is active, not handed off since its bind, and active within the
lease TTL plus the grace (baton.registry.base.lease_ends). It is told through the signal log
(a ticket_claimed signal whose reason starts with CONTESTED or TAKEN_OVER); a take-over never
writes the superseded worktree's binding file: that worktree learns it from the registry
(superseded_notice).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from baton import clock
from baton.errors import Refused
from baton.ids import BATON_NAMESPACE, TicketId, name_uuid
from baton.registry.base import lease_ends
from baton.signals.wire import SignalType
from baton.skills.core.binding import DEFAULT_SESSION, ActiveTask, Place
from baton.skills.core.commit import publish
from baton.skills.core.signalling import wire_signal
from baton.skills.core.write_report import WriteReport
from baton.skills.services.news import CONTESTED, TAKEN_OVER

if TYPE_CHECKING:
    from baton.registry.model import Session
    from baton.skills.runtime.stores import Stores


@dataclass(frozen=True, slots=True)
class Holder:
    """The run that holds a ticket in another worktree, as the registry knows it."""

    sessions: tuple[str, ...]  # the sessions a take-over supersedes
    worktree_path: str
    branch: str | None
    agent: str | None
    since: datetime  # its bind
    last_activity: datetime
    live: bool

    def line(self) -> str:
        about = ", ".join(filter(None, [f"branch {self.branch}" if self.branch else None,
                                        f"agent {self.agent}" if self.agent else None]))
        return (f"{self.worktree_path}" + (f" ({about})" if about else "")
                + f" since {clock.minute(self.since)}, last active {clock.minute(self.last_activity)}")


def holder_elsewhere(stores: Stores, session: Session, place: Place, session_id: str,
                     at: datetime) -> Holder | None:
    """The run that holds the active ticket in another worktree than place (another path or
    repository) with another session than session_id, live or not; None when the ticket is
    ended, held here, or its holder is not known."""
    if session.status.value != "active" or session.worktree_path is None or session.location_stamp is None:
        return None
    if session.worktree_path == str(place.root) and session.repo == place.repo:
        return None
    if session.bound_session == session_id:
        return None
    # A ticket bound before the holder was recorded: every other bound session of it is superseded.
    sessions = ((session.bound_session,) if session.bound_session
                else tuple(s for s in session.session_ids if s not in (session_id, DEFAULT_SESSION)))
    if not sessions:
        return None
    settings = stores.settings
    live = not _handed_off(session) and lease_ends(session.last_activity, session.last_activity,
                                                   int(settings.lease_ttl.total_seconds())) + settings.lease_grace >= at
    return Holder(sessions, session.worktree_path, session.branch, session.agent, session.location_stamp.at,
                  session.last_activity, live)


def _handed_off(session: Session) -> bool:
    """Whether the holder handed the ticket off: a handoff written since its bind, and no file
    touched or decision recorded after it (the end of its turn is no work). A handoff is
    written for the next run, so that run binds without a take-over."""
    handoff = session.handoff
    if handoff is None or session.location_stamp is None or handoff.written_at < session.location_stamp.at:
        return False
    return not any(touch.last_at > handoff.written_at for touch in session.files.values()) and \
        not any(decision.at > handoff.written_at for decision in session.decisions)


def refuse_contested(stores: Stores, task_id: TicketId, place: Place, session_id: str, holder: Holder,
                     session: Session, at: datetime) -> Refused:
    """The refusal of a bind while holder's live run holds the ticket, once its holder is
    signalled (one signal per worktree asking and token)."""
    reason = (f"{CONTESTED}{place.root} asked to bind {task_id} while this run holds it; refused there, "
              f"`baton bind {task_id} --take-over` would supersede this run")
    report = WriteReport()
    publish(stores, [wire_signal(SignalType.ticket_claimed, f"contested:{task_id}:{session.token}:{place.root}",
                                 ActiveTask(task_id, session_id, "bind"), place.repo, at, reason=reason)], report)
    told = "" if not report.warnings else f" (its holder could not be told: {report.warnings[0]})"
    return Refused(f"{task_id} is held by a live run in {holder.line()}; nothing written{told}. "
                   f"`baton bind {task_id} --take-over` moves it here and supersedes that run (its later writes "
                   f"are kept as its own and change nothing of the ticket)")


def take_over(stores: Stores, task_id: TicketId, place: Place, session_id: str, holder: Holder, session: Session,
              at: datetime, report: WriteReport) -> tuple[str, str | None]:
    """Move the ticket from holder to session_id in a new run, with the next fencing token:
    the take-over is stored in the registry at once (StoreUnavailable when it cannot be), and
    refused (Refused) when another take-over was granted the same token first. Answers the
    run the bind starts and the run it superseded; report takes the warnings."""
    from baton.registry.model import TakenOver

    token = session.token + 1
    run_id = str(name_uuid(BATON_NAMESPACE, f"run:{task_id}:takeover {token}"))
    superseded_run = session.current_run.text if session.current_run else None
    event = TakenOver(event_id=name_uuid(BATON_NAMESPACE, f"takeover:{task_id}:{token}"), task_id=task_id,
                      session_id=session_id, at=at, token=token, superseded=list(holder.sessions),
                      superseded_run=superseded_run, run_id=run_id, repo=place.repo, worktree_path=str(place.root),
                      from_worktree_path=holder.worktree_path)
    stored = stores.registry.append([event]).get(task_id)
    granted = next((t for t in stored.takeovers if t.token == token), None) if stored else None
    if granted is not None and granted.holder != session_id:
        raise Refused(f"{task_id} was taken over by {granted.worktree_path} first (token {token}); nothing "
                      f"written: `baton resume {task_id}` shows who holds it")
    stores.sink.keep_decided([event])
    reason = (f"{TAKEN_OVER}{place.root} took {task_id} over from {holder.worktree_path} (token {token}); this run is "
              "superseded: what it records now is kept as its own and changes nothing of the ticket")
    publish(stores, [wire_signal(SignalType.ticket_claimed, f"takeover:{task_id}:{token}",
                                 ActiveTask(task_id, session_id, "bind"), place.repo, at, reason=reason)], report)
    return run_id, superseded_run


def superseded_notice(session: Session, session_id: str | None) -> dict | None:
    """What a worktree bound in session_id is told when a take-over superseded its run: by
    whom, when, the token, and how many of its writes came late (None: not superseded)."""
    fence = session.fenced_by(session_id) if session_id else None
    if fence is None:
        return None
    late = [w for w in session.late_writes if w.session_id == session_id]
    return {"by_worktree": fence.worktree_path, "at": fence.at.isoformat(), "token": fence.token,
            "run_id": fence.superseded_run, "late_writes": len(late),
            "notice": (f"this worktree's run of {session.task_id} was taken over by {fence.worktree_path} at "
                       f"{clock.minute(fence.at)} (token {fence.token}): what it records now is kept as the superseded "
                       f"run's and changes nothing of the ticket ({len(late)} such writes so far); "
                       f"`baton resume {session.task_id} --take-over` takes it back")}


