"""The handoff document: its Markdown format, written by `baton handoff`, read back by
re-verification.

A section (any heading) is a live-state claim when it carries a probe, in one of two forms:

    ### Bus health                       ### Branch
    status: BUS-IS-DOWN                   status: on branch feature/cart
    verify: 2026-06-28 via rpk health     ```verify recorded=2026-11-30T02:15:04+00:00 exit=0 match=output sha256=…
                                          $ git rev-parse --abbrev-ref HEAD
                                          feature/cart
                                          ```
                                          signature: hmac-sha256:…

The line form records only a status; the block form (what Baton writes) records the
command, its exit status and output, and a signature over all of it. A section whose
status starts with an alarm (BUS-IS-DOWN, LANE-UNHEALTHY, QUEUE-WEDGED: capital words
joined by hyphens) is a claim even without a probe. Every other section is history.

Agent-supplied journal text is written one item per line behind a `- [provenance]`
marker, as one line (baton.shown_text), so it can never start a status, verify, signature
or fence line.
"""

from __future__ import annotations

import json
import re
import shlex
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from baton import clock
from baton.errors import BadInput
from baton.shown_text import escape_controls, one_line
from baton.skills.handoff.journal import Item, Journal

MATCH_OUTPUT = "output"  # the claim is the probe's exit status and output
MATCH_EXIT = "exit"  # the claim is its exit status (checks, whose output varies run to run)

# Each pattern matches in time linear in the line (no two adjacent groups can match the same
# text); values are trimmed in Python. A handoff comes from the branch: its lines are input.
_ALARM = re.compile(r"^([A-Z]{2,}(?:-[A-Z]{2,})+)\b")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*)$")
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_STATUS = re.compile(r"^(?:[-*][ \t]+)?(?:\*\*)?status(?:\*\*)?:(?:\*\*)?(.*)$", re.IGNORECASE)
_VERIFY = re.compile(r"^(?:[-*][ \t]+)?verify:(.*)$", re.IGNORECASE)
_SIGNATURE = re.compile(r"^signature:(.*)$", re.IGNORECASE)
_META = re.compile(r"^(?:[-*][ \t]+)?(ticket|written):(.*)$", re.IGNORECASE)
MAX_LINE_CHARS = 16 * 1024  # a longer line is never a heading, status, verify, fence or header line


def alarm_of(status: str | None) -> str | None:
    match = _ALARM.match(status or "")
    return match.group(1) if match else None


