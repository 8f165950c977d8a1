"""File identity: a repo identity plus a repo-relative normalised path.

Repo identity is the normalised `origin` URL, else the main worktree's path, so every
worktree of one repository shares its files while two unrelated repos never do. Discovery
reads `.git` and the repository config directly instead of running git: `baton touch`
runs in an agent's PostToolUse hook and a git subprocess per call would eat its budget.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

from baton.errors import BadInput
from baton.shown_text import check_text, clipped


@dataclass(frozen=True, slots=True)
class FileRef:
    """One file: repo identity ('' outside any repository) and its path within it.

    A dataclass, not a pydantic model, because `baton touch` builds these on the hook's hot
    path without importing pydantic; pydantic still validates it inside event models.
    """

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}

    repo: str
    path: str

    @property
    def key(self) -> str:
        """The canonical string for this file, used in sets, signal ids and signal subjects."""
        return f"{self.repo}:{self.path}" if self.repo else self.path


# A NamedTuple, not a dataclass: a fresh `baton touch` or hook defines it, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class Worktree(NamedTuple):
    root: Path
    common_dir: Path | None
    repo: str
    branch: str | None


_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")


def check_path_text(raw: str) -> None:
    """Reject paths that cannot name a file Baton can store."""
    if raw == "":
        raise BadInput("empty path")
    check_text(f"path {clipped(raw, 80)!r}", raw)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        shown = raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise BadInput(f"path is not valid UTF-8: {shown}") from None


def normalise_remote(url: str) -> str:
    """host/owner/repo for any spelling of a remote; credentials and ports never kept."""
    url = url.strip()
    if "://" in url:
        scheme, rest = url.split("://", 1)
        if scheme == "file":
            return os.path.normpath(rest).rstrip("/").removesuffix(".git")
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    else:
        scp = _SCP_LIKE.match(url)
        if scp is None:
            return os.path.normpath(url).rstrip("/").removesuffix(".git")
        host, path = scp.group(1), scp.group(2)
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host.lower()}/{path}"


def _origin_url(config: Path) -> str | None:
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    in_origin = False
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            in_origin = header.group(1).lower() == "remote" and header.group(2) == "origin"
            continue
        if in_origin:
            name, sep, value = line.partition("=")
            if sep and name.strip().lower() == "url":
                value = value.strip()
                if value.startswith('"') and value.endswith('"'):
                    value = value[1:-1]
                return value or None
    return None


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """(its git directory, the repository's common one) of the worktree whose root is root,
    read from its `.git` as git reads it: a directory, or a file saying `gitdir: ` (with the
    space) and a path, relative to root; None when root has no `.git` that says so."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git, dot_git
    try:
        text = dot_git.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    git_dir = Path(os.path.realpath(root / text.removeprefix("gitdir: ").strip()))
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir, git_dir
    return git_dir, Path(os.path.realpath(git_dir / common))


def _head_branch(git_dir: Path) -> str | None:
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else None


class WorktreeLocator:
    """Finds the worktree holding a directory; caches per directory for one process."""

    def __init__(self) -> None:
        self._cache: dict[Path, Worktree | None] = {}
        self._roots: dict[Path, list[Path]] = {}
        self._limits: tuple[int, int] | None = None

    def locate(self, directory: Path) -> Worktree | None:
        directory = Path(os.path.realpath(directory))
        if directory in self._cache:
            return self._cache[directory]
        found = None
        for candidate in (directory, *directory.parents):
            dirs = git_dirs(candidate)
            if dirs is not None:
                git_dir, common = dirs
                found = Worktree(candidate, common, self._identity(candidate, common), _head_branch(git_dir))
                break
        self._cache[directory] = found
        return found

    @staticmethod
    def _identity(root: Path, common_dir: Path) -> str:
        origin = _origin_url(common_dir / "config")
        if origin:
            return normalise_remote(origin)
        # No origin: the main worktree's path, which every linked worktree shares.
        main = common_dir.parent if common_dir.name == ".git" else common_dir
        return str(main)

    def worktree_roots(self, worktree: Worktree) -> list[Path]:
        """The roots of every worktree of worktree's repository (what `git worktree list`
        names), read from the common git dir rather than by running git; cached."""
        if worktree.root in self._roots:
            return self._roots[worktree.root]
        roots = [worktree.root]
        common = worktree.common_dir
        if common is not None:
            if common.name == ".git":  # a non-bare repository: its main worktree holds the common dir
                roots.append(Path(os.path.realpath(common.parent)))
            try:
                linked = list((common / "worktrees").iterdir())
            except OSError:
                linked = []
            for entry in linked:
                try:  # gitdir names the linked worktree's `.git` file
                    dot_git = Path((entry / "gitdir").read_text(encoding="utf-8").strip())
                except (OSError, UnicodeDecodeError):
                    continue
                if dot_git.is_absolute() and dot_git.is_file():
                    roots.append(Path(os.path.realpath(dot_git.parent)))
        self._roots[worktree.root] = roots = list(dict.fromkeys(roots))
        return roots

    def file_ref(self, raw: str, cwd: Path) -> FileRef:
        """FileRef for raw (relative to cwd or absolute): symlinks resolved, `..` folded,
        relative to the worktree holding it. The file need not exist, but it must lie in a
        worktree of cwd's repository (outside git: in cwd), fit the file system's limits and
        not be a directory, a device, a fifo or a socket; BadInput otherwise."""
        check_path_text(raw)
        self._check_length(raw, cwd)
        real = Path(os.path.realpath(os.path.join(cwd, raw)))
        self._check_length(str(real), cwd)
        home = self.locate(cwd)
        roots = self.worktree_roots(home) if home else [Path(os.path.realpath(cwd))]
        if not real.is_relative_to(roots[0]) and not any(real.is_relative_to(root) for root in roots[1:]):
            where = "this repository's worktrees" if home else str(roots[0])
            raise BadInput(f"path is outside {where}: {_shown(raw)}")
        _check_kind(real, raw)
        worktree = self.locate(real.parent)
        if worktree is None:
            return FileRef(repo="", path=str(real))
        relative = real.relative_to(worktree.root).as_posix()
        if relative in ("", "."):
            raise BadInput(f"path is a worktree root, not a file: {_shown(raw)}")
        return FileRef(repo=worktree.repo, path=relative)

    def _check_length(self, path: str, cwd: Path) -> None:
        """Refuse a path the file system could not name (PATH_MAX, NAME_MAX)."""
        if self._limits is None:
            self._limits = _limits(cwd)
        path_max, name_max = self._limits
        encoded = os.fsencode(path)
        if len(encoded) >= path_max:
            raise BadInput(f"path is longer than the file system allows ({len(encoded)} bytes, "
                           f"at most {path_max - 1}): {_shown(path)}")
        longest = max(encoded.split(b"/"), key=len)
        if len(longest) > name_max:
            raise BadInput(f"a name in the path is longer than the file system allows ({len(longest)} bytes, "
                           f"at most {name_max}): {_shown(path)}")


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"))


def _check_kind(real: Path, raw: str) -> None:
    """Refuse what is there but is not a file; a path not there yet (or deleted) is fine."""
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise BadInput(f"path goes through a file, so it cannot name one: {_shown(raw)}") from None
    except PermissionError:
        return  # inside the worktree and not ours to read: its name is still the ticket's touch
    except OSError as exc:
        raise BadInput(f"path cannot name a file ({exc.strerror}): {_shown(raw)}") from None
    for is_kind, kind in _KINDS:
        if is_kind(mode):
            raise BadInput(f"path is {kind}, not a file: {_shown(raw)}")


def _limits(directory: Path) -> tuple[int, int]:
    """(PATH_MAX, NAME_MAX) of the file system holding directory; Linux's where it does not say."""
    try:
        return os.pathconf(directory, "PC_PATH_MAX"), os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 4096, 255


def _shown(path: str) -> str:
    """A path for a one-line message: a very long one cut in the middle."""
    return path if len(path) <= 200 else f"{path[:100]}...{path[-60:]} ({len(path)} characters)"


def write_whole(path: Path, text: str, *, mode: int | None = None) -> None:
    """path holds text, or on a failure (raised as it comes) what it held before. mode: the file's, else 0600."""
    import tempfile  # here, not at the top: the hooks' reads need none of it (tempfile imports shutil)

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
