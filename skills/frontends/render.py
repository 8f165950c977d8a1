"""Text renderings of the skills' results for people and agents.

Every value that came from outside Baton (journal, decisions, paths, signals, handoffs,
store errors) is shown through baton.shown_text.one_line behind a marker of Baton's own,
so only Baton opens a section here.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from baton import clock
from baton.shown_text import escape_controls, one_line
from baton.skills.frontends.briefing import signal_line, unavailable_stores
from baton.skills.handoff.files import HANDOFFS_DIR, LATEST, NO_HANDOFF
from baton.skills.handoff.journal import journal_of
from baton.skills.handoff.verify import Verification

if TYPE_CHECKING:  # annotations only: `baton resume` need not import the listing
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from baton.recall.indexer import IndexReport
    from baton.skills.core.binding import Binding
    from baton.skills.core.interrupted import Recovery
    from baton.skills.handoff.checks import CheckResult
    from baton.skills.handoff.write import HandoffReport
    from baton.skills.installers.claude_code import InstallReport
    from baton.skills.installers.codex import CodexReport
    from baton.skills.installers.copilot import CopilotReport
    from baton.skills.installers.git_hook import GitHookReport
    from baton.skills.services.decision_age import AgedDecision
    from baton.skills.services.doctor import StoreReport
    from baton.skills.services.environment import Recorded
    from baton.skills.services.gc import GcReport
    from baton.skills.services.listing import Listing, SessionLine
    from baton.skills.services.projector import ProjectorReport
    from baton.skills.services.resume import ResumeResult
    from baton.skills.services.runs import CheckpointLine, Collected, RunLine, Started
    from baton.skills.services.secret_scan import Scan
    from baton.skills.services.stage import StageDone, WorkflowView

MAX_FILES_SHOWN = 30


def ago(moment: datetime, now: datetime) -> str:
    seconds = int((now - moment).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def resume_markdown(result: ResumeResult) -> str:
    live = live_state_lines(result.handoff, level="###") if result.handoff else []
    if result.status != "found":
        first = (f"No session history for {result.task_id}. Starting fresh." if result.status == "not_found" else
                 f"Session registry unavailable: {one_line(result.reason or '')}. Binding task_id locally only.")
        return "\n".join([first, *live, *prizmkit_lines(result.prizmkit)])
    session = result.session
    assert session is not None, "a found resume carries its session"
    journal = journal_of(session)
    lines = [f"## Resuming {session.task_id}",
             (f"**Phase:** {session.phase.value} | **Status:** {session.status.value} | "
              f"**Last activity:** {clock.shown(session.last_activity)}")]
    told = lambda item: f"{one_line(item.text)} [{item.provenance}]" if item else None  # noqa: E731
    branch = f" (branch {one_line(session.branch)})" if session.branch else ""
    # The header's other lines, each shown when its value is not None.
    labelled = {"Superseded": one_line(result.superseded["notice"]) if result.superseded is not None else None,
                "Goal": told(journal.goal),
                "Worktree": one_line(session.worktree_path) + branch if session.worktree_path else None,
                "Depends on": one_line(", ".join(session.depends_on)) if session.depends_on else None,
                "Next action": told(journal.next_action)}
    lines += [f"**{label}:** {value}" for label, value in labelled.items() if value is not None]
    lines += live
    lines += _section("Leases", [*(f"- {one_line(lease.line())}" for lease in result.leases),
                                 *(f"- **{one_line(notice)}**" for notice in result.lease_notices)])
    if result.workflow is not None:
        lines += workflow_lines(result.workflow)
    lines += prizmkit_lines(result.prizmkit)
    lines += _section("Compatibility", [f"- {c.check}: {c.status}" + (f" ({one_line(c.detail)})" if c.detail else "")
                                        for c in result.compatibility])
    if (shown := result.continuation) is not None:
        lines += _section("Native continuation", [
            f"- `{one_line(shown.command)}`, run in {one_line(shown.worktree or '')}: continues the previous "
            "conversation's transcript (not the previous model's hidden reasoning)" if shown.command
            else f"- not offered: {one_line(shown.reason or '')}"])
    for title, items in (("Remaining work", journal.remaining_work), ("Constraints", journal.constraints)):
        lines += _section(title, [f"- [{i.provenance}] {one_line(i.text)}" for i in items])
    files = session.files_by_recency()
    more = [f"- … and {len(files) - MAX_FILES_SHOWN} more (baton resume --json lists all)"] \
        if len(files) > MAX_FILES_SHOWN else []
    lines += _section("Files touched [reported]", [*(f"- {one_line(t.path)}" for t in files[:MAX_FILES_SHOWN]), *more])
    for title, items in (("Decisions made", journal.decisions), ("Completed steps", journal.completed_steps),
                         ("Failures", journal.failures)):
        lines += _section(title, [f"- [{i.provenance}] {one_line(i.text)}"
                                  + (f" ({one_line(i.context)})" if i.context else "") for i in items])
    lines += _section("Checks run", [f"- [{c.provenance}] `{one_line(c.command)}` {c.result}"
                                     + (f": {one_line(c.summary)}" if c.summary else "") + f" ({clock.shown(c.at)})"
                                     for c in journal.checks])
    lines += _section("Evidence", [f"- [{e.provenance}] {one_line(e.text)}" for e in journal.evidence])
    lines += _section("Related decisions from other tasks", [f"- {one_line(r.task_id)} ({r.score:.2f}): "
                                                             f"{one_line(r.text)}" for r in result.related_decisions])
    lines += _section("Forks (overlap expected)", [
        (f"- this ticket is a fork of {one_line(other)}" if other == session.fork_of
         else f"- {one_line(other)} is a fork of this ticket")
        + f"; both touch {one_line(', '.join(result.conflict_paths[other]))}" for other in result.forks])
    more = [f"- and {result.conflicts_more:,} more tickets share files with this one (see `baton list`)"] \
        if result.conflicts and result.conflicts_more else []
    lines += _section("Conflicts", [*(f"- Warning: {one_line(c.other_task_id)} also touching "
                                      f"{one_line(', '.join(result.conflict_paths[c.other_task_id]))}"
                                      for c in result.conflicts), *more])
    lines += _section("While you were gone", [f"- {signal_line(s)}" for s in result.signals])
    lines += _section("Unavailable", [f"- {name}: {one_line(state)}"
                                      for name, state in unavailable_stores(result.stores).items()])
    return "\n".join(lines)


def _section(title: str, rows: list[str]) -> list[str]:
    """A section of a resume: its title and rows, nothing when it has none."""
    return ["", f"### {title}", *rows] if rows else []


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
    written = f", written {clock.shown(verification.written_at)}" if verification.written_at else ""
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
                 f"last: {clock.shown(line.last_activity)} ({ago(line.last_activity, now)})"
                 + (" [stale]" if line.stale else ""),
                 f"{len(line.files_touched)} file{'s' if len(line.files_touched) != 1 else ''}"]
        if line.fork_of:
            parts.append(f"fork of {line.fork_of}")
        if line.conflicts_with:
            parts.append(highlight(_conflicts_text(line)))
        if line.handoff:
            parts.append(_handoff_held(line.handoff, highlight))
        rows.append("  " + " | ".join(parts))
        rows += [f"    lease {'exclusive' if lease['exclusive'] else 'shared'} {one_line(lease['pattern'])} "
                 f"until {lease['expires_at'][:16]}Z" for lease in line.leases]
    more = listing.more()
    return "\n".join([*rows, *([more] if more else [])])


def checkpoint_lines(task_id: str, lines: list[CheckpointLine]) -> str:
    """`baton checkpoints`: one line each, newest first."""
    rows = []
    for line in lines:
        label = f" \"{one_line(line.label)}\"" if line.label else ""
        gone = " (not in this repository" + (f"; on {line.remote})" if line.remote else ")") \
            if line.present is False else ""
        run = f" run {line.run_id[:8]}" if line.run_id else ""
        rows.append(f"  {line.id[:12]}  {line.taken_at[:19]}  {line.boundary}{run}{label}{gone}")
    return _titled(f"No checkpoints of {task_id}.", f"Checkpoints of {task_id}:", rows)


def run_tree(task_id: str, lines: list[RunLine]) -> str:
    """`baton runs`: the runs as a tree, children indented under their parent."""
    rows = []
    for line in lines:
        owner = f"{line.task_id} " if line.task_id != task_id else ""
        fork = f"fork of {line.parent_task_id}, " if line.kind == "fork" else ""
        at = f", at checkpoint {line.diverged_at[:12]}" if line.diverged_at else ""
        late = f", {line.late_writes} late writes kept as its own" if line.late_writes else ""
        rows.append(f"{'  ' * (line.depth + 1)}{owner}{line.run_id[:8]} {line.kind} ({fork}{line.state}, "
                    f"started {line.started_at[:19]}{at}{late})")
    return _titled(f"No runs recorded for {task_id}.", f"Runs of {task_id}:", rows)


def _titled(empty: str, title: str, rows: list[str]) -> str:
    """A title and its rows, or what to say when there are none."""
    return "\n".join([title, *rows]) if rows else empty


def check_lines(checks: list[CheckResult]) -> str:
    """The checks `baton update --check` ran, a line each (none: nothing)."""
    lines = []
    for check in checks:
        result = ("passed" if check.passed else "did not finish" if check.exit_status is None
                  else f"exit {check.exit_status}")
        summary = f": {one_line(check.summary)}" if check.summary else ""
        lines.append(f"check `{one_line(check.command)}`: {result}{summary}\n")
    return "".join(lines)


def stage_lines(done: StageDone) -> str:
    """`baton stage`: its notes, then the ticket's status and what comes next."""
    state = done.state
    following = (f"; next: {state.next_stage} ({one_line(state.resume_from or '')})" if state.next_stage
                 else "; workflow complete")
    blocked = f" ({one_line(state.blocker)})" if state.blocker else ""
    return "\n".join([*(f"note: {one_line(note)}" for note in done.notes),
                      f"{done.task.task_id}: {state.status}{blocked}{following}"])


