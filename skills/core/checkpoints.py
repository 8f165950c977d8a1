"""Checkpoints of a git worktree, kept in the repository's own object database.

A checkpoint pins what a restore needs to bring a worktree back exactly: the base commit
(HEAD, none on an unborn branch), the staged tree (the index as a tree), the worktree tree
(tracked files as on disk, deletions, untracked files not ignored, executable bits,
symlinks, submodule commits) and optionally artifacts (ignored files matched by globs), all
byte for byte (no filters). Both trees are built in a temporary copy of the index
(GIT_INDEX_FILE) with plumbing that never moves the worktree, the index, the stash or a branch.

    refs/baton/checkpoints/<id>  ->  commit (parent: the base commit, so `git gc` keeps it
                                     alive; message: the trees)
                                     tree: checkpoint.json (the metadata), staged/, worktree/,
                                           artifacts/ and environment.json (when any)

The id is a SHA-256 over what the checkpoint holds, never over when or why it was taken:
the same state taken twice is one checkpoint, with the first one's metadata. "Unchanged
since the last checkpoint" is answered from one `git status` and an lstat of each changed
file, against a fingerprint in <git-dir>/baton/last-checkpoint.json, so an idle Stop hook
hashes nothing. A merge, rebase, cherry-pick, revert or `git am` in progress is refused: its
state lives outside the three trees, and a restore would silently drop the operation.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from baton import clock
from baton.errors import BadInput, GitFailed, StoreUnavailable
from baton.files import git_dirs, write_whole
from baton.git import run_git, subcommand
from baton.outcome import Found, NotFound, Unavailable

if TYPE_CHECKING:
    from baton.deadline import Deadline

REF_PREFIX = "refs/baton/checkpoints/"
FORMAT = 1
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024  # an untracked file or artifact over this is skipped
# The cap of one take, restore, read or gc, all its git commands together, within the command's deadline.
OPERATION_CAP = 30.0
STATE_FILE = "baton/last-checkpoint.json"  # under the worktree's git dir
# Files in the worktree's git dir that say an operation is in progress, and its name.
IN_PROGRESS = (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase or `git am`"),
               ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert"),
               ("sequencer", "a cherry-pick or revert"))
_HEX = frozenset("0123456789abcdef")
_IDENTITY = {"GIT_AUTHOR_NAME": "Baton", "GIT_AUTHOR_EMAIL": "baton@localhost",
             "GIT_COMMITTER_NAME": "Baton", "GIT_COMMITTER_EMAIL": "baton@localhost"}
# Variables that would point git at another repository, index or worktree than the one asked.
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX", "GIT_NAMESPACE",
             "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES")
_NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")  # a restore's checkout runs none of the repository's hooks


def git_environment() -> dict[str, str]:
    """This process's environment for Baton's own git commands: nothing that points git at
    another repository, no prompt (a command waits for no one), messages in C."""
    env = {name: value for name, value in os.environ.items() if name not in _LOCATING}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    return env


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Skipped(NamedTuple):
    """A file the checkpoint does not hold, and why (its staged version stands in for a
    tracked file)."""

    path: str
    reason: str


class Submodule(NamedTuple):
    """A submodule as recorded: its checked-out commit, never its contents."""

    path: str
    commit: str


class Checkpoint(NamedTuple):
    id: str
    commit: str  # the record commit refs/baton/checkpoints/<id> points at
    base: str | None  # None: taken on an unborn branch
    staged_tree: str
    worktree_tree: str
    artifacts_tree: str | None  # None: no artifacts asked for or none found
    environment: str | None  # the environment manifest's id
    boundary: str  # what took it: "stop", "bind", "handoff", "manual", ...
    label: str | None
    taken_at: datetime
    run_id: str | None
    worktree: str  # the worktree root it was taken from
    branch: str | None  # None: detached HEAD
    skipped: tuple[Skipped, ...] = ()
    submodules: tuple[Submodule, ...] = ()

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.id


@dataclass(frozen=True, slots=True)
class Taken:
    checkpoint: Checkpoint
    created: bool  # False: this state already was a checkpoint, returned as it was
    dirty: tuple[str, ...] = field(default=(), compare=False)  # every path git status named (_Status.dirty)


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing changed since the worktree's last checkpoint, which still exists."""

    checkpoint_id: str
    dirty: tuple[str, ...] = field(default=(), compare=False)  # every path git status named (_Status.dirty)


class Refused(NamedTuple):
    """No checkpoint taken, nothing written, and why."""

    reason: str


class Restored(NamedTuple):
    path: Path
    checkpoint: Checkpoint
    skipped: tuple[Skipped, ...] = ()  # artifacts not written because a file was in the way
    notes: tuple[str, ...] = ()


