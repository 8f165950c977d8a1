"""Interrupted work: which active sessions lost their agent, and the exact command that
continues each; and, read-only, the records of repositories that keep PrizmKit's
workflow-state protocol on disk.

A session is interrupted when it was not ended, its worktree and branch still exist, and its
agent is gone (the heartbeat's process no longer alive here, or the heartbeat, else the last
activity, older than the threshold); anything else is excluded, with the reason. Nothing here
runs a continuation, changes state or guesses from branch names. `detect` is pure logic over
the facts and a Liveness; MachineLiveness asks the kernel (a pid and its /proc start time, so
a reused pid is not the agent) and each repository's refs, read once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import stat
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from baton import clock
from baton.errors import GitFailed
from baton.files import WorktreeLocator, git_dirs
from baton.git import run_git
from baton.processes import process_alive
from baton.shown_text import one_line
from baton.skills.runtime.agents import AGENTS

if TYPE_CHECKING:
    from baton.deadline import Deadline

HEARTBEAT_MAX_AGE = timedelta(minutes=30)
MAX_RECORD_BYTES = 1 << 20
FOUND, NOT_FOUND = "INTERRUPTED_TASK_FOUND", "NO_INTERRUPTED_TASK_FOUND"
# Agents whose own resume continues a session by its id (`claude --resume ID`, Claude Code's CLI
# reference; `codex resume ID`, the Codex CLI's help).
NATIVE_RESUME = {name: agent.resume for name, agent in AGENTS.items()}
_AGENT_SESSION_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Heartbeat(NamedTuple):
    """What the hooks record of the agent: its process, its own session id, when, the
    process's start time (/proc) and the host it ran on."""

    pid: int
    at: datetime
    agent_session_id: str | None = None
    process_start: str | None = None
    host: str | None = None


class SessionFacts(NamedTuple):
    """What detect weighs of one of Baton's sessions: where it works, whether it ended, its
    stage, and what the hooks last recorded of its agent."""

    task_id: str
    worktree: str
    branch: str | None
    last_activity: datetime
    ended: bool
    stage: str | None = None  # the workflow status, else the phase
    next_stage: str | None = None
    agent: str | None = None
    heartbeat: Heartbeat | None = None


class Candidate(NamedTuple):
    """Work that can be resumed: a session whose agent is gone, or a PrizmKit record, with
    the command that resumes it."""

    task_id: str
    branch: str
    worktree: str
    last_activity: datetime
    stage: str | None
    next_stage: str | None
    agent: str  # why the agent counts as gone
    command: str
    source: str = "baton"  # or the PrizmKit record's path

    def as_dict(self) -> dict:
        return {**self._asdict(), "last_activity": self.last_activity.isoformat()}


class Excluded(NamedTuple):
    task_id: str
    worktree: str
    kind: str  # ended, worktree, branch, alive, record
    reason: str


class Malformed(NamedTuple):
    path: str
    reason: str


@dataclass
class Recovery:
    candidates: list[Candidate] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)

    def add(self, found: Candidate | Excluded | Malformed) -> None:
        lists: dict[type, list] = {Candidate: self.candidates, Excluded: self.excluded, Malformed: self.malformed}
        lists[type(found)].append(found)

    @property
    def reason(self) -> str:
        """Why nothing was found (or what was left out), in a few words."""
        if not self.excluded:
            return "nothing active"
        counts = Counter(e.kind for e in self.excluded)
        words = {"ended": "ended", "worktree": "worktree gone", "branch": "branch gone",
                 "alive": "agent alive", "record": "record not resumable"}
        parts = [f"{counts[kind]} {words[kind]}" for kind in words if counts[kind]]
        active = sum(n for kind, n in counts.items() if kind != "ended")
        if not active:
            return f"nothing active ({', '.join(parts)})"
        if counts["alive"] == active:
            return f"all agents alive ({counts['alive']} active)"
        return ", ".join(parts)

    def as_json(self) -> dict:
        return {"status": "interrupted_task_found" if self.candidates else "no_interrupted_task_found",
                "reason": None if self.candidates else self.reason,
                "candidates": [c.as_dict() for c in self.candidates],
                "excluded": [e._asdict() for e in self.excluded],
                "malformed": [m._asdict() for m in self.malformed]}

    def text(self, *, verbose: bool = False) -> str:
        """The protocol's contract: INTERRUPTED_TASK_FOUND and one block per candidate, or
        NO_INTERRUPTED_TASK_FOUND with the reason. Recorded text is shown as data (one line)."""
        lines = [FOUND] if self.candidates else [NOT_FOUND, f"reason: {self.reason}"]
        for c in self.candidates:
            stage = one_line(c.stage) if c.stage else "none recorded"
            if c.next_stage:
                stage += f" (next: {one_line(c.next_stage)})"
            lines += ["", f"ticket: {one_line(c.task_id)}", f"branch: {one_line(c.branch)}",
                      f"worktree: {one_line(c.worktree)}",
                      f"last activity: {clock.shown(c.last_activity)}",
                      f"stage: {stage}", f"agent: {one_line(c.agent)}"]
            if c.source != "baton":
                lines.append(f"record: {one_line(c.source)}")
            lines.append(f"continue: {one_line(c.command)}")
        if self.malformed:
            lines.append("")
            lines += [f"skipped malformed record {one_line(m.path)}: {one_line(m.reason)}" for m in self.malformed]
        if verbose and self.excluded:
            lines.append("")
            lines += [f"excluded {one_line(e.task_id)} ({one_line(e.worktree)}): {one_line(e.reason)}"
                      for e in self.excluded]
        return "\n".join(lines) + "\n"