def recall_lines(hits: Sequence[AgedDecision], indent: str = "") -> str:
    """`baton recall`: a decision a line, with its score and, when it is not current, why; the
    superseded decisions shown with a replacement indented under it, in its place."""
    return ("\n".join(f"{indent}- {one_line(a.hit.record.task_id)} ({a.hit.score:.2f}): {one_line(a.hit.record.text)}"
                      + "".join(f" [{one_line(mark)}]" for mark in a.marks)
                      + (f"\n{recall_lines(a.replaces, indent + '  ')}" if a.replaces else "") for a in hits)
            or "No decisions recorded.")


def binding_exports(binding: Binding) -> str:
    return f"export BATON_TASK_ID={binding.task_id}\nexport BATON_SESSION_ID={binding.session_id}"


def environment_lines(recorded: Recorded, task_id: str) -> str:
    """`baton env record`: the manifest recorded."""
    body = recorded.manifest.body
    lines = [f"Environment {recorded.manifest.id[:12]} of {task_id} ({body['os']['system']} {body['os']['machine']})"]
    lines += [f"  {name}: {one_line(answer.get('version', answer['status']))}"
              for name, answer in body["toolchains"].items()]
    lines += [f"  lockfile {one_line(path)}: {digest[:12]}" for path, digest in body["lockfiles"].items()]
    lines += [f"  service {one_line(name)}: {one_line(answer['status'])}"
              for name, answer in body.get("services", {}).items()]
    for setup in body["setup"]:
        status = "could not run" if setup["exit_status"] is None else f"exit {setup['exit_status']}"
        lines.append(f"  setup `{one_line(setup['command'])}`: {status}")
    if recorded.checkpoint:
        lines.append(f"Checkpoint {recorded.checkpoint[:12]} holds it.")
    return "\n".join(lines)


