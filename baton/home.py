"""The data home: one directory shared by every agent process of a user on this machine."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def data_home(explicit: str | None, xdg: str | None) -> Path:
    """explicit (BATON_HOME), else xdg/baton ($XDG_DATA_HOME), else ~/.local/share/baton.
    Not created here; the settings read the environment."""
    if explicit:
        return Path(explicit).expanduser()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "baton"


def unusable(home: Path) -> str | None:
    """Why the data home cannot hold Baton's files, or None (a missing one is created on
    first write). Each store then reports itself unavailable; nothing is read from it."""
    try:
        mode = os.stat(home).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"data home {home}: {exc.strerror or exc}"
    if not stat.S_ISDIR(mode):
        return f"data home {home} is not a directory"
    if not os.access(home, os.R_OK | os.W_OK | os.X_OK):
        return f"data home {home} is not readable and writable"
    return None


def readable_by_others(home: Path) -> str | None:
    """A warning when the data home lets other users in (group or world permissions), else
    None: every session of this user is in it. One that others may write is refused
    before this is asked (baton.trust), so the warning is for reading."""
    try:
        mode = os.stat(home).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode) and mode & 0o077:
        return (f"data home {home} is readable by other users (mode {stat.S_IMODE(mode):o}): "
                f"`chmod 700 {home}` keeps your sessions private")
    return None


def make_directory(directory: Path) -> None:
    """Create directory (readable by its owner only, whatever the umask) and its parents;
    where something else is in the way, an OSError that names it (mkdir alone would say
    "File exists")."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), directory)
        raise NotADirectoryError(errno.ENOTDIR, f"{blocking} is not a directory") from None


def write_synced(path: Path, *pieces: bytes | memoryview) -> None:
    """Create the file at path (none may be there; owner only) with pieces, flushed to the
    disk before this returns; on any failure, no file is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for piece in pieces:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