class Liveness(Protocol):
    def worktree_exists(self, worktree: str) -> bool: ...

    def branch_exists(self, worktree: str, branch: str) -> bool: ...

    def agent_alive(self, heartbeat: Heartbeat) -> bool | None:
        """Whether the heartbeat's process still runs; None when it ran on another host."""


def continuation(worktree: str, task_id: str, agent: str | None = None, agent_session_id: str | None = None) -> str:
    """The command that continues the ticket in its worktree: the agent's own resume of its
    session where the agent has one and the id is well formed, else `baton resume`."""
    native = NATIVE_RESUME.get(agent or "")
    if native and agent_session_id and _AGENT_SESSION_ID.fullmatch(agent_session_id):
        return f"cd {shlex.quote(worktree)} && {shlex.join([*native, agent_session_id])}"
    return f"cd {shlex.quote(worktree)} && baton resume {shlex.quote(task_id)}"


def detect(sessions: Iterable[SessionFacts], liveness: Liveness, *, now: datetime | None = None,
           max_heartbeat_age: timedelta = HEARTBEAT_MAX_AGE) -> Recovery:
    """The interrupted sessions among sessions (newest activity first) and the excluded ones."""
    now = now or clock.now()
    found = Recovery()
    for s in sessions:
        exclusion = _exclusion(s, liveness)
        if exclusion is not None:
            found.excluded.append(Excluded(s.task_id, s.worktree, *exclusion))
            continue
        gone, why = _agent_gone(s, liveness, now, max_heartbeat_age)
        if not gone:
            found.excluded.append(Excluded(s.task_id, s.worktree, "alive", why))
            continue
        found.candidates.append(Candidate(
            s.task_id, s.branch or "", s.worktree, s.last_activity, s.stage, s.next_stage, why,
            continuation(s.worktree, s.task_id, s.agent, s.heartbeat.agent_session_id if s.heartbeat else None)))
    found.candidates.sort(key=lambda c: c.last_activity, reverse=True)
    return found


def _exclusion(s: SessionFacts, liveness: Liveness) -> tuple[str, str] | None:
    if s.ended:
        return "ended", "the session was ended"
    if not liveness.worktree_exists(s.worktree):
        return "worktree", "its worktree no longer exists"
    if not s.branch:
        return "branch", "no branch recorded (a detached HEAD): nothing to continue on"
    if not liveness.branch_exists(s.worktree, s.branch):
        return "branch", f"branch {s.branch} no longer exists"
    return None


def _agent_gone(s: SessionFacts, liveness: Liveness, now: datetime, max_age: timedelta) -> tuple[bool, str]:
    beat = s.heartbeat
    if beat is None:
        age = now - s.last_activity
        if age > max_age:
            return True, f"no heartbeat recorded; last activity {_age(age)} ago"
        return False, f"no heartbeat recorded and last activity {_age(age)} ago: its agent may still be working"
    age = now - beat.at
    alive = liveness.agent_alive(beat)
    if alive is False:
        return True, f"agent process {beat.pid} is gone (last heartbeat {_age(age)} ago)"
    running = f"process {beat.pid} still runs" if alive else f"on host {beat.host}"
    if age > max_age:
        return True, f"last heartbeat {_age(age)} ago ({running})"
    return False, f"agent alive: heartbeat {_age(age)} ago ({running})"