def gc_lines(report: GcReport) -> str:
    """`baton gc`: the sessions removed (or that would be), then what went with them."""
    verb = "would remove" if report.dry_run else "removed"
    lines = [f"{verb} {len(report.sessions)} ended sessions" + "".join(f"\n  {one_line(t)}" for t in report.sessions)]
    if not report.dry_run:
        lines.append(f"removed {report.decisions} decisions from recall and {report.signals} signals"
                     + (f"; the data home's files shrank by {report.reclaimed / 1e6:,.1f} MB" if report.reclaimed
                        else ""))
    return "\n".join(lines)


def collected_lines(collected: Collected, *, dry_run: bool) -> str:
    """`baton gc --checkpoints`: the checkpoints removed (or that would be)."""
    verb = "Would remove" if dry_run else "Removed"
    records = f" and {collected.records_removed} registry record(s)" if collected.records_removed else ""
    remote = f"; {len(collected.remote_removed)} on the git remote (pushed from here)" \
        if collected.remote_removed else ""
    return "\n".join([f"{verb} {len(collected.removed)} checkpoint(s){records}{remote}; {collected.kept} kept.",
                      *(f"  {checkpoint_id[:12]}" for checkpoint_id in collected.removed)])


def store_line(report: StoreReport) -> str:
    """`baton doctor`: a store, its backend and whether it answers."""
    details = report.details
    where = f"{details['backend']} {details['location']} ({details['version']}; {details['size']})" \
        if "size" in details else f"{details.get('backend', '')} {details.get('location', '')}".strip()
    return f"{report.store:16} {one_line(report.state) if report.state != 'ok' else 'ok  ' + one_line(where)}"


