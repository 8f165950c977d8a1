"""Projects: the unit of isolation. Every record belongs to one, and a ticket id is unique
within its project only (the same id in two repositories is two sessions).

A project is the repository identity Baton already computes for files (baton.files: the
normalised `origin` URL, else the main worktree's path), unless `project` in baton.toml,
BATON_PROJECT or `--project` names one. Every store is opened for one project and reads and
writes only its records. ALL_PROJECTS is never a project: on PostgreSQL it is the setting
under which the row-level security lets a transaction read (never write) every project's
rows, which only the lead's `baton list --all-projects` asks for, to learn the projects.
"""

from __future__ import annotations

import re

from baton.errors import BadInput
from baton.shown_text import clipped

ALL_PROJECTS = "*"
MAX_PROJECT = 512  # a repository path or URL fits
_CONTROL = re.compile("[\x00-\x1f\x7f]")  # one search, not a Python loop per character: every record is checked


def check_project(value: object) -> str:
    """value if it can name a project, else BadInput: text of 1 to 512 characters without
    control characters, and not `*` (which means every project, for reading only)."""
    if not isinstance(value, str):
        raise BadInput(f"project must be a string, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_PROJECT or value == ALL_PROJECTS or _CONTROL.search(value):
        shown = clipped(value, 80)
        raise BadInput(f"invalid project {shown!r}: use 1 to {MAX_PROJECT} characters, no control "
                       f"characters, not {ALL_PROJECTS!r}")
    return value



# Kept writes carry their project beside the record, never inside it: the outboxes' message
# ids and keys, and the Kafka messages' keys, are `project` SEPARATOR `id` (a project holds
# no control character, an id neither).
SEPARATOR = "\x1f"


def qualified(project: str, name: str) -> str:
    """name (an event, signal or ticket id) within its project, as kept writes key it."""
    return f"{project}{SEPARATOR}{name}"


def split_qualified(key: str) -> tuple[str | None, str]:
    """(project, name) of a qualified key; (None, key) for a key kept before projects."""
    project, separator, name = key.rpartition(SEPARATOR)
    return (project, name) if separator else (None, key)
