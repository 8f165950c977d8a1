"""Checkpoints through the repository's git remote: push one, fetch one, prune those this
clone pushed.

A checkpoint's ref travels under its own name, refs/baton/checkpoints/<id>: never a branch
or a tag, and not brought by an ordinary `git fetch` or `git clone`. Every push and fetch
names exactly one checkpoint ref (no tags, no submodules, no hooks of the repository). The
remote is named, never given as a URL, so no credential of the repository's configuration
reaches an argument vector; where a checkpoint was pushed is recorded as the remote's
identity (baton.files.normalise_remote), which another clone matches against its remotes.

What this clone pushed and fetched is kept in the common git directory (<common-dir>/baton/),
so `baton gc --checkpoints` deletes on the remote only refs this clone created, each only
while it still names the commit pushed. A remote that refused a push is remembered there
too: automatic pushes to it stop until a push by hand succeeds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import GitFailed
from baton.files import normalise_remote, write_whole
from baton.git import first_line, run_git
from baton.skills.core.checkpoints import REF_PREFIX, git_environment

if TYPE_CHECKING:
    import subprocess

    from baton.deadline import Deadline

TRANSFER_CAP = 30.0  # seconds one push or fetch may take, within the command's deadline
PUSHED_FILE, FETCHED_FILE, REFUSED_FILE = "baton/pushed-checkpoints", "baton/fetched-checkpoints", \
    "baton/checkpoint-push-refused"
# Rejections that mean the remote holds this checkpoint id already: the id is a hash of the
# content, so a record another clone pushed under it holds the same trees.
_HELD_ALREADY = ("fetch first", "non-fast-forward", "already exists")
# No repository hook, no submodule, no tag goes with a checkpoint's push or fetch.
_QUIET = ("-c", f"core.hooksPath={os.devnull}", "-c", "push.recurseSubmodules=no", "-c", "push.followTags=false",
          "-c", "fetch.recurseSubmodules=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false")


@dataclass(frozen=True, slots=True)
class Remote:
    name: str  # as this clone's configuration names it
    location: str  # normalise_remote of its URL: what the registry records, never a credential


@dataclass(frozen=True, slots=True)
class Pushed:
    remote: Remote
    created: bool  # False: the remote held it already


@dataclass(frozen=True, slots=True)
class NotPushed:
    remote: Remote | None  # None: no remote to push to
    reason: str
    refused: bool = False  # the remote answered and refused (not: could not be reached)


@dataclass(frozen=True, slots=True)
class NotFetched:
    reason: str
    unreachable: bool  # True: no remote answered; False: the remote answered without it


def _git(repository: Path, *args: str, deadline: Deadline | None, check: bool | tuple[int, ...] = True
         ) -> subprocess.CompletedProcess[bytes]:
    # Git's credential manager asks in a window of its own unless told never to.
    env = {**git_environment(), "GCM_INTERACTIVE": "never"}
    return run_git(repository, *_QUIET, *args, cap=TRANSFER_CAP, deadline=deadline, env=env, check=check)


def remotes(repository: Path, deadline: Deadline | None = None) -> list[Remote]:
    """The remotes this clone configures, in the order its configuration lists them."""
    out = _git(repository, "config", "--get-regexp", r"^remote\..*\.url$", deadline=deadline, check=(0, 1)).stdout
    found: list[Remote] = []
    for line in out.decode("utf-8", "replace").splitlines():
        key, _, url = line.partition(" ")
        name = key.removeprefix("remote.").removesuffix(".url")
        if name and not name.startswith("-") and url.strip() and all(r.name != name for r in found):
            found.append(Remote(name, normalise_remote(url)))
    return found


def push_remote(repository: Path, name: str | None, deadline: Deadline | None = None) -> Remote | None:
    """The remote checkpoints are pushed to: the one named (`[checkpoints] remote`), else
    origin, else the only remote; None when there is none (or the named one is not there)."""
    return _chosen(remotes(repository, deadline), name)


def _chosen(listed: list[Remote], name: str | None) -> Remote | None:
    if name is not None:
        return next((r for r in listed if r.name == name), None)
    return next((r for r in listed if r.name == "origin"), listed[0] if len(listed) == 1 else None)


def _common_dir(repository: Path, deadline: Deadline | None) -> Path:
    out = _git(repository, "rev-parse", "--path-format=absolute", "--git-common-dir", deadline=deadline).stdout
    return Path(os.fsdecode(out.strip()))


def push(repository: Path, checkpoint_id: str, remote: Remote, deadline: Deadline | None = None
         ) -> Pushed | NotPushed:
    """Push refs/baton/checkpoints/<checkpoint_id> (its record, trees and base) to remote,
    and nothing else."""
    ref = REF_PREFIX + checkpoint_id
    try:
        commit = _git(repository, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", deadline=deadline,
                      check=(0, 1)).stdout.decode().strip()
        if not commit:
            return NotPushed(remote, f"checkpoint {checkpoint_id[:12]} is not in this clone")
        done = _git(repository, "push", "--porcelain", "--no-follow-tags", "--recurse-submodules=no",
                    "--end-of-options", remote.name, f"{ref}:{ref}", deadline=deadline, check=False)
    except GitFailed as exc:
        return NotPushed(remote, str(exc))
    status = _ref_status(done.stdout, ref)
    if status is not None and status[0] in "*=+ ":
        if status[0] != "=":  # this clone created it there: its gc may delete it again
            _remember(repository, PUSHED_FILE, f"{checkpoint_id} {commit} {remote.name}", deadline)
        if refused(repository, remote, deadline) is not None:  # a push by hand succeeded: pushes resume
            _drop(repository, REFUSED_FILE, {remote.name}, deadline)
        return Pushed(remote, created=status[0] != "=")
    if status is not None and status[0] == "!":
        if any(reason in status[1] for reason in _HELD_ALREADY):
            return Pushed(remote, created=False)
        _drop(repository, REFUSED_FILE, {remote.name}, deadline)  # one line per remote: the latest refusal
        _remember(repository, REFUSED_FILE, f"{remote.name} {' '.join(status[1].split())}", deadline)
        return NotPushed(remote, f"{remote.name} refused it: {status[1]}", refused=True)
    return NotPushed(remote, f"git push to {remote.name} exited {done.returncode}: "
                             f"{first_line(done.stderr) or 'no reason given'}")


def _ref_status(porcelain: bytes, ref: str) -> tuple[str, str] | None:
    """(flag, summary) of ref in `git push --porcelain`'s answer, None when it names none."""
    for line in porcelain.decode("utf-8", "replace").splitlines():
        flag, _, rest = line.partition("\t")
        refs, _, summary = rest.partition("\t")
        if len(flag) == 1 and refs.endswith(f":{ref}"):
            return flag, summary.strip()
    return None