def agent_line(agent: str, scope: str, state: str) -> str:
    """`baton doctor`: what `baton install` wrote for an agent in a scope."""
    return f"{agent + ' (' + scope + ')':16} {one_line(state)}"


def git_hook_line(hooked: GitHookReport, *, installed: bool, strict: bool = False) -> str:
    """What `baton install git-hook` or `baton uninstall git-hook` changed."""
    if installed:
        kept = f"; the earlier hook keeps running first ({hooked.chained.name})" if hooked.chained else ""
        return f"{hooked.hook}: {hooked.action}{' (strict)' if strict else ' (advisory)'}{kept}"
    put_back = "; the earlier hook is back in place" if hooked.chained else ""
    return f"{hooked.hook}: {'removed' + put_back if hooked.action == 'removed' else 'no Baton guard installed'}"


def claude_lines(report: InstallReport, *, installed: bool) -> str:
    """What `baton install claude` or `baton uninstall claude` changed."""
    if report.events:
        hooks = f"hooks {'added for' if installed else 'removed from'} {', '.join(report.events)}"
    else:
        hooks = "hooks already there" if installed else "no Baton hooks"
    if report.rules:
        rules = f"; permission rules {'added' if installed else 'removed'}: {', '.join(report.rules)}"
    else:
        rules = "; permission rules there" if installed else ""
    return "\n".join([f"{report.settings}: {hooks}{rules}",
                      *(f"skill /{skill}: {action}" for skill, action in report.skills.items())])


def codex_lines(report: CodexReport, *, installed: bool) -> str:
    """What `baton install codex` or `baton uninstall codex` changed, a line per file."""
    done = "added" if installed else "removed"
    lines = [f"{report.config}: MCP server {report.server}",
             f"{report.hooks}: " + (f"hooks {done} for {', '.join(report.events)}" if report.events
                                    else "hooks already there" if installed else "no Baton hooks")]
    if report.trusted:
        lines.append(f"{report.trust_file}: {len(report.trusted)} hooks trusted")
    lines += [f"backup: {backup}" for backup in report.backups]
    return "\n".join(lines)


def copilot_lines(report: CopilotReport, *, installed: bool) -> str:
    """What `baton install copilot` or `baton uninstall copilot` changed, a line per file."""
    lines = [f"{report.config}: MCP server {report.server}"] if report.config else []
    lines.append(f"{report.hooks}: {report.hooks_file}" if installed or report.hooks_file != "absent"
                 else f"{report.hooks}: no Baton hooks")
    lines += [f"skill /{skill}: {action}" for skill, action in report.skills.items()]
    lines += [f"backup: {backup}" for backup in report.backups]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def handoff_lines(report: HandoffReport) -> str:
    """`baton handoff`: the files written and each live-state claim."""
    return "\n".join([(f"Wrote {report.path} and {report.latest} for {report.task_id}: "
                      f"{len(report.claims)} live-state claims, each with a signed probe."),
                      *(f"  {claim.section}: {one_line(claim.status)}" for claim in report.claims)])


