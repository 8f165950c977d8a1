"""Text renderings of the skills' results for people and agents.

Every value that came from outside Baton (journal, decisions, paths, signals, handoffs,
store errors) is shown through baton.shown_text.one_line behind a marker of Baton's own,
so only Baton opens a section here.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from baton.shown_text import escape_controls, one_line
from baton.skills.frontends.briefing import signal_line, unavailable_stores, when
from baton.skills.handoff.files import HANDOFFS_DIR, LATEST
from baton.skills.handoff.journal import journal_of
from baton.skills.handoff.verify import NO_HANDOFF, Verification

if TYPE_CHECKING:  # annotations only: `baton resume` need not import the listing
    from collections.abc import Callable

    from baton.skills.core.interrupted import Recovery
    from baton.skills.services.listing import Listing, SessionLine
    from baton.skills.services.resume import ResumeResult
    from baton.skills.services.runs import CheckpointLine, RunLine
    from baton.skills.services.stage import WorkflowView

MAX_FILES_SHOWN = 30


def ago(moment: datetime, now: datetime) -> str:
    seconds = int((now - moment).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def resume_markdown(result: ResumeResult) -> str:
    live = live_state_lines(result.handoff, level="###") if result.handoff else []
    if result.status == "not_found":
        return "\n".join([f"No session history for {result.task_id}. Starting fresh.", *live,
                          *prizmkit_lines(result.prizmkit)])
    if result.status == "unavailable":
        return "\n".join([(f"Session registry unavailable: {one_line(result.reason or '')}. "
                           "Binding task_id locally only."), *live, *prizmkit_lines(result.prizmkit)])
    session = result.session
    assert session is not None, "a found resume carries its session"
    journal = journal_of(session)
    lines = [f"## Resuming {session.task_id}",
             (f"**Phase:** {session.phase.value} | **Status:** {session.status.value} | "
              f"**Last activity:** {when(session.last_activity)}")]
    if journal.goal:
        lines.append(f"**Goal:** {one_line(journal.goal.text)} [{journal.goal.provenance}]")
    if session.worktree_path:
        branch = f" (branch {one_line(session.branch)})" if session.branch else ""
        lines.append(f"**Worktree:** {one_line(session.worktree_path)}{branch}")
    if session.depends_on:
        lines.append(f"**Depends on:** {one_line(', '.join(session.depends_on))}")
    if journal.next_action:
        lines.append(f"**Next action:** {one_line(journal.next_action.text)} [{journal.next_action.provenance}]")
    lines += live
    if result.workflow is not None:
        lines += workflow_lines(result.workflow)
    lines += prizmkit_lines(result.prizmkit)
    if result.compatibility:
        lines += ["", "### Compatibility"]
        lines += [f"- {c.check}: {c.status}" + (f" ({one_line(c.detail)})" if c.detail else "")
                  for c in result.compatibility]
    if result.continuation is not None:
        shown = result.continuation
        lines += ["", "### Native continuation"]
        lines.append(f"- `{one_line(shown.command)}`, run in {one_line(shown.worktree or '')}: continues the previous "
                     "conversation's transcript (not the previous model's hidden reasoning)" if shown.command
                     else f"- not offered: {one_line(shown.reason or '')}")
    for title, items in (("Remaining work", journal.remaining_work), ("Constraints", journal.constraints)):
        if items:
            lines += ["", f"### {title}"] + [f"- [{i.provenance}] {one_line(i.text)}" for i in items]
    files = session.files_by_recency()
    if files:
        lines += ["", "### Files touched [reported]"]
        lines += [f"- {one_line(t.path)}" for t in files[:MAX_FILES_SHOWN]]
        if len(files) > MAX_FILES_SHOWN:
            lines.append(f"- … and {len(files) - MAX_FILES_SHOWN} more (baton resume --json lists all)")
    for title, items in (("Decisions made", journal.decisions), ("Completed steps", journal.completed_steps),
                         ("Failures", journal.failures)):
        if items:
            lines += ["", f"### {title}"]
            lines += [f"- [{i.provenance}] {one_line(i.text)}" + (f" ({one_line(i.context)})" if i.context else "")
                      for i in items]
    if journal.checks:
        lines += ["", "### Checks run"]
        lines += [f"- [{c.provenance}] `{one_line(c.command)}` {c.result}"
                  + (f": {one_line(c.summary)}" if c.summary else "") + f" ({when(c.at)})" for c in journal.checks]
    if journal.evidence:
        lines += ["", "### Evidence"] + [f"- [{e.provenance}] {one_line(e.text)}" for e in journal.evidence]
    if result.related_decisions:
        lines += ["", "### Related decisions from other tasks"]
        lines += [f"- {one_line(r.task_id)} ({r.score:.2f}): {one_line(r.text)}" for r in result.related_decisions]
    if result.forks:
        lines += ["", "### Forks (overlap expected)"]
        lines += [(f"- this ticket is a fork of {one_line(other)}" if other == session.fork_of
                   else f"- {one_line(other)} is a fork of this ticket")
                  + f"; both touch {one_line(', '.join(result.conflict_paths[other]))}" for other in result.forks]
    if result.conflicts:
        lines += ["", "### Conflicts"]
        lines += [f"- Warning: {one_line(c.other_task_id)} also touching "
                  f"{one_line(', '.join(result.conflict_paths[c.other_task_id]))}" for c in result.conflicts]
        if result.conflicts_more:
            lines.append(f"- and {result.conflicts_more:,} more tickets share files with this one (see `baton list`)")
    if result.signals:
        lines += ["", "### While you were gone"]
        lines += [f"- {signal_line(s)}" for s in result.signals]
    down = unavailable_stores(result.stores)
    if down:
        lines += ["", "### Unavailable"]
        lines += [f"- {name}: {one_line(state)}" for name, state in down.items()]
    return "\n".join(lines)


def workflow_lines(view: WorkflowView) -> list[str]:
    """The ticket's stages: the recorded status, each completed stage's claim re-checked
    now (a stale one says why), and the stage to go on with."""
    state = view.recorded
    status = one_line(state.status or "not started")
    if state.stage_result and state.stage_result != state.status:
        status += f" (after {one_line(state.stage_result)})"
    lines = ["", "### Workflow", f"**Status:** {status} | **Repair round:** {state.repair_round}"]
    if state.blocker:
        lines.append(f"**Blocker:** {one_line(state.blocker)} [reported]")
    for proof in view.proofs:
        mark = "holds" if proof.held else "STALE"
        lines.append(f"- {proof.stage}: {mark}: {one_line(proof.reason)}")
    if view.next_stage:
        moved = " (fell back: a completed stage's proof does not hold)" if view.next_stage != state.next_stage else ""
        resume_from = one_line(view.resume_from or "")
        lines.append(f"**Next stage:** {view.next_stage}{moved} | **Resume from:** `{resume_from}`")
    else:
        lines.append("**Next stage:** none: the workflow is complete")
    lines += [f"- note: {one_line(note)}" for note in view.notes]
    return lines


def prizmkit_lines(records: Recovery | None) -> list[str]:
    """The worktree's PrizmKit records of the ticket (read only): each resumable one with the
    command it names, the others with why not, a malformed one as skipped."""
    if records is None:
        return []
    lines = ["", "### PrizmKit records (read only)"]
    for c in records.candidates:
        stage = f", status {one_line(c.stage)}" if c.stage else ""
        lines.append(f"- {one_line(c.source)}: resumable on branch {one_line(c.branch)}{stage}; "
                     f"continue: `{one_line(c.command)}`")
    lines += [f"- not resumable: {one_line(e.reason)}" for e in records.excluded]
    lines += [f"- skipped, malformed: {one_line(m.path)}: {one_line(m.reason)}" for m in records.malformed]
    return lines


SHOWN_VALUE_LINES = 12
_STATUS_WORDS = {"verified": "verified", "changed": "CHANGED", "failed": "FAILED", "not_run": "not run",
                 "stale": "stale"}


def _value(label: str, value: str | None) -> list[str]:
    """A probe's result: one line in a code span, or its lines indented under the label
    (indented, they read as the value's lines, never as a section or an item of Baton's)."""
    if value is None:
        return []
    value = escape_controls(value)
    if "\n" not in value and len(value) <= 100:
        return [f"  - {label}: `{value}`" if value else f"  - {label}: (no output)"]
    lines = value.split("\n")
    shown = lines[:SHOWN_VALUE_LINES]
    more = [f"        … {len(lines) - len(shown)} more lines (--json has them all)"] if len(lines) > len(shown) else []
    return [f"  - {label}:", *(f"        {line}" for line in shown), *more]


def live_state_lines(verification: Verification, *, level: str) -> list[str]:
    """A handoff's re-verified live state: each claim with its fresh result first."""
    if verification.path is None and verification.note == NO_HANDOFF:
        return []
    if verification.path is None or verification.note:
        where = f" {one_line(verification.path)}" if verification.path else ""
        return ["", f"{level} Live state", f"- handoff{where} not verified: {one_line(verification.note or '')}"]
    written = f", written {when(verification.written_at)}" if verification.written_at else ""
    counts = ", ".join(f"{n} {_STATUS_WORDS[status]}" for status, n in verification.counts().items() if n)
    lines = ["", f"{level} Live state (re-verified now from {one_line(verification.path)}{written})",
             (f"{counts}. " if counts else "No live-state claims. ")
             + "Act only on fresh results; a stale alarm is context and gates nothing."]
    for claim in verification.results:
        reason = f" — {one_line(claim.reason)}" if claim.reason else ""
        lines.append(f"- **{one_line(claim.section)}**: {_STATUS_WORDS[claim.status]}{reason}")
        lines += _value("now", claim.fresh)
        if claim.status != "verified" or claim.fresh is None:
            lines += _value(f"recorded {one_line(claim.recorded_at or '')}".rstrip(), claim.recorded)
    if verification.history:
        lines.append(f"- {len(verification.history)} other handoff{'s' if len(verification.history) != 1 else ''} "
                     "in this worktree: history, not probed")
    return lines