class _Git:
    """git commands in one directory, all within the operation's cap (`timeout`, for all
    its commands together) and the command's deadline."""

    def __init__(self, cwd: Path, timeout: float, deadline: Deadline | None = None) -> None:
        self.cwd = cwd
        self.timeout = timeout
        self.ends = time.monotonic() + timeout
        self.deadline = deadline
        self.env = git_environment()

    def left(self) -> float:  # of the operation's cap
        return self.ends - time.monotonic()

    def run(self, *args: str, input: bytes | None = None, index: Path | None = None, cwd: Path | None = None,
            extra_env: dict[str, str] | None = None, ok: Sequence[int] = (0,)) -> bytes:
        env = self.env if index is None and extra_env is None else {
            **self.env, **({"GIT_INDEX_FILE": str(index)} if index else {}), **(extra_env or {})}
        left = self.left()
        if left <= 0:
            raise GitFailed(f"git {subcommand(args)}: no time left of the checkpoint's {self.timeout:g} s")
        return run_git(cwd or self.cwd, "-c", "core.splitIndex=false", *args, cap=left, deadline=self.deadline,
                       input=input, env=env, check=tuple(ok)).stdout

    def commit_of(self, name: str) -> str:
        """The commit a ref or object name names, "" when there is none (a full object name
        alone would verify without the object)."""
        return self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", ok=(0, 1, 128)).decode().strip()


class _Place(NamedTuple):
    root: Path
    git_dir: Path
    common_dir: Path


def _git_files(root: Path) -> _Place | None:
    """The place of a worktree whose root is `root`, read from its `.git` (a directory, or a
    linked worktree's `gitdir:` file) as git itself reads it, saving a `git rev-parse` on
    the Stop hook's path; None when root is not a worktree's root or its `.git` is unusual."""
    dirs = git_dirs(root)
    if dirs is None:
        return None
    git_dir, common = (Path(os.path.realpath(path)) for path in dirs)
    try:
        if not (git_dir / "HEAD").is_file():
            return None
        if "worktree" in (common / "config").read_text(encoding="utf-8", errors="replace"):
            return None  # core.worktree may move the root: git says where it is
    except (OSError, ValueError):
        return None
    return _Place(Path(os.path.realpath(root)), git_dir, common)


