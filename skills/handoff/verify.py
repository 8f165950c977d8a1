"""Re-verifying a handoff: re-run each live-state probe and act only on the fresh result.

Each claim ends as one of:
- verified: the fresh result is the recorded one (an alarm: the fresh probe reproduces it);
- changed: the probe ran and its result differs; the live result wins, both are shown;
- failed: the probe exited non-zero or timed out;
- not run: refused by policy (baton.skills.handoff.probe_policy), not runnable here, out of budget, or a
  check (which had minutes when the handoff was written) cut at the probe timeout;
- stale: a live-state alarm whose probe is missing or could not run, or whose unsigned
  status line nothing vouches for: shown for context, never gating anything.

Probes run one after another, each within the probe timeout and all within the total
budget and the command's deadline, so a resume waits a bounded time however the handoff
was edited; a probe cut, or not run, for want of time says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import BadInput
from baton.registry.model import handoff_held
from baton.skills.handoff.document import (
    MATCH_EXIT,
    Claim,
    Probe,
    alarm_of,
    parse_document,
    signed_message,
)
from baton.skills.handoff.files import (
    UnreadableHandoff,
    choose_current,
    modified_at,
    read_handoff,
    shown_path,
)
from baton.skills.handoff.probe_policy import Permission, permit
from baton.skills.handoff.probe_signing import SigningKey, verifying_keys
from baton.skills.handoff.probes import (
    NOT_RUNNABLE,
    TIMED_OUT,
    ProbeRun,
    output_digest,
    run_probe,
    shown_output,
)
from baton.skills.runtime.command_words import parse_command
from baton.skills.runtime.settings import HandoffSettings

if TYPE_CHECKING:
    from baton.deadline import Deadline

VERIFIED, CHANGED, FAILED, NOT_RUN, STALE = "verified", "changed", "failed", "not_run", "stale"
STATUSES = (VERIFIED, CHANGED, FAILED, NOT_RUN, STALE)
MIN_PROBE_SECONDS = 0.05  # below this much budget left, a probe is not started


@dataclass(frozen=True, slots=True)
class ClaimResult:
    section: str
    recorded: str | None
    recorded_at: str | None
    probe: str | None
    fresh: str | None
    status: str
    reason: str | None


@dataclass
class Verification:
    path: str | None = None  # shown path of the handoff verified; None when there is none
    written_at: datetime | None = None
    task_id: str | None = None  # the ticket the document declares
    results: list[ClaimResult] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # the other handoffs: history, never probed
    note: str | None = None  # why there is no handoff, or why it could not be read

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for r in self.results if r.status == status) for status in STATUSES}

    @property
    def held(self) -> bool:
        """A handoff was verified and every claim held (see baton.registry.model.handoff_held)."""
        counts = self.counts()
        return self.path is not None and self.note is None and handoff_held(
            changed=counts[CHANGED], failed=counts[FAILED], not_run=counts[NOT_RUN])

    def to_json(self) -> dict:
        handoff = None if self.path is None else {
            "path": self.path, "written_at": self.written_at.isoformat() if self.written_at else None}
        return {"handoff": handoff, "live_state": [asdict(r) for r in self.results]}


def _result_text(exit_status: int | None, output: str, *, match: str) -> str:
    head = "did not finish" if exit_status is None else f"exit {exit_status}"
    if match == MATCH_EXIT:
        last = output.rsplit("\n", 1)[-1] if output else ""
        return f"{head}: {last}" if last else head
    if exit_status == 0:
        return output
    return f"({head}) {output}" if output else f"({head})"


def _recorded(claim: Claim) -> str | None:
    probe = claim.probe
    if probe is None or not probe.has_result:
        return claim.status
    return _result_text(probe.recorded_exit, probe.recorded, match=probe.match)


def _fresh(probe: Probe, run: ProbeRun) -> str:
    return _result_text(run.exit_status, shown_output(run.output, tail=probe.match == MATCH_EXIT), match=probe.match)


def _same(probe: Probe, run: ProbeRun, redact: Callable[[str], str]) -> bool:
    """Whether the fresh run reproduces the recorded one. What was recorded, digested and
    signed is the output as redacted, so the fresh output is redacted the same way (a
    document written before that was signed over the output as printed: both hold)."""
    expected_exit = probe.recorded_exit if probe.has_result else 0
    if run.exit_status != expected_exit:
        return False
    if probe.match == MATCH_EXIT:
        return True
    outputs = (redact(run.output), run.output)
    if probe.digest:
        return probe.digest in {output_digest(output) for output in outputs}
    if probe.has_result:
        return probe.recorded in {shown_output(output) for output in outputs}
    return probe.recorded.strip() in {output.strip() for output in outputs}


class _Verifier:
    def __init__(self, root: Path, repo: str, home: Path, settings: HandoffSettings, allow_unsigned: bool,
                 redact: Callable[[str], str], deadline: Deadline | None) -> None:
        self.root = root
        self.repo = repo
        self.settings = settings
        self.allow_unsigned = allow_unsigned
        self.redact = redact
        self.keys: tuple[SigningKey, ...] = ()
        self.key_problem: str | None = None
        try:
            self.keys = tuple(verifying_keys(home, settings.key_file))
        except BadInput as exc:  # a team key that cannot be read refuses signed probes, not the resume
            self.key_problem = str(exc)
        self.budget_ends = time.monotonic() + settings.probe_budget
        self.deadline = deadline  # the command's

    def _allowed(self) -> tuple[float, str, str]:
        """The seconds the next probe may run (its timeout, within what is left of the probe
        budget and of the command's deadline), how the limit is told when too little is left
        to start it, and what a probe it cut adds to its reason."""
        budget = f"the probe budget of {self.settings.probe_budget:g}s"
        limits = [(self.settings.probe_timeout, "the probe timeout was used up", ""),
                  (self.budget_ends - time.monotonic(), f"{budget} was used up", f" ({budget} ran out)")]
        if self.deadline is not None:
            limits.append((self.deadline.left(), f"no time left of {self.deadline}",
                           f", when {self.deadline} ran out"))
        return min(limits, key=lambda limit: limit[0])

    def judge(self, claim: Claim, task_id: str | None) -> ClaimResult:
        probe = claim.probe
        recorded = _recorded(claim)
        base = ClaimResult(claim.section, self.redact(recorded) if recorded else recorded,
                           probe.recorded_at if probe else None, probe.command if probe else None, None, NOT_RUN, None)
        if probe is None or not probe.command:
            return self._unrun(claim, base, "no probe to re-run")
        try:
            argv = tuple(parse_command(probe.command))
        except BadInput as exc:
            return self._unrun(claim, base, str(exc))
        message = signed_message(repo=self.repo, task_id=task_id, section=claim.section, status=claim.status, argv=argv,
                                 match=probe.match, recorded_at=probe.recorded_at,
                                 exit_status=probe.recorded_exit if probe.has_result else None,
                                 digest=probe.digest, recorded=probe.recorded)
        permission = permit(argv, message, probe.signature, self.keys, self.settings.allow, self.allow_unsigned)
        if not permission.run:
            reason = permission.basis + (f" ({self.key_problem})" if self.key_problem else "")
            return self._unrun(claim, base, f"refused: {reason}")
        timeout, used_up, cut = self._allowed()
        if timeout < MIN_PROBE_SECONDS:
            return self._unrun(claim, base, used_up)
        with self.deadline.waiting() if self.deadline is not None else nullcontext():
            run = run_probe(argv, self.root, timeout=timeout)
        if not run.completed:
            reason = run.reason or run.outcome
            if run.outcome != NOT_RUNNABLE:
                reason += cut
            if probe.match == MATCH_EXIT and run.outcome == TIMED_OUT:
                # A check had minutes when the handoff was written; cut at a resume's limits
                # it says nothing about the code, so it is not a failure.
                reason += (": the check takes longer than re-verification allows (BATON_PROBE_TIMEOUT, "
                           "BATON_PROBE_BUDGET, BATON_COMMAND_BUDGET); run it yourself")
                return self._unrun(claim, base, reason)
            if claim.alarm or run.outcome == NOT_RUNNABLE:
                return self._unrun(claim, base, reason)
            return replace(base, status=FAILED, reason=reason)
        result = self._compare(claim, probe, run, base, permission)
        # What a probe prints now is shown, never stored as printed: a secret in it is redacted.
        return replace(result, fresh=self.redact(result.fresh)) if result.fresh else result

    @staticmethod
    def _unrun(claim: Claim, base: ClaimResult, reason: str) -> ClaimResult:
        if claim.alarm:
            return replace(base, status=STALE, reason=f"alarm {claim.alarm} not reproduced: {reason}. Recorded for "
                           "context only; it does not gate any action")
        return replace(base, reason=reason)

    def _compare(self, claim: Claim, probe: Probe, run: ProbeRun, base: ClaimResult,
                 permission: Permission) -> ClaimResult:
        same = _same(probe, run, self.redact)
        alarm = claim.alarm
        # The alarm comes from the status line. Only a signature vouches that the status was
        # recorded with this result; unsigned, the fresh output itself must begin with the alarm.
        reproduced = bool(alarm) and ((same and permission.signed) or alarm_of(run.output) == alarm)
        notes = []
        if alarm:
            notes.append(f"alarm {alarm} is current: the fresh probe reproduces it" if reproduced
                         else f"alarm {alarm} not reproduced by the fresh probe: it is not current")
        if run.truncated:
            notes.append("output cut at the cap")
        if not permission.signed:
            notes.append(f"ran unsigned: {permission.basis}")
        if run.exit_status != 0:
            status = FAILED
            notes.insert(0, f"exit {run.exit_status}" + (", as recorded" if same else ""))
        elif reproduced:
            status = VERIFIED
        elif same and alarm:
            # The output held but nothing vouches for the alarm written beside it.
            status = STALE
            notes.append("recorded for context only; it does not gate any action")
        elif same:
            status = VERIFIED
        else:
            status = CHANGED
            notes.insert(0, "differs from the recorded result; the live result wins")
        return replace(base, fresh=_fresh(probe, run), status=status, reason="; ".join(notes) or None)


def _same_document(path: Path, chosen: Path) -> bool:
    """The chosen file itself, or a copy of it (LATEST.md and the dated handoff it copies)."""
    try:
        if path.resolve() == chosen.resolve():
            return True
        return path.stat().st_size == chosen.stat().st_size and path.read_bytes() == chosen.read_bytes()
    except OSError:
        return False


def verify_handoff_at(root: Path, repo: str, home: Path, settings: HandoffSettings, *, path: Path | None = None,
                      task_id: str | None = None, allow_unsigned: bool = False,
                      redact: Callable[[str], str] = str, deadline: Deadline | None = None) -> Verification:
    """Verify the handoff at path, else the current one of the worktree at root (for
    task_id, when given). Never raises for the document's sake: what cannot be read or run
    is reported in the result. redact: what a recorded or fresh result shows; deadline:
    the command's, which the probes draw on."""
    if path is None:
        chosen, parsed, note, found = choose_current(root, task_id)
    else:
        found = [path]
        try:
            chosen, parsed, note = path, parse_document(read_handoff(path, root)), None
        except UnreadableHandoff as exc:
            chosen, parsed, note = path, None, str(exc)
    verification = Verification(note=note)
    if chosen is not None:
        verification.path = shown_path(chosen, root)
        verification.history = [shown_path(p, root) for p in found if not _same_document(p, chosen)]
    if parsed is None or chosen is None:
        return verification
    verification.task_id = parsed.task_id
    verification.written_at = parsed.written_at or modified_at(chosen)
    verifier = _Verifier(root, repo, home, settings, allow_unsigned, redact, deadline)
    # Checks (a test suite, say) run after the probes, so slow checks never starve cheap
    # probes of the budget; results keep the document's order.
    claims = parsed.claims
    order = sorted(range(len(claims)), key=lambda i: getattr(claims[i].probe, "match", None) == MATCH_EXIT)
    results = {i: verifier.judge(claims[i], parsed.task_id) for i in order}
    verification.results = [results[i] for i in range(len(claims))]
    return verification