def verification_markdown(verification: Verification) -> str:
    """`baton handoff verify` in text."""
    if verification.path is None and verification.note == NO_HANDOFF:
        return f"No handoff in this worktree ({HANDOFFS_DIR}/{LATEST}, {LATEST}, {HANDOFFS_DIR}/<date>-<ticket>.md)."
    return "\n".join(live_state_lines(verification, level="##")[1:])


def _handoff_held(record: dict, highlight: Callable[[str], str]) -> str:
    """How the ticket's handoff fared when it was last re-verified (recorded, not re-run)."""
    if record["held"]:
        return "handoff held"
    failing = ", ".join(f"{record[key]} {_STATUS_WORDS[key]}" for key in ("changed", "failed", "not_run", "stale")
                        if record[key])
    return highlight(f"handoff: {failing}")


def _conflicts_text(line: SessionLine) -> str:
    """The tickets a line names, then how many more and over how many files."""
    more = line.conflicting_tickets - len(line.conflicts_with)
    files = f"{line.conflicting_files} file{'s' if line.conflicting_files != 1 else ''}"
    return (f"CONFLICTS with {', '.join(line.conflicts_with)}" + (f" and {more:,} more" if more > 0 else "")
            + f" over {files}")


def listing_text(listing: Listing, now: datetime, *, colour: bool) -> str:
    if not listing.lines:
        return "No active sessions."

    def highlight(text: str) -> str:
        return f"\033[1;31m{text}\033[0m" if colour else text

    rows = []
    for line in listing.lines:
        parts = [*([one_line(line.project)] if line.project is not None else []), line.task_id,
                 line.phase if line.status == "active" else f"{line.phase} ({line.status})",
                 f"last: {when(line.last_activity)} ({ago(line.last_activity, now)})"
                 + (" [stale]" if line.stale else ""),
                 f"{len(line.files_touched)} file{'s' if len(line.files_touched) != 1 else ''}"]
        if line.fork_of:
            parts.append(f"fork of {line.fork_of}")
        if line.conflicts_with:
            parts.append(highlight(_conflicts_text(line)))
        if line.handoff:
            parts.append(_handoff_held(line.handoff, highlight))
        rows.append("  " + " | ".join(parts))
    return "\n".join(rows)