def _locate(git: _Git) -> _Place:
    found = _git_files(git.cwd)
    if found is not None:
        return found
    try:
        out = git.run("rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
    except GitFailed as exc:
        raise BadInput(f"{git.cwd} is not inside a git worktree ({exc})") from None
    lines = os.fsdecode(out).splitlines()
    if len(lines) != 3:
        raise BadInput(f"{git.cwd} is not inside a git worktree")
    return _Place(Path(lines[0]), Path(lines[1]), Path(lines[2]))


def _in_progress(git_dir: Path) -> str | None:
    return next((operation for name, operation in IN_PROGRESS if (git_dir / name).exists()), None)


@dataclass(slots=True)
class _Status:
    base: str | None = None
    branch: str | None = None
    # (path, how): "D" deleted, "W" to read from disk, "S" a submodule at another commit
    changed: list[tuple[str, str]] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    unmerged: list[str] = field(default_factory=list)
    # Every path that differs from HEAD on either side, is unmerged or untracked: what the
    # Stop hook records as the turn's changed files, so it runs no second `git status`.
    dirty: list[str] = field(default_factory=list)


def _status(git: _Git, index: Path) -> tuple[_Status, bytes]:
    # --no-ahead-behind: the branch header would otherwise count the commits between the
    # branch and its upstream, a walk of history that can cost more than the status itself.
    raw = git.run("status", "--porcelain=v2", "-z", "--branch", "--no-ahead-behind", "--untracked-files=all",
                  "--no-renames", "--ignore-submodules=dirty", index=index)
    status = _Status()
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid "):].decode()
            status.base = None if oid == "(initial)" else oid
        elif record.startswith(b"# branch.head "):
            head = os.fsdecode(record[len(b"# branch.head "):])
            status.branch = None if head == "(detached)" else head
        elif record.startswith(b"1 "):
            parts = record.split(b" ", 8)
            worktree_side, submodule, path = parts[1][1:2], parts[2], os.fsdecode(parts[8])
            status.dirty.append(path)
            if worktree_side == b"D":
                status.changed.append((path, "D"))
            elif worktree_side != b".":
                status.changed.append((path, "S" if submodule.startswith(b"S") else "W"))
        elif record.startswith(b"2 "):  # a rename (not asked for): its original path follows
            i += 1
        elif record.startswith(b"u "):
            status.unmerged.append(os.fsdecode(record.split(b" ", 10)[10]))
            status.dirty.append(status.unmerged[-1])
        elif record.startswith(b"? "):
            status.untracked.append(os.fsdecode(record[2:]))
            status.dirty.append(status.untracked[-1])
    return status, raw


class _Hasher:
    """Collects files to store as blobs, then writes them all with one `git hash-object`.

    hash-object reads its paths one a line and follows symlinks, so a symlink's target text
    goes through a scratch file, and a path with a line break through a scratch symlink."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.sources: list[str] = []

    def add_file(self, path: Path) -> int:
        source = os.fsdecode(path)
        if "\n" in source or source.endswith("\r"):
            alias = self.scratch / f"alias-{len(self.sources)}"
            os.symlink(path, alias)
            source = str(alias)
        self.sources.append(source)
        return len(self.sources) - 1

    def add_bytes(self, data: bytes) -> int:
        holder = self.scratch / f"data-{len(self.sources)}"
        holder.write_bytes(data)
        self.sources.append(str(holder))
        return len(self.sources) - 1

    def write(self, git: _Git) -> list[str]:
        if not self.sources:
            return []
        out = git.run("hash-object", "-w", "--no-filters", "--stdin-paths", input="\n".join(self.sources).encode(
            "utf-8", "surrogateescape") + b"\n").decode().split()
        if len(out) != len(self.sources):
            raise GitFailed("git hash-object answered for fewer files than asked")
        return out


@dataclass(slots=True)
class _Plan:
    """What the worktree tree changes relative to the staged tree, and its fingerprint."""

    removals: list[str] = field(default_factory=list)
    entries: list[tuple[str, str, int | str]] = field(default_factory=list)  # (path, mode, blob slot or gitlink oid)
    artifacts: list[tuple[str, str, int]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    submodules: list[Submodule] = field(default_factory=list)
    stats: list = field(default_factory=list)


def _read_file(plan: _Plan, hasher: _Hasher, root: Path, path: str, *, cap: int | None,
               into: list) -> None:
    """Plan to store the file at path as it is on disk, or say why it is skipped."""
    full = root / path
    try:
        st: os.stat_result | None = os.lstat(full)
    except OSError:
        st = None
    plan.stats.append([path, [st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] if st else []])
    if st is None:
        plan.skipped.append(Skipped(path, "vanished while the checkpoint was taken"))
    elif stat.S_ISLNK(st.st_mode):
        into.append((path, "120000", hasher.add_bytes(os.readlink(os.fsencode(full)))))
    elif stat.S_ISDIR(st.st_mode):
        plan.skipped.append(Skipped(path, "a nested git repository: not recorded"))
    elif not stat.S_ISREG(st.st_mode):
        plan.skipped.append(Skipped(path, "not a regular file or symlink"))
    elif cap is not None and st.st_size > cap:
        plan.skipped.append(Skipped(path, f"{st.st_size} bytes, over the {cap}-byte cap"))
    else:
        try:
            with open(full, "rb"):
                pass
        except OSError as exc:
            plan.skipped.append(Skipped(path, f"unreadable: {exc.strerror or exc}"))
            return
        into.append((path, "100755" if st.st_mode & stat.S_IXUSR else "100644", hasher.add_file(full)))


def _plan(git: _Git, place: _Place, status: _Status, hasher: _Hasher, artifact_paths: list[str],
          cap: int) -> _Plan:
    plan = _Plan()
    for path, kind in status.changed:
        if kind == "D":
            plan.removals.append(path)
            plan.stats.append([path, []])
        elif kind == "S":
            commit = git.run("rev-parse", "-q", "--verify", "HEAD", cwd=place.root / path, ok=(0, 1)).decode().strip()
            plan.stats.append([path, commit])
            if commit:
                plan.entries.append((path, "160000", commit))
                plan.submodules.append(Submodule(path, commit))
            else:
                plan.skipped.append(Skipped(path, "a submodule without a checked-out commit"))
        else:
            _read_file(plan, hasher, place.root, path, cap=None, into=plan.entries)
    for path in status.untracked:
        _read_file(plan, hasher, place.root, path.rstrip("/"), cap=cap, into=plan.entries)
    for path in artifact_paths:
        _read_file(plan, hasher, place.root, path, cap=cap, into=plan.artifacts)
    return plan


def _index_info(entries: Iterable[tuple[str, str, str]], removals: Iterable[str], null: str) -> bytes:
    lines = [b"0 %s\t%s\0" % (null.encode(), os.fsencode(path)) for path in removals]
    lines += [b"%s %s\t%s\0" % (mode.encode(), oid.encode(), os.fsencode(path)) for path, mode, oid in entries]
    return b"".join(lines)


def _artifact_paths(git: _Git, patterns: Sequence[str]) -> list[str]:
    if not patterns:
        return []
    for pattern in patterns:
        if not pattern or "\0" in pattern:
            raise BadInput(f"artifact pattern {pattern!r} is empty or holds a NUL")
    out = git.run("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--",
                  *(f":(glob){pattern}" for pattern in patterns))
    return [os.fsdecode(path) for path in out.split(b"\0") if path]


def _checkpoint_id(base: str | None, staged: str, worktree: str, artifacts: str | None,
                   environment: str | None) -> str:
    held = "\0".join(("baton checkpoint", str(FORMAT), base or "-", staged, worktree, artifacts or "-",
                      environment or "-"))
    return hashlib.sha256(held.encode()).hexdigest()


def _fingerprint(place: _Place, raw_status: bytes, plan: _Plan, patterns: Sequence[str], cap: int,
                 environment_id: str | None) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([FORMAT, str(place.root), list(patterns), cap, environment_id, plan.stats],
                             ensure_ascii=True).encode())
    digest.update(b"\0")
    digest.update(raw_status)
    return digest.hexdigest()


def _read_state(place: _Place) -> dict:
    try:
        state = json.loads((place.git_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(place: _Place, fingerprint: str, checkpoint_id: str) -> None:
    """Remember the fingerprint; a failure only costs the next take its shortcut."""
    path = place.git_dir / STATE_FILE
    with suppress(OSError):
        path.parent.mkdir(exist_ok=True)
        # Whole or not at all, whichever of two racing takes is last.
        write_whole(path, json.dumps({"fingerprint": fingerprint, "id": checkpoint_id}))


def _metadata(checkpoint: Checkpoint, patterns: Sequence[str], cap: int) -> bytes:
    return json.dumps({
        "format": FORMAT, "base": checkpoint.base, "boundary": checkpoint.boundary, "label": checkpoint.label,
        "taken_at": clock.to_text(checkpoint.taken_at), "run_id": checkpoint.run_id,
        "environment": checkpoint.environment, "worktree": checkpoint.worktree, "branch": checkpoint.branch,
        "skipped": [s._asdict() for s in checkpoint.skipped],
        "submodules": [s._asdict() for s in checkpoint.submodules],
        "artifact_patterns": list(patterns), "max_file_bytes": cap,
    }, indent=1, sort_keys=True).encode()


@dataclass(slots=True)
class _Survey:
    """The worktree as one `git status` and an lstat of each changed file see it."""

    place: _Place
    scratch: Path
    index: Path  # a copy of the user's index, ours to change
    status: _Status
    plan: _Plan
    hasher: _Hasher
    fingerprint: str


def _survey(git: _Git, scratch: Path, patterns: Sequence[str], cap: int,
            environment_id: str | None) -> _Survey | Refused:
    place = _locate(git)
    git.cwd = place.root  # every path below is relative to the worktree's root
    operation = _in_progress(place.git_dir)
    if operation:
        return Refused(f"{operation} is in progress in {place.root}: a checkpoint could not hold its state "
                       "(conflict stages, the operation's own files); finish or abort it first")
    index = scratch / "index"
    # with its modification time: git tells a racily clean entry by comparing the two; nothing
    # ever staged leaves no index, which git reads as an empty one
    with suppress(FileNotFoundError):
        shutil.copy2(place.git_dir / "index", index)
    status, raw = _status(git, index)
    if status.unmerged:
        return Refused(f"{len(status.unmerged)} unmerged path(s) in {place.root}, e.g. "
                       f"{status.unmerged[0]!r}: resolve them first")
    hasher = _Hasher(scratch)
    plan = _plan(git, place, status, hasher, _artifact_paths(git, patterns), cap)
    return _Survey(place, scratch, index, status, plan, hasher,
                   _fingerprint(place, raw, plan, patterns, cap, environment_id))


def _last_if_unchanged(git: _Git, survey: _Survey) -> str | None:
    last = _read_state(survey.place)
    if last.get("fingerprint") == survey.fingerprint and isinstance(last.get("id"), str) \
            and _is_id(last["id"]) and git.commit_of(REF_PREFIX + last["id"]):
        return last["id"]
    return None


def _check_inputs(texts: dict[str, object], cap: object) -> None:
    """Refuse what a caller passed unchecked (an MCP tool's arguments, say)."""
    for name, value in texts.items():
        if value is not None and (not isinstance(value, str) or "\0" in value or len(value) > 4096):
            raise BadInput(f"checkpoint {name} must be text of at most 4096 characters without NUL")
    if not isinstance(cap, int) or cap < 0:
        raise BadInput("max_file_bytes must be a whole number of bytes, not negative")


def take(worktree: Path, *, boundary: str, label: str | None = None, run_id: str | None = None,
         artifacts: Sequence[str] = (), max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
         environment: tuple[str, bytes] | None = None, timeout: float = OPERATION_CAP, deadline: Deadline | None = None,
         ) -> Taken | Unchanged | Refused:
    """Checkpoint the worktree containing `worktree`, never changing the worktree, the index, the
    stash or a branch. artifacts: globs (`:(glob)` pathspecs) of ignored files to hold too;
    environment: (manifest id, manifest JSON) to record beside the trees. Unchanged when nothing
    changed since this worktree's last checkpoint, Refused when an operation is in progress or
    paths are unmerged; BadInput outside a git worktree, StoreUnavailable when git cannot write."""
    _check_inputs({"boundary": boundary, "label": label, "run id": run_id}, max_file_bytes)
    if not boundary:
        raise BadInput("a checkpoint needs a boundary (what took it: stop, bind, handoff, manual, ...)")
    environment_id = environment[0] if environment else None
    git = _Git(Path(worktree), timeout, deadline)
    try:
        with tempfile.TemporaryDirectory(prefix="baton-checkpoint-") as scratch:
            survey = _survey(git, Path(scratch), artifacts, max_file_bytes, environment_id)
            if isinstance(survey, Refused):
                return survey
            last = _last_if_unchanged(git, survey)
            if last is not None:
                return Unchanged(last, tuple(survey.status.dirty))
            return _write(git, survey, boundary=boundary, label=label, run_id=run_id, patterns=artifacts,
                          cap=max_file_bytes, environment=environment)
    except GitFailed as exc:
        raise StoreUnavailable("checkpoints", str(exc)) from None


def _write(git: _Git, survey: _Survey, *, boundary: str, label: str | None, run_id: str | None,
           patterns: Sequence[str], cap: int, environment: tuple[str, bytes] | None) -> Taken:
    status, plan, hasher, index = survey.status, survey.plan, survey.hasher, survey.index
    taken_at = clock.now()
    draft = Checkpoint(id="", commit="", base=status.base, staged_tree="", worktree_tree="", artifacts_tree=None,
                       environment=environment[0] if environment else None, boundary=boundary, label=label,
                       taken_at=taken_at, run_id=run_id, worktree=str(survey.place.root), branch=status.branch,
                       skipped=tuple(plan.skipped), submodules=tuple(plan.submodules))
    # The metadata holds nothing derived from the trees, so it is hashed with the files.
    metadata_slot = hasher.add_bytes(_metadata(draft, patterns, cap))
    environment_slot = hasher.add_bytes(environment[1]) if environment else None
    blobs = hasher.write(git)
    oid = lambda target: blobs[target] if isinstance(target, int) else target  # noqa: E731
    staged = git.run("write-tree", index=index).decode().strip()
    null = "0" * len(staged)
    worktree_tree = staged
    if plan.entries or plan.removals:
        git.run("update-index", "--add", "--replace", "-z", "--index-info", index=index,
                input=_index_info(((p, m, oid(t)) for p, m, t in plan.entries), plan.removals, null))
        worktree_tree = git.run("write-tree", index=index).decode().strip()
    artifacts_tree = None
    if plan.artifacts:
        artifacts_index = survey.scratch / "artifacts-index"
        git.run("update-index", "--add", "-z", "--index-info", index=artifacts_index,
                input=_index_info(((p, m, oid(t)) for p, m, t in plan.artifacts), (), null))
        artifacts_tree = git.run("write-tree", index=artifacts_index).decode().strip()
    checkpoint_id = _checkpoint_id(status.base, staged, worktree_tree, artifacts_tree, draft.environment)
    ref = REF_PREFIX + checkpoint_id
    listing = [f"100644 blob {blobs[metadata_slot]}\tcheckpoint.json", f"040000 tree {staged}\tstaged",
               f"040000 tree {worktree_tree}\tworktree"]
    if artifacts_tree:
        listing.append(f"040000 tree {artifacts_tree}\tartifacts")
    if environment_slot is not None:
        listing.append(f"100644 blob {blobs[environment_slot]}\tenvironment.json")
    tree = git.run("mktree", input="\n".join(listing).encode() + b"\n").decode().strip()
    message = (f"Baton checkpoint {checkpoint_id}\n\nstaged {staged}\nworktree {worktree_tree}\n"
               f"artifacts {artifacts_tree or '-'}\n")
    date = f"{int(taken_at.timestamp())} +0000"
    commit = git.run("commit-tree", "--no-gpg-sign", tree, *(("-p", status.base) if status.base else ()),
                     input=message.encode(),
                     extra_env={**_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}).decode().strip()
    try:  # create only: the ref of an id is written once
        git.run("update-ref", ref, commit, null)
    except GitFailed:
        existing = git.commit_of(ref)
        if not existing:
            raise
        # The same state was checkpointed before, or by a process racing this one: that one stands.
        found = _read_many(git, {checkpoint_id: existing})
        if not found:
            raise GitFailed(f"checkpoint {checkpoint_id} exists but cannot be read") from None
        _write_state(survey.place, survey.fingerprint, checkpoint_id)
        return Taken(found[0], created=False, dirty=tuple(status.dirty))
    _write_state(survey.place, survey.fingerprint, checkpoint_id)
    return Taken(draft._replace(id=checkpoint_id, commit=commit, staged_tree=staged, worktree_tree=worktree_tree,
                                artifacts_tree=artifacts_tree), created=True, dirty=tuple(status.dirty))


def parse_batch(out: bytes, count: int) -> list[tuple[str, bytes] | None]:
    """The objects of a `git cat-file --batch` answer: (type, content), None when missing."""
    objects: list[tuple[str, bytes] | None] = []
    at = 0
    for _ in range(count):
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        at = end + 1
        if len(header) != 3:
            objects.append(None)
            continue
        size = int(header[2])
        objects.append((header[1].decode(), out[at:at + size]))
        at += size + 1
    return objects


def _from_record(checkpoint_id: str, commit: bytes, metadata: bytes, commit_oid: str) -> Checkpoint:
    head, _, message = commit.partition(b"\n\n")
    trees = dict(line.split(" ", 1) for line in message.decode().splitlines()[2:] if " " in line)
    meta = json.loads(metadata)
    return Checkpoint(
        id=checkpoint_id, commit=commit_oid, base=meta["base"], staged_tree=trees["staged"],
        worktree_tree=trees["worktree"],
        artifacts_tree=None if trees.get("artifacts", "-") == "-" else trees["artifacts"],
        environment=meta["environment"], boundary=meta["boundary"], label=meta["label"],
        taken_at=clock.parse(meta["taken_at"]), run_id=meta["run_id"], worktree=meta["worktree"],
        branch=meta["branch"], skipped=tuple(Skipped(**s) for s in meta["skipped"]),
        submodules=tuple(Submodule(**s) for s in meta["submodules"]))


def _read_many(git: _Git, commits: dict[str, str]) -> list[Checkpoint]:
    """The readable checkpoints among {id: record commit} (one `git cat-file --batch` for all)."""
    if not commits:
        return []
    asked = "".join(f"{commit}\n{commit}:checkpoint.json\n" for commit in commits.values())
    objects = parse_batch(git.run("cat-file", "--batch", input=asked.encode()), 2 * len(commits))
    found = []
    for n, (checkpoint_id, oid) in enumerate(commits.items()):
        commit, metadata = objects[2 * n], objects[2 * n + 1]
        if commit is None or metadata is None or commit[0] != "commit":
            continue
        try:
            found.append(_from_record(checkpoint_id, commit[1], metadata[1], oid))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not a record this format understands
    return found


def _ids(git: _Git, prefix: str = "") -> dict[str, str]:
    """{id: record commit} of the checkpoint refs (whose id starts with prefix)."""
    out = git.run("for-each-ref", "--format=%(objectname) %(refname)",
                  f"{REF_PREFIX}{prefix}*" if prefix else REF_PREFIX)
    found = {}
    for line in out.decode("utf-8", "replace").splitlines():
        oid, _, ref = line.partition(" ")
        if ref.startswith(REF_PREFIX) and _is_id(ref[len(REF_PREFIX):]):
            found[ref[len(REF_PREFIX):]] = oid
    return found


def _is_id(text: object) -> bool:
    """Whether text can be a checkpoint id or a prefix of one: 7 to 64 lowercase hex digits."""
    return isinstance(text, str) and 7 <= len(text) <= 64 and set(text) <= _HEX


def _check_id(checkpoint_id: str) -> str:
    if not _is_id(checkpoint_id):
        raise BadInput(f"not a checkpoint id: {str(checkpoint_id)[:80]!r} (7 to 64 lowercase hex digits)")
    return checkpoint_id


def read(repository: Path, checkpoint_id: str, *,
         timeout: float = OPERATION_CAP, deadline: Deadline | None = None
         ) -> Found[Checkpoint] | NotFound | Unavailable:
    """One checkpoint by its id or a unique prefix of it (7 hex digits at least)."""
    _check_id(checkpoint_id)
    git = _Git(Path(repository), timeout, deadline)
    _locate(git)
    try:
        ids = {i: oid for i, oid in _ids(git, checkpoint_id).items() if i.startswith(checkpoint_id)}
        if len(ids) > 1:
            raise BadInput(f"checkpoint id prefix {checkpoint_id} is ambiguous: {len(ids)} checkpoints")
        found = _read_many(git, ids)
    except GitFailed as exc:
        return Unavailable(str(exc))
    return Found(found[0]) if found else NotFound(checkpoint_id)


def list_checkpoints(repository: Path, *, timeout: float = OPERATION_CAP, deadline: Deadline | None = None
                     ) -> Found[tuple[Checkpoint, ...]] | Unavailable:
    """Every checkpoint of the repository (of all its worktrees), newest first."""
    git = _Git(Path(repository), timeout, deadline)
    _locate(git)
    try:
        found = _read_many(git, _ids(git))
    except GitFailed as exc:
        return Unavailable(str(exc))
    return Found(tuple(sorted(found, key=lambda c: c.taken_at, reverse=True)))


def gc(repository: Path, keep: Iterable[str], *, timeout: float = OPERATION_CAP,
       deadline: Deadline | None = None) -> tuple[str, ...]:
    """Delete the checkpoint refs whose id is not in keep, in one transaction; answers the
    ids deleted. Their objects go when git's own gc prunes unreachable objects."""
    kept = set(keep)
    git = _Git(Path(repository), timeout, deadline)
    _locate(git)
    try:
        doomed = {i: oid for i, oid in _ids(git).items() if i not in kept}
        if doomed:  # each only if it still names the record listed
            git.run("update-ref", "-z", "--stdin", input=b"".join(
                b"delete %s\0%s\0" % ((REF_PREFIX + i).encode(), oid.encode()) for i, oid in doomed.items()))
    except GitFailed as exc:
        raise StoreUnavailable("checkpoints", str(exc)) from None
    return tuple(sorted(doomed))


def _safe_path(root: Path, path: str) -> Path:
    """root/path, refusing a path that could leave root (a record written by hand)."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise GitFailed(f"refusing to restore the path {path!r}")
    return root.joinpath(*parts)


def _diff(git: _Git, before: str, after: str) -> list[tuple[str, str, str, str]]:
    """(status, new mode, new oid, path) of each file differing between two trees."""
    out = git.run("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", before, after).split(b"\0")
    changes = []
    for n in range(0, len(out) - 1, 2):
        meta = out[n].decode().lstrip(":").split(" ")
        changes.append((meta[4][:1], meta[1], meta[3], os.fsdecode(out[n + 1])))
    return changes


def _remove(root: Path, target: Path) -> None:
    """Remove a file, or a directory if empty (as git leaves a submodule's files), then the
    directories this left empty."""
    try:
        if target.is_symlink() or not target.is_dir():
            target.unlink(missing_ok=True)
        else:
            target.rmdir()
    except OSError:
        return
    parent = target.parent
    while parent != root:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def _write_files(git: _Git, root: Path, entries: list[tuple[str, str, str]], *, overwrite: bool) -> list[Skipped]:
    """Write (path, mode, oid) entries under root byte for byte; without overwrite, a path
    already taken is skipped and answered."""
    skipped, blobs = [], [(p, m, o) for p, m, o in entries if m != "160000"]
    contents = parse_batch(git.run("cat-file", "--batch", input="".join(f"{o}\n" for _, _, o in blobs).encode()),
                            len(blobs)) if blobs else []
    real_root = Path(os.path.realpath(root))
    for (path, mode, _), content in zip(blobs, contents, strict=True):
        if content is None:
            raise GitFailed(f"the object of {path!r} is missing from the repository")
        target = _safe_path(root, path)
        if os.path.lexists(target):
            if not overwrite:
                skipped.append(Skipped(path, "a file is already there"))
                continue
            _remove(root, target)
        if not Path(os.path.realpath(target.parent)).is_relative_to(real_root):
            raise GitFailed(f"refusing to restore {path!r} through a symlink")
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            os.symlink(content[1], os.fsencode(target))
            continue
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777 if mode == "100755" else 0o666)
        with os.fdopen(fd, "wb") as out:
            out.write(content[1])
    for path, mode, _ in entries:
        if mode == "160000":
            _safe_path(root, path).mkdir(parents=True, exist_ok=True)
    return skipped


def _apply(git: _Git, root: Path, checkpoint: Checkpoint) -> list[Skipped]:
    """Bring the worktree at root (checked out at the base, its index equal to it; git runs
    there) to the checkpoint: files to the worktree tree, then the index to the staged tree,
    each by its difference from the base so untouched entries keep their stat information."""
    empty = git.run("hash-object", "-t", "tree", "--stdin", input=b"").decode().strip()
    base_tree = f"{checkpoint.base}^{{tree}}" if checkpoint.base else empty
    changes = _diff(git, base_tree, checkpoint.worktree_tree)
    for status, _, _, path in changes:
        if status == "D":
            _remove(root, _safe_path(root, path))
    _write_files(git, root, [(p, m, o) for s, m, o, p in changes if s != "D"], overwrite=True)
    staged = _diff(git, base_tree, checkpoint.staged_tree)
    null = "0" * len(checkpoint.staged_tree)
    if staged:
        git.run("update-index", "--add", "--replace", "-z", "--index-info",
                input=_index_info(((p, m, o) for s, m, o, p in staged if s != "D"),
                                  (p for s, _, _, p in staged if s == "D"), null))
    artifacts = _diff(git, empty, checkpoint.artifacts_tree) if checkpoint.artifacts_tree else []
    skipped = _write_files(git, root, [(p, m, o) for _, m, o, p in artifacts], overwrite=False)
    git.run("update-index", "-q", "--refresh", ok=(0, 1))  # stat information, so `git status` is quick
    return skipped


def restore(repository: Path, checkpoint_id: str, target: Path, *, in_place: bool = False,
            timeout: float = OPERATION_CAP, deadline: Deadline | None = None) -> Restored:
    """Bring a checkpoint back: into `target`, a new worktree of the repository (detached at the
    base commit), or with in_place into `target`, a clean worktree of the repository; the staged
    tree becomes the index and the worktree tree the files. Raises BadInput (nothing written) for
    an unknown checkpoint, a non-empty target, a missing base commit, or in_place on a worktree
    not clean or not of this repository; StoreUnavailable when git fails (a new worktree is
    removed again)."""
    _check_id(checkpoint_id)
    git = _Git(Path(repository), timeout, deadline)
    place = _locate(git)
    checkpoint = read(repository, checkpoint_id, timeout=timeout, deadline=deadline).unwrap("checkpoints")
    if checkpoint is None:
        raise BadInput(f"no checkpoint {checkpoint_id} in {place.root}")
    try:
        if checkpoint.base and not git.commit_of(checkpoint.base):
            raise BadInput(f"checkpoint {checkpoint.id[:12]}: its base commit {checkpoint.base} is missing from "
                           f"{place.root}; nothing written")
        if in_place:
            return _restore_in_place(git, place, checkpoint, Path(target))
        return _restore_new(git, checkpoint, Path(target))
    except GitFailed as exc:
        raise StoreUnavailable("checkpoints", str(exc)) from None
    except OSError as exc:
        raise StoreUnavailable("checkpoints", f"cannot write {exc.filename or target}: {exc.strerror or exc}") from None


def _restore_new(git: _Git, checkpoint: Checkpoint, target: Path) -> Restored:
    target = Path(os.path.abspath(target))
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BadInput(f"restore target {target} is not an empty directory; nothing written")
    existed = target.exists()
    unborn = f"refs/heads/baton/restored-{checkpoint.id[:12]}"
    if checkpoint.base is None and git.commit_of(unborn):
        raise BadInput(f"{unborn} exists already: delete it to restore this unborn-branch checkpoint again")
    start = checkpoint.base or checkpoint.commit
    git.run(*_NO_HOOKS, "worktree", "add", "--detach", *(() if checkpoint.base else ("--no-checkout",)),
            str(target), start)
    try:
        restored = _Git(target, max(1.0, git.left()), git.deadline)
        if checkpoint.base is None:
            restored.run("symbolic-ref", "HEAD", unborn)
        skipped = _apply(restored, target, checkpoint)
    except BaseException:
        # Whatever the command has left: a worktree half made is removed.
        _Git(git.cwd, OPERATION_CAP).run("worktree", "remove", "--force", str(target), ok=(0, 128))
        if existed:
            target.mkdir(exist_ok=True)
        raise
    notes = _notes(checkpoint)
    if checkpoint.base is None:
        notes.append(f"taken on an unborn branch: HEAD is the unborn {unborn[len('refs/heads/'):]}")
    return Restored(target, checkpoint, tuple(skipped), tuple(notes))


def _restore_in_place(git: _Git, place: _Place, checkpoint: Checkpoint, target: Path) -> Restored:
    there = _Git(target, max(1.0, git.left()), git.deadline)
    where = _locate(there)
    if os.path.realpath(where.common_dir) != os.path.realpath(place.common_dir):
        raise BadInput(f"{where.root} is not a worktree of {place.root}'s repository; nothing written")
    operation = _in_progress(where.git_dir)
    dirty = there.run("status", "--porcelain=v1", "-z", "--untracked-files=all")
    if operation or dirty:
        raise BadInput(f"restoring in place needs a clean worktree: {where.root} has "
                       f"{operation + ' in progress' if operation else 'changes or untracked files'}; nothing written")
    head = there.commit_of("HEAD") or None
    if checkpoint.base is None and head is not None:
        raise BadInput("this checkpoint was taken on an unborn branch; restore it into a new path instead")
    if checkpoint.base and head != checkpoint.base:
        there.run(*_NO_HOOKS, "checkout", "-q", "--detach", checkpoint.base)
    skipped = _apply(there, where.root, checkpoint)
    return Restored(where.root, checkpoint, tuple(skipped), tuple(_notes(checkpoint)))


def _notes(checkpoint: Checkpoint) -> list[str]:
    notes = [f"submodule {s.path} is not checked out (recorded at {s.commit})" for s in checkpoint.submodules]
    if checkpoint.skipped:
        notes.append(f"{len(checkpoint.skipped)} file(s) the checkpoint did not hold, e.g. "
                     f"{checkpoint.skipped[0].path!r}: {checkpoint.skipped[0].reason}")
    return notes
