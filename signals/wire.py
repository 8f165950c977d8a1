"""Signals without pydantic: their kinds, their subjects, their one-line summary, and the
stored JSON form for the hooks' hot paths: a touch that finds a new overlap publishes a
hand-built conflict_detected signal, and the prompt hook reads signals in this form.

baton.signals.model.Signal is the validated form; a WireSignal stores and reads the same
JSON, which tests/test_hot_path.py pins to the model's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from baton.ids import BATON_NAMESPACE, name_uuid, name_uuid_text

if TYPE_CHECKING:
    from uuid import UUID


class SignalType(StrEnum):
    conflict_detected = "conflict_detected"
    ticket_claimed = "ticket_claimed"
    ticket_completed = "ticket_completed"
    files_changed = "files_changed"
    phase_changed = "phase_changed"
    decision_recorded = "decision_recorded"
    rebase_needed = "rebase_needed"
    pr_merged = "pr_merged"
    handoff_written = "handoff_written"


def derived_signal_id(signal_type: SignalType, source: str) -> UUID:
    """Deterministic id from the event that caused the signal, so a replay emits nothing new."""
    return name_uuid(BATON_NAMESPACE, f"{signal_type.value}:{source}")


def derived_signal_text(signal_type: SignalType, source: str) -> str:
    """str(derived_signal_id(signal_type, source)), without the uuid module (WireSignal's id)."""
    return name_uuid_text(BATON_NAMESPACE, f"{signal_type.value}:{source}")


def file_subject(repo: str, path: str) -> str:
    return f"file:{repo}:{path}" if repo else f"file:{path}"


def subjects_of(task_id: str, related_task_id: str | None, repo: str, file_paths: Sequence[str]) -> list[str]:
    """What a signal is about: its tickets and files, as indexable subject keys."""
    found = {f"task:{task_id}"}
    if related_task_id:
        found.add(f"task:{related_task_id}")
    found.update(file_subject(repo, path) for path in file_paths)
    return sorted(found)


def summary_of(signal_type: SignalType, task_id: str, reason: str, related_task_id: str | None,
               file_paths: Sequence[str]) -> str:
    """One line for people: who, what, about which files."""
    parts = [reason] if reason else []
    if related_task_id and not reason:
        parts.append(f"with {related_task_id}")
    if file_paths and not reason:
        parts.append(", ".join(file_paths))
    return f"{signal_type.value} from {task_id}" + (f": {' '.join(parts)}" if parts else "")


# A NamedTuple, not a dataclass: a fresh `baton touch` defines it, and a frozen dataclass's
# generated methods cost a fresh process about 1 ms a class (Python 3.11).
class WireSignal(NamedTuple):
    """A signal as every backend stores it."""

    signal_id: str  # the UUID's text, as stored: the hooks' paths never import the uuid module
    signal_type: SignalType
    task_id: str
    session_id: str
    repo: str
    emitted_at: datetime
    file_paths: tuple[str, ...]
    related_task_id: str | None
    reason: str
    pr_number: int | None = None
    phase: str | None = None

    @classmethod
    def from_json(cls, text: str) -> WireSignal:
        """A stored signal, read back without validation (Baton validated it when storing it)."""
        from baton import clock

        data = json.loads(text)
        payload = data["payload"]
        return cls(signal_id=data["signal_id"], signal_type=SignalType(data["signal_type"]),
                   task_id=data["task_id"], session_id=data["session_id"], repo=data["repo"],
                   emitted_at=clock.parse(data["emitted_at"]), file_paths=tuple(payload["file_paths"]),
                   related_task_id=payload["related_task_id"], reason=payload["reason"],
                   pr_number=payload["pr_number"], phase=payload["phase"])

    def subjects(self) -> list[str]:
        return subjects_of(self.task_id, self.related_task_id, self.repo, self.file_paths)

    def summary(self) -> str:
        return summary_of(self.signal_type, self.task_id, self.reason, self.related_task_id, self.file_paths)

    def to_json(self) -> str:
        return json.dumps({
            "signal_id": self.signal_id, "signal_type": self.signal_type.value, "task_id": self.task_id,
            "session_id": self.session_id, "repo": self.repo, "emitted_at": self.emitted_at.isoformat(),
            "payload": {"file_paths": list(self.file_paths), "related_task_id": self.related_task_id,
                        "pr_number": self.pr_number, "phase": self.phase, "reason": self.reason},
        }, separators=(",", ":"), ensure_ascii=False)
