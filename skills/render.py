"""Text renderings of the skills' results for people and agents."""

from __future__ import annotations

from datetime import datetime

from baton.clock import UTC
from skills.listing import Listing
from skills.resume import ResumeResult

MAX_FILES_SHOWN = 30


def when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def ago(moment: datetime, now: datetime) -> str:
    seconds = int((now - moment).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def resume_markdown(result: ResumeResult) -> str:
    if result.status == "not_found":
        return f"No session history for {result.task_id}. Starting fresh."
    if result.status == "unavailable":
        return f"Session registry unavailable: {result.reason}. Binding task_id locally only."
    session = result.session
    lines = [f"## Resuming {session.task_id}",
             f"**Phase:** {session.phase.value} | **Status:** {session.status.value} | "
             f"**Last activity:** {when(session.last_activity)}"]
    if session.worktree_path:
        branch = f" (branch {session.branch})" if session.branch else ""
        lines.append(f"**Worktree:** {session.worktree_path}{branch}")
    if session.depends_on:
        lines.append(f"**Depends on:** {', '.join(session.depends_on)}")
    if session.next_action:
        lines.append(f"**Next action:** {session.next_action}")
    files = session.files_by_recency()
    if files:
        lines += ["", "### Files touched"]
        lines += [f"- {t.path}" for t in files[:MAX_FILES_SHOWN]]
        if len(files) > MAX_FILES_SHOWN:
            lines.append(f"- … and {len(files) - MAX_FILES_SHOWN} more (baton resume --json lists all)")
    if session.decisions:
        lines += ["", "### Decisions made"]
        lines += [f"- {d.text}" + (f" ({d.context})" if d.context else "") for d in session.decisions]
    if session.completed_steps:
        lines += ["", "### Completed steps"] + [f"- {s.text}" for s in session.completed_steps]
    if session.failures:
        lines += ["", "### Failures"] + [f"- {f.text}" for f in session.failures]
    if result.related_decisions:
        lines += ["", "### Related decisions from other tasks"]
        lines += [f"- {r.task_id} ({r.score:.2f}): {r.text}" for r in result.related_decisions]
    if result.conflicts:
        lines += ["", "### Conflicts"]
        lines += [f"- Warning: {c.other_task_id} also touching {', '.join(result.conflict_paths[c.other_task_id])}"
                  for c in result.conflicts]
    if result.signals:
        lines += ["", "### While you were gone"]
        lines += [f"- {when(s.emitted_at)} {s.summary()}" for s in result.signals]
    down = {name: state for name, state in result.stores.items() if state != "ok"}
    if down:
        lines += ["", "### Unavailable"]
        lines += [f"- {name}: {state}" for name, state in down.items()]
    return "\n".join(lines)


def listing_text(listing: Listing, now: datetime, *, colour: bool) -> str:
    if not listing.lines:
        return "No active sessions."

    def highlight(text: str) -> str:
        return f"\033[1;31m{text}\033[0m" if colour else text

    rows = []
    for line in listing.lines:
        parts = [line.task_id, line.phase if line.status == "active" else f"{line.phase} ({line.status})",
                 f"last: {when(line.last_activity)} ({ago(line.last_activity, now)})" + (" [stale]" if line.stale else ""),
                 f"{len(line.files_touched)} file{'s' if len(line.files_touched) != 1 else ''}"]
        if line.conflicts_with:
            parts.append(highlight(f"CONFLICTS with {', '.join(line.conflicts_with)}"))
        rows.append("  " + " | ".join(parts))
    return "\n".join(rows)
