"""The binding file: `.baton/active_session.yaml` at the worktree root.

It is the authority on which ticket a worktree works on; BATON_TASK_ID and
BATON_SESSION_ID are derived from it (`baton env`), never the other way round. The file is
a flat YAML mapping of JSON-quoted strings, so it is read without a YAML library.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.files import Worktree, WorktreeLocator, write_whole
from baton.ids import TicketId, parse_ticket_id
from baton.store_names import Store

BINDING_DIR = ".baton"
BINDING_FILE = "active_session.yaml"
_FIELDS = ("task_id", "session_id", "bound_at", "agent")


# NamedTuples: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Binding(NamedTuple):
    task_id: TicketId
    session_id: str
    bound_at: datetime
    agent: str | None = None


class Place(NamedTuple):
    """Where a command runs: the worktree root (or the directory, outside git) and its repo."""

    root: Path
    worktree: Worktree | None

    @property
    def repo(self) -> str:
        return self.worktree.repo if self.worktree else str(self.root)

    @property
    def binding_path(self) -> Path:
        return self.root / BINDING_DIR / BINDING_FILE


def place_of(cwd: Path, locator: WorktreeLocator) -> Place:
    worktree = locator.locate(cwd)
    return Place(worktree.root if worktree else Path(os.path.realpath(cwd)), worktree)


def read_binding(place: Place) -> Binding | None:
    """The binding of this worktree, None if unbound; BadInput if the file is unreadable."""
    path = place.binding_path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read binding file {path}: {exc}") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, raw = line.partition(":")
        raw = raw.strip()
        try:
            value = json.loads(raw) if raw.startswith('"') else raw
        except json.JSONDecodeError:
            value = None
        if not sep or key.strip() not in _FIELDS or not isinstance(value, str):
            raise BadInput(f"binding file {path} line {number} is not understood; run `baton bind TASK` to rewrite it")
        values[key.strip()] = value
    try:
        return Binding(
            task_id=parse_ticket_id(values["task_id"]),
            session_id=values["session_id"],
            bound_at=clock.parse(values["bound_at"]),
            agent=values.get("agent") or None,
        )
    except (KeyError, ValueError, BadInput) as exc:
        raise BadInput(f"binding file {path} is invalid ({exc}); run `baton bind TASK` to rewrite it") from None


def write_binding(place: Place, binding: Binding) -> Path:
    """Write the binding atomically and keep `.baton/` out of git through info/exclude.
    StoreUnavailable when the worktree cannot take it (a full disk, a read-only tree): the
    binding it had stays as it was."""
    path = place.binding_path
    lines = ["# Written by `baton bind`: the ticket this worktree works on."]
    for key, value in (("task_id", binding.task_id), ("session_id", binding.session_id),
                       ("bound_at", clock.to_text(binding.bound_at)), ("agent", binding.agent)):
        if value is not None:
            lines.append(f"{key}: {json.dumps(value)}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # .baton/: private, whatever the umask
        write_whole(path, "\n".join(lines) + "\n")
    except OSError as exc:
        raise StoreUnavailable(Store.BINDING_FILE, f"cannot write {path}: {exc.strerror or exc}") from None
    if place.worktree is not None and place.worktree.common_dir is not None:
        _exclude_from_git(place.worktree.common_dir)
    return path


def _exclude_from_git(common_dir: Path) -> None:
    """Add `/.baton/` to the repository's info/exclude, shared by all its worktrees."""
    exclude = common_dir / "info" / "exclude"
    pattern = f"/{BINDING_DIR}/"
    try:
        existing = exclude.read_text(encoding="utf-8")
    except FileNotFoundError:
        existing = ""
    if pattern in existing.splitlines():
        return
    try:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as out:
            if existing and not existing.endswith("\n"):
                out.write("\n")
            out.write(f"{pattern}\n")
    except OSError as exc:
        raise StoreUnavailable(Store.BINDING_FILE, f"cannot keep {BINDING_DIR}/ out of git in {exclude}: "
                                               f"{exc.strerror or exc}") from None


class ActiveTask(NamedTuple):
    task_id: TicketId
    session_id: str
    source: str


def resolve_task(explicit: str | None, place: Place, ambient: tuple[str | None, str | None] = (None, None)
                 ) -> ActiveTask:
    """--task, else the worktree's binding file, else the ambient ticket: (BATON_TASK_ID,
    BATON_SESSION_ID) as the settings read them (Settings.task_id and session_id)."""
    binding = read_binding(place)
    ambient_task, ambient_session = ambient
    if explicit is not None:
        task_id = parse_ticket_id(explicit)
        session = binding.session_id if binding and binding.task_id == task_id else ambient_session or DEFAULT_SESSION
        return ActiveTask(task_id, check_session_id(session), "--task")
    if binding is not None:
        return ActiveTask(binding.task_id, check_session_id(binding.session_id), str(place.binding_path))
    if ambient_task:
        return ActiveTask(parse_ticket_id(ambient_task), check_session_id(ambient_session or DEFAULT_SESSION),
                          "BATON_TASK_ID")
    raise BadInput("no task: pass --task TASK, run `baton bind TASK` in this worktree, or set BATON_TASK_ID")


DEFAULT_SESSION = "cli"  # the session of a write outside any binding
MAX_SESSION_ID = 128  # baton.registry.model.SessionId


def check_session_id(session_id: str) -> str:
    """session_id if the event models take it, else BadInput: the writes that build their
    events by hand (kept for a delivery) must never keep one a delivery would refuse."""
    if not 1 <= len(session_id) <= MAX_SESSION_ID:
        raise BadInput(f"session id must be 1 to {MAX_SESSION_ID} characters, got {len(session_id)}")
    return session_id

