"""Where handoff documents live in a worktree, which one is current, and writing them.

The current document is `docs/handoffs/LATEST.md`, else `LATEST.md` at the worktree root,
else the handoff with the newest modification time under `docs/handoffs/`. Every other
handoff is history.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from datetime import datetime
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

from baton.clock import UTC
from baton.errors import BadInput, StoreUnavailable
from baton.files import write_whole
from baton.store_names import Store

if TYPE_CHECKING:
    from baton.skills.handoff.document import ParsedHandoff

HANDOFFS_DIR = "docs/handoffs"
LATEST = "LATEST.md"
MAX_DOCUMENT_BYTES = 1024 * 1024
NO_HANDOFF = "no handoff in this worktree"
_DATED = re.compile(r"\d{4}-\d{2}-\d{2}-[A-Za-z0-9._:-]+\.md")  # <date>-<ticket>[-N].md


class UnreadableHandoff(Exception):
    """A handoff file that must not or cannot be read; the message says why."""


def dated_handoffs(root: Path) -> list[Path]:
    """The handoffs under docs/handoffs/ named like `<date>-<ticket>[-N].md` (as `baton
    handoff` names them; a README.md there is not a handoff), newest modification first."""
    try:
        found = [p for p in (root / HANDOFFS_DIR).rglob("*.md") if _DATED.fullmatch(p.name) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: (modified_at(p) or datetime.fromtimestamp(0, UTC), str(p)), reverse=True)


def candidates(root: Path) -> list[Path]:
    """Handoffs in the order they count as current: the LATEST.md files, then by mtime."""
    latest = [path for path in (root / HANDOFFS_DIR / LATEST, root / LATEST) if path.is_file()]
    return latest + dated_handoffs(root)


def read_handoff(path: Path, root: Path) -> str:
    """The text of a handoff: a regular file inside the worktree, at most 1 MiB. A handoff comes
    from the branch, so a link out of the worktree, a FIFO (which would block the read) or a
    huge file is refused rather than read."""
    try:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(Path(os.path.realpath(root))):
            raise UnreadableHandoff(f"{path} points outside the worktree ({real})")
        # Checked on the open file, not the name: a link swapped in is not followed, and
        # opening a FIFO does not wait for a writer.
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableHandoff(f"{path} is not a regular file")
            if info.st_size > MAX_DOCUMENT_BYTES:
                raise UnreadableHandoff(f"{path} is larger than {MAX_DOCUMENT_BYTES // 1024} KiB")
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UnreadableHandoff(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UnreadableHandoff(f"{path} is larger than {MAX_DOCUMENT_BYTES // 1024} KiB")
    return data.decode("utf-8", errors="replace")


def choose_current(root: Path, task_id: str | None) -> tuple[Path | None, ParsedHandoff | None, str | None, list[Path]]:
    """The current handoff (for task_id, if given: another ticket's is skipped, one naming
    no ticket counts), its parse, a note when there is none or it cannot be read, and every
    candidate. An unreadable candidate is where the choice stops: a later one is not current."""
    from baton.skills.handoff.document import parse_document

    found = candidates(root)
    skipped = []
    for path in found:
        try:
            parsed = parse_document(read_handoff(path, root))
        except UnreadableHandoff as exc:
            return path, None, str(exc), found
        if task_id is None or parsed.task_id in (None, task_id):
            return path, parsed, None, found
        skipped.append(f"{shown_path(path, root)} ({parsed.task_id})")
    if not found:
        return None, None, NO_HANDOFF, found
    return None, None, f"no handoff for {task_id}; other tickets': {', '.join(skipped[:3])}", found


def modified_at(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


def writable_handoffs_dir(root: Path) -> Path:
    """The real path of docs/handoffs/ (created if missing), once it is known to lie inside the
    worktree and to be a directory whose LATEST.md can be replaced; BadInput otherwise. The
    layout comes from the branch: a committed link must not make Baton write elsewhere. Call it
    before running anything, and again right before writing."""
    real_root = Path(os.path.realpath(root))
    directory = Path(os.path.realpath(root / HANDOFFS_DIR))
    if not directory.is_relative_to(real_root):
        raise BadInput(f"{HANDOFFS_DIR} points outside the worktree ({directory}): refusing to write a handoff there")
    if os.path.lexists(directory) and not directory.is_dir():
        raise BadInput(f"{HANDOFFS_DIR} in {root} is not a directory")
    latest = directory / LATEST
    if os.path.lexists(latest) and not stat.S_ISREG(os.lstat(latest).st_mode) and not latest.is_symlink():
        raise BadInput(f"{HANDOFFS_DIR}/{LATEST} is not a regular file: it would not be replaced")
    return directory


def write_new_handoff(root: Path, task_id: str, at: datetime, text: str) -> Path:
    """Write `docs/handoffs/<date>-<ticket>.md`; a second handoff of the day gets `-2`, `-3`, ...
    (link_new: two handoffs written at once never overwrite each other)."""
    try:
        writable_handoffs_dir(root).mkdir(parents=True, exist_ok=True)
        directory = writable_handoffs_dir(root)
        stem = f"{at.strftime('%Y-%m-%d')}-{task_id}"
        return link_new(directory, (f"{stem}.md" if n == 1 else f"{stem}-{n}.md" for n in count(1)), text,
                        mode=0o644)
    except OSError as exc:
        raise not_written(root / HANDOFFS_DIR, exc) from None


def link_new(directory: Path, names: Iterable[str], text: str, *, mode: int = 0o600) -> Path:
    """Write text in full, then give it the first of names not taken in directory, with a
    hard link: a link fails if the name exists (FileExistsError when every name is taken),
    so a racing writer never overwrites nor half-reads it, nor follows a link planted there."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".baton-new-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, mode)
        for name in names:
            with suppress(FileExistsError):
                os.link(temporary, directory / name)
                return directory / name
        raise FileExistsError(f"{directory}: every name is taken")
    finally:
        os.unlink(temporary)


def not_written(path: Path, exc: OSError) -> StoreUnavailable:
    """A handoff file the file system would not take (a full disk, a quota, a read-only tree)."""
    return StoreUnavailable(Store.HANDOFF_FILES, f"cannot write {path}: {exc.strerror or exc}")


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one. StoreUnavailable when
    the file system would not take it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, text, mode=0o644)
    except OSError as exc:
        raise not_written(path, exc) from None


def shown_path(path: Path, root: Path) -> str:
    """The path relative to the worktree root when inside it (as named, links not followed)."""
    absolute = Path(os.path.abspath(path))
    for base in (Path(os.path.abspath(root)), Path(os.path.realpath(root))):
        if absolute.is_relative_to(base):
            return str(absolute.relative_to(base))
    return str(path)