def fetch(repository: Path, checkpoint_id: str, recorded: str | None, fallback: str | None,
          deadline: Deadline | None = None) -> Remote | NotFetched:
    """Fetch refs/baton/checkpoints/<checkpoint_id> (a full id) and what it needs: from the
    remote of this clone whose identity is `recorded` (where the registry says it was
    pushed), else from the push remote (`fallback`: `[checkpoints] remote`). The remote it
    was fetched from, else why not."""
    ref = REF_PREFIX + checkpoint_id
    try:
        listed = remotes(repository, deadline)
    except GitFailed as exc:
        return NotFetched(str(exc), unreachable=True)
    remote = next((r for r in listed if recorded and r.location == recorded), None) or _chosen(listed, fallback)
    if remote is None:
        where = f"it was pushed to {recorded}, which " if recorded else "its record names no remote, and "
        return NotFetched(f"{where}this clone has no remote to fetch it from", unreachable=False)
    try:
        done = _git(repository, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--end-of-options",
                    remote.name, f"{ref}:{ref}", deadline=deadline, check=False)
    except GitFailed as exc:
        return NotFetched(f"{remote.name}: {exc}", unreachable=True)
    if done.returncode == 0:
        _remember(repository, FETCHED_FILE, checkpoint_id, deadline)
        return remote
    complaint = first_line(done.stderr) or f"git fetch exited {done.returncode}"
    if "couldn't find remote ref" in complaint.lower():
        pushed = "" if recorded else " (no push of it is recorded)"
        return NotFetched(f"{remote.name} does not hold it{pushed}", unreachable=False)
    return NotFetched(f"{remote.name} did not answer: {complaint}", unreachable=True)


@dataclass(frozen=True, slots=True)
class Pruned:
    deleted: tuple[str, ...]  # ids whose remote ref this clone deleted
    warnings: tuple[str, ...] = ()