def checkpoint_lines(task_id: str, lines: list[CheckpointLine]) -> str:
    """`baton checkpoints`: one line each, newest first."""
    if not lines:
        return f"No checkpoints of {task_id}."
    out = [f"Checkpoints of {task_id}:"]
    for line in lines:
        label = f" \"{one_line(line.label)}\"" if line.label else ""
        gone = " (not in this repository)" if line.present is False else ""
        run = f" run {line.run_id[:8]}" if line.run_id else ""
        out.append(f"  {line.id[:12]}  {line.taken_at[:19]}  {line.boundary}{run}{label}{gone}")
    return "\n".join(out)


def run_tree(task_id: str, lines: list[RunLine]) -> str:
    """`baton runs`: the runs as a tree, children indented under their parent."""
    if not lines:
        return f"No runs recorded for {task_id}."
    out = [f"Runs of {task_id}:"]
    for line in lines:
        owner = f"{line.task_id} " if line.task_id != task_id else ""
        fork = f"fork of {line.parent_task_id}, " if line.kind == "fork" else ""
        at = f", at checkpoint {line.diverged_at[:12]}" if line.diverged_at else ""
        out.append(f"{'  ' * (line.depth + 1)}{owner}{line.run_id[:8]} {line.kind} ({fork}{line.state}, "
                   f"started {line.started_at[:19]}{at})")
    return "\n".join(out)
