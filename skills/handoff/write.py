"""Writing a handoff: `docs/handoffs/<date>-<ticket>.md` and `docs/handoffs/LATEST.md`.

The live state is observed now, by probes Baton runs and signs: the branch, the HEAD
commit and the dirty files (in a git worktree), each `--check` (its result also goes into
the journal as an observed check) and each `--probe NAME=CMD`. The journal is rendered
from the registry. The handoff is recorded as an event and signalled (handoff_written).
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.outcome import Found, NotFound
from baton.registry.model import CheckRecorded, HandoffWritten
from baton.signals.model import SignalType
from baton.skills.core.binding import ActiveTask, Place
from baton.skills.core.commit import read_binding_quietly, record_events
from baton.skills.core.signalling import wire_signal
from baton.skills.handoff.checks import CheckResult, check_timeout, parse_check, run_check
from baton.skills.handoff.document import (
    MATCH_EXIT,
    MATCH_OUTPUT,
    Header,
    RecordedProbe,
    check_section_title,
    render_document,
)
from baton.skills.handoff.files import (
    HANDOFFS_DIR,
    LATEST,
    dated_handoffs,
    shown_path,
    writable_handoffs_dir,
    write_atomically,
    write_new_handoff,
)
from baton.skills.handoff.journal import journal_of
from baton.skills.handoff.probe_policy import GIT_STATE_PROBES
from baton.skills.handoff.probe_signing import sign, signing_key
from baton.skills.handoff.probes import (
    ProbeRun,
    output_digest,
    run_probe,
    shown_output,
)
from baton.skills.runtime.command_words import parse_command
from baton.skills.runtime.stores import Stores

CHECK_TIMEOUT = 300.0  # seconds a check may run while a handoff is written (a test suite, say)
CHECK_SHOWN_LINES = 15
EARLIER_SHOWN = 20


@dataclass
class HandoffReport:
    task_id: str
    path: str
    latest: str
    written_at: datetime
    claims: list[RecordedProbe]
    checks: list[CheckResult]
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "task_id": self.task_id, "path": self.path, "latest": self.latest,
            "written_at": self.written_at.isoformat(),
            "live_state": [{"section": c.section, "status": c.status, "probe": shlex.join(c.argv),
                            "exit_status": c.exit_status, "recorded": c.shown, "recorded_at": c.recorded_at}
                           for c in self.claims],
            "checks": [{"command": c.command, "exit_status": c.exit_status, "summary": c.summary,
                        "provenance": c.provenance.value} for c in self.checks],
            "warnings": self.warnings,
        }


def _failed(kind: str, run: ProbeRun) -> str:
    why = f"exit {run.exit_status}" if run.completed else (run.reason or run.outcome)
    return f"{kind}-FAILED ({why})"


def _git_status(section: str, run: ProbeRun) -> str:
    if not run.completed or run.exit_status != 0:
        why = f"exit {run.exit_status}" if run.completed else run.reason
        return f"unknown: git could not say ({why})"
    if section == "Branch":
        return "detached HEAD" if run.output == "HEAD" else f"on branch {run.output}"
    if section == "HEAD commit":
        if not run.output:
            return "no commit outside docs/handoffs yet"
        sha, _, subject = run.output.partition(" ")
        return f"{sha[:12]} {subject} (the last commit outside docs/handoffs)"
    changed = [line[3:] for line in run.output.split("\n") if line]
    if not changed:
        return "clean (docs/handoffs aside)"
    shown = ", ".join(changed[:5]) + (", …" if len(changed) > 5 else "")
    return f"{len(changed)} changed file{'s' if len(changed) != 1 else ''}: {shown}"


def _recorded(section: str, status: str, argv: tuple[str, ...], match: str, run: ProbeRun,
              redact: Callable[[str], str]) -> RecordedProbe:
    """The claim as the document keeps it: what the probe printed is redacted before it is
    shown, digested or signed (a re-run redacts its output the same way to compare)."""
    exit_status = run.exit_status if run.completed else None
    output = redact(run.output)
    if match == MATCH_EXIT:
        shown, digest = shown_output(output, tail=True, lines=CHECK_SHOWN_LINES), None
    else:
        shown, digest = shown_output(output), output_digest(output)
    status, shown = redact(status), redact(shown)
    return RecordedProbe(section=section, status=status, argv=argv, match=match,
                         recorded_at=clock.now().isoformat(timespec="seconds"), exit_status=exit_status,
                         shown=shown, digest=digest)


def _parse_inputs(checks: Sequence[str], probes: Sequence[tuple[str, str]], in_git: bool,
                  redact: Callable[[str], str]) -> tuple[list, list]:
    """Every command and section name checked before anything runs or is written. A
    command is written into the document as given (its signature covers it), so one that
    holds a secret is refused: the command should read it from the environment."""
    for command in [*checks, *(text for probe in probes for text in probe)]:
        redacted = redact(command)
        if redacted != command:
            raise BadInput(f"{redacted!r} holds a secret, which the handoff would keep: let the command read it "
                           "from the environment or a file")
    parsed_checks = [(command, tuple(parse_check(command))) for command in checks]
    parsed_probes = [(check_section_title(name), tuple(parse_command(command))) for name, command in probes]
    for _, argv in parsed_checks + parsed_probes:
        if any(c in word for word in argv for c in "\r\n\x00"):
            raise BadInput(f"probe command {' '.join(argv)!r} holds a line break or NUL")
    titles = [*(GIT_STATE_PROBES if in_git else []), *(f"Check: {c}" for c, _ in parsed_checks),
              *(name for name, _ in parsed_probes)]
    duplicates = sorted({t for t in titles if titles.count(t) > 1})
    if duplicates:
        raise BadInput(f"two live-state sections would be named {duplicates[0]!r}")
    return parsed_checks, parsed_probes


def _observe(place: Place, parsed_checks: list, parsed_probes: list, timeout: float | None,
             probe_timeout: float, redact: Callable[[str], str]) -> tuple[list[RecordedProbe], list[CheckResult]]:
    """Run the checks and probes, then read git: the recorded tree is the one the checks
    left (build output included), which is what the next session finds."""
    root = place.root
    claims: list[RecordedProbe] = []
    results = []
    for command, argv in parsed_checks:
        result, run = run_check(command, root, timeout=timeout or CHECK_TIMEOUT)
        result = replace(result, summary=redact(result.summary))
        summary = f": {result.summary}" if result.summary else ""
        status = ("passed (exit 0)" if result.passed else _failed("CHECK", run)) + summary
        claims.append(_recorded(f"Check: {command}", status, argv, MATCH_EXIT, run, redact))
        results.append(result)
    for name, argv in parsed_probes:
        run = run_probe(argv, root, timeout=timeout or probe_timeout)
        first = run.output.split("\n", 1)[0][:120] if run.output else "no output"
        status = first if run.completed and run.exit_status == 0 else _failed("PROBE", run)
        claims.append(_recorded(name, status, argv, MATCH_OUTPUT, run, redact))
    git_state = []
    if place.worktree is not None:
        for section, argv in GIT_STATE_PROBES.items():
            run = run_probe(argv, root, timeout=timeout or probe_timeout)
            git_state.append(_recorded(section, _git_status(section, run), argv, MATCH_OUTPUT, run, redact))
    return git_state + claims, results


def write_handoff(stores: Stores, task: ActiveTask, place: Place, *, checks: Sequence[str] = (),
                  probes: Sequence[tuple[str, str]] = (), timeout: float | None = None,
                  at: datetime | None = None) -> HandoffReport:
    """Observe the live state, render the journal, write the handoff and LATEST.md, record
    and signal it. BadInput (before anything runs) for a command that needs a shell, a bad
    section name or an unreadable team key."""
    check_timeout(timeout)
    settings = stores.settings.handoff
    parsed_checks, parsed_probes = _parse_inputs(checks, probes, place.worktree is not None, stores.redact)
    writable_handoffs_dir(place.root)
    key = signing_key(stores.settings.home, settings.key_file)
    claims, results = _observe(place, parsed_checks, parsed_probes, timeout, settings.probe_timeout, stores.redact)
    at = at or clock.now()
    warnings: list[str] = []
    check_events = [CheckRecorded(event_id=uuid.uuid4(), at=at, command=r.command, exit_status=r.exit_status,
                                  summary=r.summary, provenance=r.provenance, snapshot=r.snapshot,
                                  task_id=task.task_id, session_id=task.session_id) for r in results]
    if check_events:
        warnings += _record(stores, check_events)
    journal, note, phase = None, None, None
    looked = stores.registry.get(task.task_id)
    if isinstance(looked, Found):
        journal, phase = journal_of(looked.value), looked.value.phase.value
    elif isinstance(looked, NotFound):
        note = f"No journal recorded for {task.task_id} yet (baton update, baton decide)."
    else:
        note = f"The session registry was unavailable ({looked.reason}): the journal is missing from this handoff."
        warnings.append(f"session registry unavailable: {looked.reason}; the handoff has no journal")
    root = place.root
    earlier = [shown_path(p, root) for p in dated_handoffs(root)[:EARLIER_SHOWN]]
    binding = read_binding_quietly(place)
    agent = binding.agent if binding is not None and binding.task_id == task.task_id else None
    header = Header(task_id=task.task_id, written_at=at, session_id=task.session_id, agent=agent,
                    worktree=str(root), phase=phase)
    # The journal is the registry's, redacted when it was written; redacting the whole
    # document too keeps out what was stored before a rule that finds it now (the signed
    # claims are redacted already, and redaction leaves redacted text as it is).
    signed = [c._replace(signature=sign(key, c.message(place.repo, task.task_id))) for c in claims]
    text = stores.redact(render_document(header, signed, journal, note, earlier))
    path = write_new_handoff(root, task.task_id, at, text)
    latest = root / HANDOFFS_DIR / LATEST
    try:
        write_atomically(writable_handoffs_dir(root) / LATEST, text)
    except BaseException:
        # All or nothing: a dated handoff that LATEST.md does not name would not be current.
        path.unlink(missing_ok=True)
        raise
    shown = shown_path(path, root)
    written = HandoffWritten(event_id=uuid.uuid4(), at=at, path=shown, claims=len(claims), task_id=task.task_id,
                             session_id=task.session_id)
    warnings += _record(stores, [written])
    try:
        stores.sink.keep_signals([wire_signal(SignalType.handoff_written, str(written.event_id), task, place.repo, at,
                                       reason=f"handoff {shown}: {len(claims)} live-state claims")])
    except StoreUnavailable as exc:
        warnings.append(str(exc))
    return HandoffReport(task.task_id, shown, shown_path(latest, root), at, claims, results, warnings)


def _record(stores: Stores, events: list) -> list[str]:
    try:
        return record_events(stores, events)
    except StoreUnavailable as exc:
        return [f"{exc}; the handoff file is written but not recorded in the registry"]