class MachineLiveness:
    """Liveness asked of this machine: the file system, the kernel and git. Each
    repository's branches are read once (from its refs, as git stores them) and remembered;
    git, where asked, within the command's deadline."""

    def __init__(self, deadline: Deadline | None = None) -> None:
        self._deadline = deadline
        self._locator = WorktreeLocator()
        self._common_dirs: dict[str, Path | None] = {}
        self._branches: dict[Path, frozenset[str] | None] = {}
        self._host = socket.gethostname()

    def worktree_exists(self, worktree: str) -> bool:
        return os.path.isdir(worktree)

    def branch_exists(self, worktree: str, branch: str) -> bool:
        if worktree not in self._common_dirs:
            self._common_dirs[worktree] = self._common_dir(worktree)
        common = self._common_dirs[worktree]
        if common is None:
            return False
        if common not in self._branches:
            self._branches[common] = local_branches(common, Path(worktree), self._deadline)
        known = self._branches[common]
        return known is not None and branch in known

    def agent_alive(self, heartbeat: Heartbeat) -> bool | None:
        if heartbeat.host and heartbeat.host != self._host:
            return None
        return process_alive(heartbeat.pid, heartbeat.process_start)

    def _common_dir(self, worktree: str) -> Path | None:
        """The repository's common git directory, read from the worktree root's `.git`; the
        locator's for a directory below a root."""
        if os.path.lexists(Path(worktree) / ".git"):
            dirs = git_dirs(Path(worktree))
            return dirs[1] if dirs else None
        located = self._locator.locate(Path(worktree))
        return (located.common_dir or located.root / ".git") if located else None


def local_branches(common_dir: Path, worktree: Path, deadline: Deadline | None = None) -> frozenset[str] | None:
    """The repository's local branch names, from its loose and packed refs (no process per
    repository); through `git for-each-ref` in the worktree for a ref store of another
    format (reftable). None when they cannot be read."""
    if (common_dir / "reftable").exists():
        return _branches_from_git(worktree, deadline)
    heads = common_dir / "refs" / "heads"
    names: set[str] = set()
    try:
        for directory, _, files in os.walk(heads):
            prefix = os.path.relpath(directory, heads)
            names.update(name if prefix == "." else f"{prefix}/{name}" for name in files)
        with open(common_dir / "packed-refs", encoding="utf-8", errors="surrogateescape") as packed:
            for line in packed:
                _, _, ref = line.rstrip("\n").partition(" ")
                if ref.startswith("refs/heads/") and not line.startswith(("#", "^")):
                    names.add(ref.removeprefix("refs/heads/"))
    except FileNotFoundError:
        pass  # no packed refs yet
    except OSError:
        return _branches_from_git(worktree, deadline)
    return frozenset(names)


def _branches_from_git(root: Path, deadline: Deadline | None) -> frozenset[str] | None:
    try:
        out = run_git(root, "for-each-ref", "--format=%(refname)", "refs/heads/", deadline=deadline)
    except GitFailed:
        return None
    lines = out.stdout.decode("utf-8", "surrogateescape").splitlines()
    return frozenset(line.removeprefix("refs/heads/") for line in lines if line.startswith("refs/heads/"))


# PrizmKit's records: `.prizmkit/state/{features,bugfix,refactor}/<ID>/checkout.json` and
# `.prizmkit/state/workflows/<slug>.json`. Its ids are F-001, B-001 and R-001 by family.
PRIZMKIT_FAMILIES = {"features": re.compile(r"F-\d{1,9}"), "bugfix": re.compile(r"B-\d{1,9}"),
                     "refactor": re.compile(r"R-\d{1,9}")}
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DONE = "COMMITTED"


def read_prizmkit(root: Path, branch_exists: Callable[[str], bool], *, found: Recovery | None = None) -> Recovery:
    """The PrizmKit records under root, read only: each resumable record a candidate with its
    own continuation, the others excluded with the reason, malformed ones reported and
    skipped. Added to found when given."""
    found = found or Recovery()
    state_dir = root / ".prizmkit" / "state"
    for family, pattern in PRIZMKIT_FAMILIES.items():
        for entry in _listing(state_dir / family, found, root):
            # A directory without checkout.json holds the pipeline's other state, not a checkout.
            if entry.is_dir(follow_symlinks=False) and os.path.lexists(Path(entry.path) / "checkout.json"):
                found.add(_checkout(root, Path(entry.path) / "checkout.json", family, pattern, entry.name,
                                    branch_exists))
    for entry in _listing(state_dir / "workflows", found, root):
        if entry.name.endswith(".json"):
            found.add(_workflow(root, Path(entry.path), branch_exists))
    return found


def prizmkit_records_of(root: Path, task_id: str, branch_exists: Callable[[str], bool]) -> Recovery | None:
    """The PrizmKit records under root of task_id (a checkout of that id, the workflow record
    of that slug, a malformed record kept under either), as read_prizmkit judges them; None
    when there is none."""
    if not (root / ".prizmkit" / "state").is_dir():
        return None
    found = read_prizmkit(root, branch_exists)
    own = Recovery([c for c in found.candidates if c.task_id == task_id],
                   [e for e in found.excluded if e.task_id == task_id],
                   [m for m in found.malformed if _kept_under(m.path, task_id)])
    return own if own.candidates or own.excluded or own.malformed else None