def checkpoint_taken(answer: dict, task_id: str, root: Path) -> str:
    """`baton checkpoint`: the checkpoint taken (or that nothing changed), and what it left out."""
    pushed = f"; on the git remote {answer['remote']}" if answer.get("remote") else ""
    if answer["status"] == "unchanged":
        return f"Unchanged since checkpoint {answer['checkpoint']['id'][:12]} of {task_id}{pushed}"
    return "\n".join([f"Checkpoint {answer['checkpoint']['id'][:12]} of {task_id} ({root}){pushed}",
                      *(f"  not held: {one_line(skipped['path'])}: {one_line(skipped['reason'])}"
                        for skipped in answer["checkpoint"]["skipped"])])


def started_lines(started: Started, verb: str) -> str:
    """`baton restore`, `fork` or `fresh`: the run started, and its notes."""
    where = f" on branch {started.branch}" if started.branch else ""
    at = f" at checkpoint {started.diverged_at[:12]}" if started.diverged_at else ""
    return "\n".join([(f"{verb} {started.task_id}{at} into {started.worktree}{where} (run {started.run_id[:8]}, "
                      f"parent {started.parent_run_id[:8] if started.parent_run_id else 'none'})"),
                      *(f"  note: {one_line(note)}" for note in started.notes)])


def scan_lines(scan: Scan) -> str:
    """`baton redact --scan`: where each secret is (never the secret), then what was rewritten."""
    lines = []
    for finding in scan.findings:
        committed = (f" (committed: in {len(finding.commits)} commit(s), the newest {finding.commits[0][:12]};"
                     " Baton does not rewrite history: rotate the secret)") if finding.commits else ""
        lines.append(f"{finding.store}: {finding.where}: {', '.join(finding.kinds)}{committed}")
    read = ", ".join(f"{count} {what}" for what, count in scan.scanned.items())
    lines.append(f"{len(scan.findings)} secret(s) found in {read}.")
    if scan.rewritten:
        lines.append("Rewritten (in a new event): " + ", ".join(f"{n} {what}" for what, n in scan.rewritten.items())
                     + ".")
    if scan.left and not scan.dry_run:
        lines.append(f"{len(scan.left)} left as they were (a handoff document: edit it and commit).")
    return "\n".join(lines)


def waiting_line(left: int) -> str:
    """`baton deliver`: the writes still waiting for a server."""
    return ("1 write still waits" if left == 1 else f"{left} writes still wait") if left else "Nothing waits."


def indexed_line(report: IndexReport | None, waiting: int) -> str:
    """`baton index`: what was embedded, or that another indexer is at it."""
    if report is None:
        return f"Another indexer is running; {waiting} decisions wait for it."
    again = f", {report.reembedded} embedded again by the current recipe" if report.reembedded else ""
    renewed = (f", {report.renewed} of an older recipe kept their vector (the current one makes the same)"
               if report.renewed else "")
    chunked = (f", {report.chunked} longer than the model's window: read in overlapping windows"
               if report.chunked else "")
    queries = f"; {report.queries} tickets' queries embedded" if report.queries else ""
    return (f"Indexed {report.embedded} decisions ({report.already} were indexed already{again}{renewed}{chunked})"
            f"{queries}; {waiting} wait.")


def queued_line(queued: int) -> str:
    """`baton index --all`: the decisions queued that the index lacked."""
    return f"Queued {queued} decisions the index lacked."


def projected_line(report: ProjectorReport) -> str:
    return f"applied {report.events} events in {report.batches} batches"


def copied_lines(copied: dict[str, str]) -> str:
    """`baton migrate`: what each store copied, a line each (none: nothing)."""
    return "".join(f"{store}: copied {what}\n" for store, what in copied.items())