def pushed(repository: Path, deadline: Deadline | None = None) -> dict[str, tuple[str, str]]:
    """{id: (record commit, remote name)} of the checkpoints this clone pushed."""
    held: dict[str, tuple[str, str]] = {}
    for line in _lines(repository, PUSHED_FILE, deadline):
        parts = line.split(" ", 2)
        if len(parts) == 3:
            held[parts[0]] = (parts[1], parts[2])
    return held


def fetched(repository: Path, deadline: Deadline | None = None) -> set[str]:
    """The ids of the checkpoints this clone fetched rather than took."""
    return set(_lines(repository, FETCHED_FILE, deadline))


def prune(repository: Path, checkpoint_ids: Iterable[str], deadline: Deadline | None = None) -> Pruned:
    """Delete on their remote the refs of these checkpoints that this clone pushed, each
    only while it names the commit pushed (a lease): nothing else on the remote is touched."""
    held = pushed(repository, deadline)
    by_remote: dict[str, list[str]] = {}
    for checkpoint_id in checkpoint_ids:
        if checkpoint_id in held:
            by_remote.setdefault(held[checkpoint_id][1], []).append(checkpoint_id)
    deleted: list[str] = []
    released: list[str] = []
    warnings: list[str] = []
    for name, ids in by_remote.items():
        leases = [f"--force-with-lease={REF_PREFIX}{i}:{held[i][0]}" for i in ids]
        try:
            done = _git(repository, "push", "--porcelain", "--no-follow-tags", "--recurse-submodules=no", *leases,
                        "--end-of-options", name, *(f":{REF_PREFIX}{i}" for i in ids), deadline=deadline, check=False)
        except GitFailed as exc:
            warnings.append(f"checkpoint refs on {name} not pruned: {exc}")
            continue
        statuses = {i: _ref_status(done.stdout, REF_PREFIX + i) for i in ids}
        deleted += [i for i, status in statuses.items() if status is not None and status[0] == "-"]
        # The lease failed: the ref is gone, or names another commit now; either way it is
        # no longer one this clone created.
        released += [i for i, status in statuses.items() if status is not None and "stale info" in status[1]]
        kept = [i for i in ids if i not in deleted and i not in released]
        if kept:
            warnings.append(f"{len(kept)} checkpoint ref(s) on {name} not pruned: "
                            f"{first_line(done.stderr) or 'the remote kept them'}; the next gc tries again")
    _drop(repository, PUSHED_FILE, set(deleted) | set(released), deadline)
    return Pruned(tuple(sorted(deleted)), tuple(warnings))


def forget_fetched(repository: Path, checkpoint_ids: Iterable[str], deadline: Deadline | None = None) -> None:
    _drop(repository, FETCHED_FILE, set(checkpoint_ids), deadline)


def refused(repository: Path, remote: Remote, deadline: Deadline | None = None) -> str | None:
    """Why remote refused a checkpoint's push, when it did and no push to it has succeeded since."""
    for line in _lines(repository, REFUSED_FILE, deadline):
        name, _, reason = line.partition(" ")
        if name == remote.name:
            return reason
    return None


def _lines(repository: Path, name: str, deadline: Deadline | None) -> list[str]:
    try:
        text = (_common_dir(repository, deadline) / name).read_text(encoding="utf-8")
    except (OSError, GitFailed, UnicodeDecodeError):
        return []
    return [line for line in text.splitlines() if line.strip()]


def _remember(repository: Path, name: str, line: str, deadline: Deadline | None) -> None:
    """Append one line (one write of a few dozen bytes with O_APPEND: two clones' processes
    appending at once keep both). A failure costs only a later prune or record."""
    with suppress(OSError, GitFailed):
        path = _common_dir(repository, deadline) / name
        path.parent.mkdir(exist_ok=True)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), "wb", buffering=0) as out:
            out.write(f"{line}\n".encode())


def _drop(repository: Path, name: str, keys: set[str], deadline: Deadline | None) -> None:
    """Rewrite the file without the lines whose first word is in keys, whole or not at all."""
    if not keys:
        return
    with suppress(OSError, GitFailed, UnicodeDecodeError):
        path = _common_dir(repository, deadline) / name
        kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and line.split(" ", 1)[0] not in keys]
        write_whole(path, "".join(f"{line}\n" for line in kept))