def _kept_under(path: str, task_id: str) -> bool:
    """Whether a record's path is kept under task_id (its directory, or its slug)."""
    parts = Path(path).parts
    return task_id in parts[:-1] or parts[-1:] == (f"{task_id}.json",)


def _listing(directory: Path, found: Recovery, root: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        found.malformed.append(Malformed(_relative(directory, root), f"cannot list: {exc.strerror or exc}"))
        return []


def _checkout(root: Path, path: Path, family: str, pattern: re.Pattern, directory: str,
              branch_exists: Callable[[str], bool]) -> Candidate | Excluded | Malformed:
    where, record = _record(root, path)
    if isinstance(record, Malformed):
        return record
    keys = ("state", "task_id", "active_dev_branch")
    fields = {key: value for key in keys if isinstance(value := record.get(key), str) and value}
    missing = [key for key in keys if key not in fields]
    if missing:
        return Malformed(where, f"{', '.join(missing)} missing or not text")
    task_id, branch = fields["task_id"], fields["active_dev_branch"]
    if fields["state"] != "active":
        reason = f"state is {fields['state']}, not active"
    elif not pattern.fullmatch(task_id):
        reason = f"task id {task_id} is not of the {family} family ({pattern.pattern})"
    elif task_id != directory:
        reason = f"task id {task_id} is recorded under {directory}"
    elif not branch_exists(branch):
        reason = f"branch {branch} no longer exists"
    else:
        own = next((value for key in ("resume_command", "resume_from")
                    if isinstance(value := record.get(key), str) and value.strip()), None)
        return Candidate(
            task_id, branch, str(root), _modified(path), record.get("stage") if isinstance(record.get("stage"), str)
            else None, None, "not tracked by Baton (a PrizmKit checkout record)",
            own or continuation(str(root), task_id), where)
    return Excluded(task_id, str(root), "record", f"{where}: {reason}")


def _workflow(root: Path, path: Path, branch_exists: Callable[[str], bool]) -> Candidate | Excluded | Malformed:
    where, record = _record(root, path)
    if isinstance(record, Malformed):
        return record
    slug = path.name.removesuffix(".json")
    if not _SLUG.fullmatch(slug):
        return Malformed(where, "the file name is not a requirement slug")
    if record.get("schema_version") != 1:
        return Malformed(where, f"schema_version is {record.get('schema_version')!r}, not 1")
    status, stage, resume_from = record.get("status"), record.get("stage"), record.get("resume_from")
    if not isinstance(status, str) or not all(v is None or isinstance(v, str) for v in (stage, resume_from)):
        return Malformed(where, "status, stage or resume_from is not text")
    artifact_dir = record.get("artifact_dir")
    branch = record.get("active_dev_branch") or record.get("branch")
    if status == _DONE or not resume_from:
        reason = f"status is {status}: nothing to resume"
    elif isinstance(artifact_dir, str) and os.path.basename(artifact_dir.rstrip("/")) != slug:
        reason = f"it belongs to another artifact ({artifact_dir})"
    elif branch is not None and (not isinstance(branch, str) or not branch_exists(branch)):
        reason = f"branch {branch} no longer exists"
    else:
        next_stage = record.get("next_stage") if isinstance(record.get("next_stage"), str) else None
        return Candidate(slug, branch or "", str(root), _modified(path), status, next_stage,
                         "not tracked by Baton (a PrizmKit workflow record)", resume_from, where)
    return Excluded(slug, str(root), "record", f"{where}: {reason}")


def _record(root: Path, path: Path) -> tuple[str, dict | Malformed]:
    """The record's path relative to root, and the JSON object it holds, else why not."""
    where = _relative(path, root)
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return where, Malformed(where, "not a regular file")
        if info.st_size > MAX_RECORD_BYTES:
            return where, Malformed(where, f"larger than {MAX_RECORD_BYTES} bytes")
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return where, Malformed(where, f"not readable JSON: {exc}")
    return where, record if isinstance(record, dict) else Malformed(where, "not a JSON object")


def _modified(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, clock.UTC)
    except OSError:  # removed since it was read
        return datetime.fromtimestamp(0, clock.UTC)


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root))  # every record's path is built under root


def _age(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    for below, unit, name in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
        if seconds < below:
            return f"{seconds // unit} {name}"
    return f"{seconds // 86400} d"
