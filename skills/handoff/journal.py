"""The work journal of a ticket, read from its session projection.

Typed items, each with its provenance: observed (Baton ran the command or read git) or
reported (the agent said so through `baton update`, `baton decide` or the MCP tools).
Agent-reported items are kept apart from observations everywhere they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from baton.registry.model import Entry, Provenance, Session

REPORTED = Provenance.reported.value


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Item(NamedTuple):
    text: str
    provenance: str
    at: datetime | None = None
    context: str = ""


class CheckItem(NamedTuple):
    command: str
    exit_status: int | None
    summary: str
    provenance: str
    at: datetime

    @property
    def result(self) -> str:
        if self.exit_status is None:
            return "did not finish"
        return "passed" if self.exit_status == 0 else f"failed (exit {self.exit_status})"


@dataclass(frozen=True)
class Journal:
    goal: Item | None = None
    next_action: Item | None = None
    constraints: list[Item] = field(default_factory=list)
    decisions: list[Item] = field(default_factory=list)
    completed_steps: list[Item] = field(default_factory=list)
    failures: list[Item] = field(default_factory=list)
    remaining_work: list[Item] = field(default_factory=list)
    checks: list[CheckItem] = field(default_factory=list)  # the latest run of each command
    evidence: list[Item] = field(default_factory=list)
    files: list[Item] = field(default_factory=list)


def _item(entry: Entry, session: Session | None = None) -> Item:
    return Item(entry.text, _provenance(entry.provenance.value, entry.inherited_from, entry.at, session), entry.at,
                entry.context)


def _provenance(provenance: str, inherited_from: str | None, at: datetime, session: Session | None) -> str:
    """The provenance, marked inherited when the item came from another ticket (a fork) or,
    for evidence and checks (given the session), from an earlier run of this one: a run
    never shows what another produced as its own."""
    if inherited_from:
        return f"inherited from {inherited_from}"
    if session is not None and session.current_run is not None:
        run = session.run_at(at)
        if run is not None and run.text != session.current_run.text:
            return f"{provenance}, inherited from run {run.text[:8]}"
    return provenance


def _latest_checks(session: Session) -> list[CheckItem]:
    latest = {c.command: c for c in sorted(session.checks, key=lambda c: (c.at, c.event_id))}  # each command's last
    return sorted((CheckItem(c.command, c.exit_status, c.summary, _provenance(c.provenance.value, None, c.at, session),
                             c.at) for c in latest.values()), key=lambda c: c.at, reverse=True)


def journal_of(session: Session) -> Journal:
    """The journal of one ticket. Remaining work is every item not yet recorded as a
    completed step (same text); files touched come from `baton touch`, so they are reported."""
    done = {step.text for step in session.completed_steps}
    stamp = session.next_action_stamp
    goal_stamp = session.goal_stamp
    return Journal(
        goal=Item(session.goal, f"inherited from {session.goal_inherited_from}" if session.goal_inherited_from
                  else REPORTED, goal_stamp.at if goal_stamp else None) if session.goal else None,
        next_action=Item(session.next_action, REPORTED, stamp.at if stamp else None) if session.next_action else None,
        constraints=[_item(e) for e in session.constraints],
        decisions=[_item(e) for e in session.decisions],
        completed_steps=[_item(e) for e in session.completed_steps],
        failures=[_item(e) for e in session.failures],
        remaining_work=[_item(e) for e in session.remaining_work if e.text not in done],
        checks=_latest_checks(session),
        evidence=[_item(e, session) for e in session.evidence],
        files=[Item(t.path, REPORTED, t.last_at) for t in session.files_by_recency()],
    )
