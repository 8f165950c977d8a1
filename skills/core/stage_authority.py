"""Whether a completed stage's claim holds, re-checked against the authority it names.

- `check` (TEST_PASS): a passing check Baton ran itself after the last change to the
  worktree's files. The check's `snapshot` records the commit checked out and a digest of
  every file git called changed or untracked; later, the files that differ from that commit
  now, plus those, are compared with it by content, so committing the tested files as they
  were keeps the claim and any other edit makes it stale (no snapshot: modification times).
- `review` and `artifact` (REVIEW_PASS, RETRO_COMPLETE): a non-empty regular file inside
  the worktree.
- `commit` (COMMITTED): the commit exists and is on the branch (`git merge-base --is-ancestor`).

A git that fails or does not answer (within the command's deadline) makes the proof not
held, with the reason.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from baton import clock
from baton.errors import GitFailed
from baton.git import first_line, run_git
from baton.shown_text import clipped, one_line
from baton.skills.core.batons_own import BATONS_OWN

if TYPE_CHECKING:
    from baton.deadline import Deadline

_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Proof(NamedTuple):
    """Whether a completed stage's claim holds against its authority, and why: the reason is
    shown as it is when the claim holds, and in the stale line when it does not."""

    held: bool
    reason: str


class WorktreeSnapshot(NamedTuple):
    """What a check ran on: the commit checked out (None before the first commit) and each
    file changed or untracked then, by path, with a digest of its content (None: deleted)."""

    head: str | None
    changed: Mapping[str, str | None]

    def as_dict(self) -> dict:
        return {"head": self.head, "changed": dict(self.changed)}


class RecordedCheck(NamedTuple):
    command: str
    exit_status: int | None
    observed: bool  # Baton ran it (provenance observed), rather than an agent saying so
    recorded_at: datetime
    snapshot: WorktreeSnapshot | None = None


def stale_line(status: str, proof: Proof) -> str:
    """How a claim whose proof does not hold is shown: `TEST_PASS claimed, but ...`."""
    return f"{status} claimed, but {proof.reason}"


def snapshot(root: Path, *, deadline: Deadline | None = None) -> WorktreeSnapshot:
    """The worktree at root now, to record with a check. Raises GitFailed when git cannot say."""
    head = _resolved(root, deadline, "HEAD")
    return WorktreeSnapshot(head, {path: _digest(root, path) for path in _status_paths(root, deadline)})


def head_commit(root: Path, deadline: Deadline | None = None) -> str | None:
    """The commit checked out at root (None before the first commit or when git cannot say)."""
    try:
        return _resolved(root, deadline, "HEAD")
    except GitFailed:
        return None


def check_proof(root: Path, check: RecordedCheck, *, deadline: Deadline | None = None) -> Proof:
    """Whether check proves the worktree at root passes now."""
    command = f"`{_shown(check.command)}`"
    if not check.observed:
        return Proof(False, f"the check {command} was reported, not run by Baton")
    if check.exit_status != 0:
        outcome = "did not finish" if check.exit_status is None else f"exited {check.exit_status}"
        return Proof(False, f"the check {command} {outcome}")
    try:
        changed = (_changed_since_snapshot(root, check.snapshot, deadline) if check.snapshot is not None
                   else _changed_since_time(root, check.recorded_at, deadline))
    except GitFailed as exc:
        return Proof(False, f"cannot tell what changed since the check {command}: {exc}")
    when = _when(check.recorded_at)
    if not changed:
        return Proof(True, f"the check {command} passed at {when} and nothing changed since")
    first = _shown(changed[0])
    more = f" and {len(changed) - 1} more file{'s' if len(changed) > 2 else ''}" if len(changed) > 1 else ""
    return Proof(False, f"{first}{more} changed after the check {command} ({when})")


def artifact_proof(root: Path, path: str, what: str = "artifact") -> Proof:
    """Whether path (relative to root, or absolute inside it) is a non-empty regular file
    inside the worktree."""
    shown = _shown(path)
    try:
        base = Path(os.path.realpath(root))
        target = Path(os.path.realpath(base / path))
        if target != base and base not in target.parents:
            return Proof(False, f"the {what} {shown} is outside the worktree")
        info = target.stat()
    except FileNotFoundError:
        return Proof(False, f"the {what} {shown} does not exist")
    except (OSError, ValueError) as exc:
        return Proof(False, f"the {what} {shown} cannot be read: {_shown(str(exc))}")
    if not stat.S_ISREG(info.st_mode):
        return Proof(False, f"the {what} {shown} is not a regular file")
    if info.st_size == 0:
        return Proof(False, f"the {what} {shown} is empty")
    return Proof(True, f"the {what} {shown} exists")


def commit_proof(root: Path, commit: str, branch: str, deadline: Deadline | None = None) -> Proof:
    """Whether commit exists in the repository at root and is on branch."""
    if not _COMMIT.fullmatch(commit):
        return Proof(False, f"{_shown(commit)} is not a commit id")
    if not branch or branch.startswith("-") or one_line(branch) != branch or " " in branch:
        return Proof(False, f"{_shown(branch)} is not a branch name")
    short, shown_branch = commit[:12], _shown(branch)
    try:
        if not _resolved(root, deadline, f"{commit}^{{commit}}"):
            return Proof(False, f"commit {short} does not exist in this repository")
        if not _resolved(root, deadline, f"refs/heads/{branch}"):
            return Proof(False, f"branch {shown_branch} does not exist")
        ancestor = run_git(root, "merge-base", "--is-ancestor", commit, f"refs/heads/{branch}", deadline=deadline,
                           check=False)
    except GitFailed as exc:
        return Proof(False, f"cannot look up commit {short}: {exc}")
    if ancestor.returncode == 0:
        return Proof(True, f"commit {short} is on branch {shown_branch}")
    if ancestor.returncode == 1:
        return Proof(False, f"commit {short} is not on branch {shown_branch}")
    why = first_line(ancestor.stderr) or f"git exited {ancestor.returncode}"
    return Proof(False, f"cannot look up commit {short}: {_shown(why)}")


def _changed_since_snapshot(root: Path, recorded: WorktreeSnapshot, deadline: Deadline | None) -> list[str]:
    if recorded.head is None:
        differing = _paths(root, deadline, "ls-files", "-z")
    else:
        if not _COMMIT.fullmatch(recorded.head) or not _resolved(root, deadline, f"{recorded.head}^{{commit}}"):
            raise GitFailed(f"the commit it ran on ({_shown(recorded.head[:12])}) is gone")
        differing = _paths(root, deadline, "diff", "--name-only", "-z", "--no-renames", recorded.head, "--")
    untracked = _paths(root, deadline, "ls-files", "-z", "--others", "--exclude-standard")
    candidates = {p for p in (*differing, *untracked, *recorded.changed) if not p.startswith(BATONS_OWN)}
    return sorted(path for path in candidates
                  if path not in recorded.changed or _digest(root, path) != recorded.changed[path])


def _changed_since_time(root: Path, since: datetime, deadline: Deadline | None) -> list[str]:
    threshold = since.timestamp()
    committed = _paths(root, deadline, "log", f"--since={clock.to_text(since)}", "--name-only", "-z", "--no-renames",
                       "--format=", "HEAD") if _resolved(root, deadline, "HEAD") else []
    dirty = [p for p in _status_paths(root, deadline) if _mtime(root, p) > threshold]
    return sorted({p for p in (*committed, *dirty) if not p.startswith(BATONS_OWN)})


def _status_paths(root: Path, deadline: Deadline | None) -> list[str]:
    listed = _paths(root, deadline, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    return [entry[3:] for entry in listed if len(entry) > 3 and not entry[3:].startswith(BATONS_OWN)]


def _resolved(root: Path, deadline: Deadline | None, name: str) -> str | None:
    """The object name names, None when it names none; GitFailed when git cannot say."""
    out = run_git(root, "rev-parse", "--verify", "--quiet", name, deadline=deadline, check=False)
    return out.stdout.decode().strip() or None if out.returncode == 0 else None


def _digest(root: Path, path: str) -> str | None:
    """sha256 of a file's content (of a symlink's target name), 'directory' for a
    directory (a submodule), None when there is nothing at path."""
    full = root / path
    try:
        info = full.lstat()
        if stat.S_ISLNK(info.st_mode):
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(full))).hexdigest()
        if stat.S_ISDIR(info.st_mode):
            return "directory"
        with full.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable: {exc.errno}"


def _mtime(root: Path, path: str) -> float:
    try:
        return (root / path).lstat().st_mtime
    except OSError:
        return float("inf")  # deleted since: a change whose time is unknown


def _paths(root: Path, deadline: Deadline | None, *args: str) -> list[str]:
    """The NUL-separated paths git printed; GitFailed unless it exited 0."""
    raw = run_git(root, *args, deadline=deadline).stdout
    return [p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p]


def _when(moment: datetime) -> str:
    return moment.astimezone(clock.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _shown(text: str) -> str:
    return clipped(one_line(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")), 120)
