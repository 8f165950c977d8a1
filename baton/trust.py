"""Whom Baton trusts: its own user (and root), as ssh's StrictModes does.

What lies in the data home steers what Baton runs, stores and sends: the resident's socket
receives each command's environment and standard streams, the configuration names servers,
keys and what is never redacted. Another local user who can write there
(a data home in a shared directory, or one that user made first) could plant any of them.
So before Baton reads or connects to anything there:

- the data home is a directory owned by this user (the effective uid) and writable by
  nobody else, and each directory above it is owned by this user or root and writable by
  nobody else unless sticky (/tmp): nobody else can put another in its place;
- a symbolic link on the way to it is owned by this user or root;
- each file read there is owned by this user and writable by nobody else, checked on the
  open descriptor (a link or a rename cannot redirect the read); the configuration file,
  wherever it is, may be root's as well.

Each check answers why it refuses, one line naming the path and the fix, or None; the
callers raise baton.errors.Untrusted (exit 3). A data home others may read but not write
is a warning only (baton.home.readable_by_others). The standard library's os and stat
only: the resident's client (baton.skills.runtime.resident_client) checks before anything
else is imported.
"""

from __future__ import annotations

import os
import stat

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
OWN_HOME = "use a directory of your own (BATON_HOME)"


def home_refusal(home: str | os.PathLike[str]) -> str | None:
    """Why the data home cannot be trusted, or None. A missing one is trusted when what
    exists above it is (Baton creates it, mode 700); one that is not a directory is left to
    baton.home.unusable."""
    me = os.geteuid()
    path = os.path.abspath(home)
    real = os.path.realpath(path)
    reason = (_links(path, me) if real != path else None) or _directory(real, me) or _above(real, me)
    return None if reason is None else f"refusing data home {path}: {reason}"


def file_refusal(path: str | os.PathLike[str], found: os.stat_result, *, root_too: bool = False) -> str | None:
    """Why the file (found: its stat) cannot be trusted, or None: owned by this user (or
    root, with root_too) and writable by nobody else."""
    me = os.geteuid()
    if found.st_uid != me and not (root_too and found.st_uid == 0):
        return (f"refusing {os.fspath(path)}: owned by uid {found.st_uid}, not you ({me}); "
                "chown it if it is yours, else move it aside")
    if found.st_mode & _OTHERS_WRITE:
        return (f"refusing {os.fspath(path)}: writable by group or others (mode {stat.S_IMODE(found.st_mode):o}); "
                f"chmod go-w {os.fspath(path)}")
    return None


def read_private(path: str | os.PathLike[str], *, root_too: bool = False) -> bytes:
    """The file's bytes, once file_refusal finds nothing on the open descriptor; else
    baton.errors.Untrusted. OSError as open and read raise it (FileNotFoundError included)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a planted FIFO must not block the open
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        reason = file_refusal(path, found, root_too=root_too)
        if reason is None and not stat.S_ISREG(found.st_mode):
            reason = f"refusing {os.fspath(path)}: not a regular file; remove it"
        if reason is not None:
            from baton.errors import Untrusted

            raise Untrusted(reason)
        return handle.read()


def _directory(path: str, me: int) -> str | None:
    try:
        found = os.lstat(path)
    except OSError:
        return None  # missing (created 700 on first write), or unreachable: baton.home.unusable says so
    if not stat.S_ISDIR(found.st_mode):
        return None
    if found.st_uid != me:
        return f"owned by uid {found.st_uid}, not you ({me}); {OWN_HOME} or chown it"
    if found.st_mode & _OTHERS_WRITE:
        return f"writable by group or others (mode {stat.S_IMODE(found.st_mode):o}); chmod 700 {path}"
    return None


def _above(path: str, me: int) -> str | None:
    """The directories above path (symbolic links resolved): none lets another user
    rename or replace what it holds."""
    parent = path
    while parent != (parent := os.path.dirname(parent)):  # up to the root, which is its own parent
        try:
            found = os.lstat(parent)
        except OSError:
            continue  # not there yet: created by Baton, 700
        if found.st_uid not in (me, 0):
            return f"{parent} is owned by uid {found.st_uid}, neither you ({me}) nor root; {OWN_HOME}"
        if found.st_mode & _OTHERS_WRITE and not found.st_mode & stat.S_ISVTX:
            return (f"{parent} is writable by group or others (mode {stat.S_IMODE(found.st_mode):o}) and not "
                    f"sticky; {OWN_HOME} or chmod go-w {parent}")
    return None


def _links(path: str, me: int) -> str | None:
    """The symbolic links met on the way to path: each owned by this user or root, so
    nobody else can point it elsewhere."""
    prefix = os.sep
    for part in path.split(os.sep):
        if not part:
            continue
        prefix = os.path.join(prefix, part)
        try:
            found = os.lstat(prefix)
        except OSError:
            return None
        if stat.S_ISLNK(found.st_mode) and found.st_uid not in (me, 0):
            return f"the link {prefix} is owned by uid {found.st_uid}, neither you ({me}) nor root; {OWN_HOME}"
    return None
