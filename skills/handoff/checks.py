"""Running a check for the journal (`baton update --check`, `baton handoff --check`): a
command Baton runs itself, so its result is observed, not reported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import BadInput, GitFailed
from baton.registry.model import Provenance
from baton.shown_text import clipped, escape_controls
from baton.skills.core.stage_authority import snapshot
from baton.skills.core.write_report import MAX_TEXT  # a longer command cannot be recorded
from baton.skills.handoff.probes import ProbeRun, run_probe
from baton.skills.runtime.command_words import parse_command

if TYPE_CHECKING:
    from baton.deadline import Deadline

SUMMARY_CHARS = 300


@dataclass(frozen=True, slots=True)
class CheckResult:
    command: str
    exit_status: int | None  # None: it timed out or could not start
    summary: str
    provenance: Provenance
    # The worktree the check ran on (stage_authority.WorktreeSnapshot.as_dict), taken just
    # before it ran; None outside git or when git could not say.
    snapshot: dict | None = None

    @property
    def passed(self) -> bool:
        return self.exit_status == 0


def summarise(run: ProbeRun) -> str:
    """The last non-empty line of the output (test runners end with their verdict), or why
    the check did not finish."""
    lines = [line.strip() for line in escape_controls(run.output).split("\n") if line.strip()]
    last = clipped(lines[-1], SUMMARY_CHARS) if lines else ""
    if not run.completed:
        return f"{run.reason}: {last}" if last else (run.reason or run.outcome)
    return last


def parse_check(command: str) -> list[str]:
    """The argument vector of a check. BadInput, before anything runs, for a command that
    needs a shell or is too long to be recorded in the journal."""
    if len(command.strip()) > MAX_TEXT:
        raise BadInput(f"--check {command[:40]!r}... is longer than {MAX_TEXT} characters")
    return parse_command(command)


def check_timeout(timeout: float | None) -> None:
    """BadInput when a --timeout (None: the default) is out of range."""
    if timeout is not None and not 0 < timeout <= 86400:
        raise BadInput(f"--timeout is out of range: {timeout:g}")


def run_check(command: str, root: Path, *, timeout: float, deadline: Deadline | None = None
              ) -> tuple[CheckResult, ProbeRun]:
    """Run the check in the worktree root (no shell, minimal environment, capped output),
    with a snapshot of what it ran on (its git within the command's deadline, when given:
    the check itself is the user's, and runs its own timeout). BadInput for a command
    parse_check refuses."""
    argv = parse_check(command)
    ran_on = _snapshot(root, deadline)
    run = run_probe(argv, root, timeout=timeout)
    return CheckResult(command, run.exit_status if run.completed else None, summarise(run), Provenance.observed,
                       ran_on), run


def _snapshot(root: Path, deadline: Deadline | None) -> dict | None:
    if not (root / ".git").exists():
        return None  # not a worktree's root: nothing git could say
    try:
        return snapshot(root, deadline=deadline).as_dict()
    except GitFailed:
        return None
