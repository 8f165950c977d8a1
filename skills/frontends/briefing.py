"""What the hooks tell an agent: short, factual text, the most important lines first.

Imports stay lazy: the post-tool-use hook uses this module on its 100 ms path.

Claude Code caps a hook's additionalContext at 10,000 characters and shows only a preview
of anything longer, so the session-start context is built to fit under that: sections in
order of importance, each newest first, and when something has to go it is the oldest
lines of the least important sections, with a line that says how much was left out.

Every line is clipped through baton.shown_text.one_line and put behind Baton's own `- `
marker or label: text from agents, file names and signals are data and cannot open a
section of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from baton import clock
from baton.shown_text import clipped, one_line

if TYPE_CHECKING:
    from baton.signals.model import Signal
    from baton.signals.wire import WireSignal
    from baton.skills.services.resume import ResumeResult

MAX_CONTEXT = 9_500
MAX_LINE = 300
MAX_SIGNAL_LINES = 8


# A NamedTuple, not a dataclass: the post-tool-use hook defines it, and a dataclass's
# generated methods cost a fresh process about 1 ms a class (Python 3.11).
class Section(NamedTuple):
    title: str
    lines: list[str]
    ids: Sequence[str] = ()  # the signal each line tells, when it tells one


def unavailable_stores(stores: dict[str, str]) -> dict[str, str]:
    """The stores of a resume that were asked and did not answer."""
    return {name: state for name, state in stores.items() if state.startswith("unavailable")}


def session_context(result: ResumeResult, *, handoff: str | None = None) -> tuple[str, list[str]]:
    """The resume context of a bound worktree, under MAX_CONTEXT characters, and the ids of
    the signals whose lines it kept; handoff: the worktree's current handoff, named but not
    re-verified."""
    task = result.task_id
    footer = [(f"Record as you go: `baton decide`, `baton update --done/--failed/--next/--phase`; edited files are "
               f"recorded by hooks. `baton resume {task}` prints everything.")]
    if handoff:
        footer.insert(0, f"Handoff: {handoff}. Its live-state claims were not re-verified at session start: "
                         "`baton handoff verify` re-runs their probes; act on the fresh results only.")
    title = f"## Baton: this worktree works on {task}"
    if result.status == "not_found":
        return fit([title, "No history recorded yet."], [], footer, MAX_CONTEXT)
    if result.status == "unavailable":
        return fit([title, f"The session registry is unavailable ({result.reason}); no history could be read."],
                   [], footer, MAX_CONTEXT)
    session = result.session
    assert session is not None, "a found resume carries its session"
    # The header's other lines, each shown when its value is not None.
    labelled = {"Superseded": result.superseded["notice"] if result.superseded is not None else None,
                "Next action": session.next_action or None, "Depends on": ", ".join(session.depends_on) or None}
    header = [title, (f"Phase {session.phase.value}, status {session.status.value}, "
                      f"last activity {clock.shown(session.last_activity)}."),
              *(f"{label}: {value}" for label, value in labelled.items() if value is not None)]
    newest = lambda entries: sorted(entries, key=lambda e: e.at, reverse=True)  # noqa: E731
    sections = [
        Section("Conflicts (advisory; coordinate before editing these files)",
                [f"{c.other_task_id} also touching {', '.join(result.conflict_paths[c.other_task_id])}"
                 for c in result.conflicts], [str(c.signal_id) for c in result.conflicts]),
        Section("Leases (yours; a lapsed or released one must be claimed again: `baton claim`)",
                [*result.lease_notices, *(lease.line() for lease in result.leases)]),
        Section("While you were gone, newest first", [signal_line(s) for s in reversed(result.signals)],
                [str(s.signal_id) for s in reversed(result.signals)]),
        Section("Failures, newest first (do not retry the same way without saying why)",
                [e.text for e in newest(session.failures)]),
        Section("Decisions, newest first",
                [e.text + (f" ({e.context})" if e.context else "") for e in newest(session.decisions)]),
        Section("Completed steps, newest first", [e.text for e in newest(session.completed_steps)]),
        Section("Files touched, newest first", [t.path for t in session.files_by_recency()]),
        Section("Related decisions of other tickets (hints, not facts about this one)",
                [f"{r.task_id} ({r.score:.2f}): {r.text}" for r in result.related_decisions]),
        Section("Unavailable", [f"{name}: {state}" for name, state in unavailable_stores(result.stores).items()]),
    ]
    return fit(header, sections, footer, MAX_CONTEXT)


def fit(header: list[str], sections: Sequence[Section], footer: list[str], limit: int) -> tuple[str, list[str]]:
    """Header, then sections in order while they fit, then footer; the total stays under
    limit. Also the ids of the kept lines."""
    lines = [_clip(line) for line in header]
    budget = limit - _size(lines) - _size(footer) - 120  # room for the "left out" line
    left_out = 0
    shown: list[str] = []
    for section in sections:
        if not section.lines:
            continue
        title = f"### {section.title}"
        kept: list[str] = []
        for line in section.lines:
            entry = f"- {_clip(line)}"
            if _size([title, *kept, entry]) > budget:
                break
            kept.append(entry)
        if kept:
            lines += [title, *kept]
            budget -= _size([title, *kept])
            shown += section.ids[:len(kept)]
        left_out += len(section.lines) - len(kept)
    if left_out:
        lines.append(f"({left_out} older or less important lines left out to stay under {limit} characters.)")
    return "\n".join(lines + footer), shown


def signal_line(signal: Signal | WireSignal) -> str:
    """A signal (the model or its stored form) in one line: when, then its summary (paths
    and reasons as data). Here rather than in baton.skills.frontends.render, whose imports
    (resume, handoffs, the models) the prompt hook cannot pay."""
    return f"{clock.shown(signal.emitted_at)} {one_line(signal.summary())}"


def signals_told(task_id: str, signals: Sequence[WireSignal], forks: dict[str, str]) -> str:
    """The few lines a prompt-submit hook adds: signals about task_id since the agent last
    heard; an overlap with a fork or its parent (forks: {other: "A is a fork of B"}) is told
    as expected, not as a conflict."""
    from baton.skills.services.news import overlapping_task

    shown = list(reversed(signals))[:MAX_SIGNAL_LINES]
    lines = [f"Baton: news about {task_id} since you last heard, newest first:"]
    for signal in shown:
        other = overlapping_task(task_id, signal)
        line = signal_line(signal)
        if other in forks:
            changed = ", ".join(signal.file_paths)
            line = (f"{clock.shown(signal.emitted_at)} fork of: {forks[other]}; both change {changed}, "
                    "as expected (not a conflict)")
        lines.append(f"- {_clip(line)}")
    if len(signals) > len(shown):
        lines.append(f"- and {len(signals) - len(shown)} more: `baton signals --task {task_id}`")
    return "\n".join(lines)


def conflicts_told(task_id: str, conflicts: Sequence, paths: dict[str, list[str]], forks: dict[str, str]) -> str:
    """What a post-tool-use hook says about the new overlaps an edit created (forks: those
    with a fork or its parent, told as "fork of": expected, not a conflict)."""
    lines = [f"Baton: fork of: {forks[c.other_task_id]}, and both change {', '.join(paths[c.other_task_id])}; "
             "this overlap is expected, not a conflict." if c.other_task_id in forks else
             f"Baton: {c.other_task_id} (another active ticket) is also changing {', '.join(paths[c.other_task_id])}; "
             f"{task_id} now overlaps with it. Advisory: coordinate before further edits to these files."
             for c in conflicts]
    return "\n".join(_clip(line, 1000) for line in lines)


def _clip(line: str, size: int = MAX_LINE) -> str:
    return clipped(one_line(line), size)


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)