def signed_message(*, repo: str, task_id: str | None, section: str, status: str | None,
                   argv: list[str] | tuple[str, ...], match: str, recorded_at: str | None, exit_status: int | None,
                   digest: str | None, recorded: str) -> bytes:
    """What a probe's signature covers: where it belongs (repository, ticket, section), its
    status line (an alarm is read from it), the command, and everything recorded about its result."""
    return json.dumps({"v": 1, "repo": repo, "task": task_id, "section": section, "status": status,
                       "argv": list(argv), "match": match, "recorded_at": recorded_at, "exit": exit_status,
                       "sha256": digest, "recorded": recorded},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# Writing


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class RecordedProbe(NamedTuple):
    """A live-state claim as `baton handoff` records it."""

    section: str
    status: str
    argv: tuple[str, ...]
    match: str
    recorded_at: str
    exit_status: int | None
    shown: str  # the output as shown in the document
    digest: str | None
    signature: str = ""

    def message(self, repo: str, task_id: str) -> bytes:
        return signed_message(repo=repo, task_id=task_id, section=self.section, status=one_line(self.status),
                              argv=self.argv, match=self.match,
                              recorded_at=self.recorded_at, exit_status=self.exit_status, digest=self.digest,
                              recorded=self.shown)


class Header(NamedTuple):
    task_id: str
    written_at: datetime
    session_id: str
    agent: str | None
    worktree: str
    phase: str | None


def check_section_title(title: str) -> str:
    if not title.strip() or "\n" in title or "\t" in title or escape_controls(title) != title:
        raise BadInput(f"section name {title!r} must be one non-empty line without control characters")
    if len(title) > 120:
        raise BadInput(f"section name {title[:40]!r}... is longer than 120 characters")
    if heading_title(title) != title.strip():
        raise BadInput(f"section name {title!r} ends in a space and '#', which Markdown drops from a heading")
    return title.strip()


def _fence_for(lines: list[str]) -> str:
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def render_probe(probe: RecordedProbe) -> list[str]:
    exit_text = "none" if probe.exit_status is None else str(probe.exit_status)
    info = f"verify recorded={probe.recorded_at} exit={exit_text} match={probe.match}"
    if probe.digest:
        info += f" sha256={probe.digest}"
    body = [f"$ {shlex.join(probe.argv)}", *(probe.shown.split("\n") if probe.shown else [])]
    fence = _fence_for(body)
    lines = [f"### {probe.section}", f"status: {one_line(probe.status)}", f"{fence}{info}", *body, fence]
    if probe.signature:
        lines.append(f"signature: {probe.signature}")
    return lines


def _items(title: str, items: list[Item]) -> list[str]:
    if not items:
        return []
    lines = ["", f"### {title}"]
    for item in items:
        context = f" ({one_line(item.context)})" if item.context else ""
        lines.append(f"- [{item.provenance}] {one_line(item.text)}{context}")
    return lines


def render_journal(journal: Journal) -> list[str]:
    lines: list[str] = []
    for title, items in (("Goal", [journal.goal] if journal.goal else []),
                         ("Next action", [journal.next_action] if journal.next_action else []),
                         ("Remaining work", journal.remaining_work), ("Constraints", journal.constraints),
                         ("Decisions", journal.decisions), ("Completed steps", journal.completed_steps),
                         ("Failures", journal.failures)):
        lines += _items(title, items)
    if journal.checks:
        lines += ["", "### Checks run"]
        for check in journal.checks:
            summary = f": {one_line(check.summary)}" if check.summary else ""
            lines.append(f"- [{check.provenance}] `{one_line(check.command)}` {check.result}{summary} "
                         f"({clock.to_text(check.at)[:19]}Z)")
    lines += _items("Evidence", journal.evidence)
    lines += _items("Files touched", journal.files)
    return lines


def render_document(header: Header, claims: list[RecordedProbe], journal: Journal | None, journal_note: str | None,
                    earlier: list[str]) -> str:
    task = header.task_id
    agent = f" (agent {one_line(header.agent)})" if header.agent else ""
    lines = [f"# Handoff: {task}", "",
             f"- ticket: {task}",
             f"- written: {header.written_at.isoformat(timespec='seconds')}",
             f"- session: {one_line(header.session_id)}{agent}",
             f"- worktree: {one_line(header.worktree)}"]
    if header.phase:
        lines.append(f"- phase: {header.phase}")
    lines += ["",
              "Sections with a `verify` block are live-state claims: re-run the probe and act only on its",
              f"fresh result (`baton resume {task}` and `baton handoff verify` do, within a time budget).",
              "Every other section is history: context, not authoritative for current state.",
              "", "## Live state"]
    for probe in claims:
        lines += ["", *render_probe(probe)]
    lines += ["", "## Journal"]
    if journal_note:
        lines += ["", one_line(journal_note)]
    if journal is not None:
        lines += render_journal(journal)
    if earlier:
        lines += ["", "## Earlier handoffs", "", *(f"- {path}" for path in earlier)]
    return "\n".join(lines) + "\n"


# Reading


class Probe(NamedTuple):
    """A probe as found in a document; nothing about it is trusted yet."""

    command: str
    match: str
    recorded: str  # the recorded output (block form) or the status (line form)
    recorded_at: str | None
    has_result: bool = False  # the document records an exit status (block form with exit=)
    recorded_exit: int | None = None
    digest: str | None = None
    signature: str | None = None


class Claim(NamedTuple):
    section: str
    status: str | None
    probe: Probe | None  # None: a live-state alarm without a probe

    @property
    def alarm(self) -> str | None:
        return alarm_of(self.status)


@dataclass
class ParsedHandoff:
    task_id: str | None = None
    written_at: datetime | None = None
    claims: list[Claim] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # titles of the sections without a claim


@dataclass
class _Section:
    title: str
    level: int
    status: str | None = None
    probes: list[Probe] = field(default_factory=list)
    wants_probe: bool = False  # it has a `verify` line or block, even one without a usable command
    verify_date: str | None = None  # from a bare `verify:` line, whose fenced block follows
    awaiting_block: bool = False


def heading_title(text: str) -> str:
    """A heading's title as Markdown reads it: trimmed, and a closing run of `#` dropped
    only when a space comes before it (`C#` keeps its `#`)."""
    title = text.strip()
    without = title.rstrip("#")
    if without != title and (not without or without[-1] in " \t"):
        return without.strip()
    return title


def _block_probes(info: str, body: list[str], section: _Section) -> list[Probe]:
    attributes = dict(part.split("=", 1) for part in info.split()[1:] if "=" in part)
    recorded_at = attributes.get("recorded") or section.verify_date
    match = attributes.get("match", MATCH_OUTPUT)
    if "exit" in attributes:
        # Baton's form: one command, then its recorded output.
        if not body or not body[0].startswith("$ "):
            return []
        raw_exit = attributes["exit"]
        recorded_exit = int(raw_exit) if re.fullmatch(r"-?\d+", raw_exit) else None
        return [Probe(command=body[0][2:].strip(), match=match, recorded="\n".join(body[1:]), recorded_at=recorded_at,
                      has_result=True, recorded_exit=recorded_exit, digest=attributes.get("sha256"))]
    commands = [line.strip().removeprefix("$ ").strip() for line in body]
    return [Probe(command=command, match=match, recorded=section.status or "", recorded_at=recorded_at)
            for command in commands if command and not command.startswith("#")]


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and set(stripped) == {marker[0]}


def _verify_line(rest: str) -> tuple[str | None, str | None] | None:
    """(date, command) of `verify: <date> via <command>`, (date, None) of a bare
    `verify: [<date>]` (its fenced block follows), None for any other text after `verify:`."""
    words = rest.split(None, 2)
    if len(words) >= 2 and words[0].lower() == "via":
        return None, rest.split(None, 1)[1].strip()
    if len(words) == 3 and words[1].lower() == "via":
        return words[0], words[2].strip()
    if len(words) <= 1:
        return (words[0] if words else None), None
    return None


def _read_line(line: str, section: _Section) -> None:
    """One line of a section's text, outside any fence."""
    status = _STATUS.match(line)
    verify_match = _VERIFY.match(line)
    verify = _verify_line(verify_match.group(1)) if verify_match else None
    signature = _SIGNATURE.match(line)
    if status and section.status is None:
        section.status = status.group(1).strip()
    elif verify is not None and verify[1] is not None:
        section.wants_probe = True
        section.probes.append(Probe(command=verify[1].strip("`").strip(), match=MATCH_OUTPUT,
                                    recorded=section.status or "", recorded_at=verify[0]))
    elif verify is not None:
        section.wants_probe = section.awaiting_block = True
        section.verify_date = verify[0]
    elif signature and len(signature.group(1).split()) == 1 and section.probes \
            and section.probes[-1].signature is None:
        section.probes[-1] = section.probes[-1]._replace(signature=signature.group(1).strip())


def _read_meta(line: str, parsed: ParsedHandoff) -> None:
    meta = _META.match(line)
    words = meta.group(2).split() if meta else []
    if meta is None or len(words) != 1:
        return
    key, value = meta.group(1).lower(), words[0]
    if key == "ticket" and parsed.task_id is None:
        parsed.task_id = value
    elif key == "written" and parsed.written_at is None:
        # not a time (or one out of range in UTC): the file's modification time stands in
        with suppress(ValueError, OverflowError):
            parsed.written_at = clock.parse(value)


def parse_document(text: str) -> ParsedHandoff:
    """Every claim and history section of a handoff. Never raises: what it cannot read is
    not a claim."""
    parsed = ParsedHandoff()
    sections: list[_Section] = []
    fence: tuple[str, str, list[str]] | None = None  # marker, info string and body of an open fence
    # Split on newlines only, as the writer joins: str.splitlines would also split on \f,
    # \x1c or \u2028 (escaped in what Baton records, but a hand-written file may hold them).
    for line in text.replace("\r\n", "\n").split("\n"):
        current = sections[-1] if sections else None
        if fence is not None:
            marker, info, body = fence
            if not _closes(line, marker):
                body.append(line)
                continue
            fence = None
            if current is not None and (info.split()[:1] == ["verify"] or current.awaiting_block):
                current.wants_probe, current.awaiting_block = True, False
                current.probes += _block_probes(info, body, current)
            continue
        if len(line) > MAX_LINE_CHARS:
            continue
        opening = _FENCE.match(line)
        heading = _HEADING.match(line)
        if opening:
            fence = (opening.group(1), opening.group(2).strip(), [])
        elif heading:
            sections.append(_Section(heading_title(heading.group(2)), len(heading.group(1))))
        elif current is None or (current.level == 1 and len(sections) == 1):
            _read_meta(line, parsed)  # the header: before the first section below the title
        if current is not None and not opening and not heading:
            _read_line(line, current)
    for section in sections:
        if section.probes:
            parsed.claims += [Claim(section.title, section.status, probe) for probe in section.probes]
        elif section.wants_probe or alarm_of(section.status):
            parsed.claims.append(Claim(section.title, section.status, None))
        else:
            parsed.history.append(section.title)
    return parsed
