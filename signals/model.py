"""Typed coordination signals."""

from __future__ import annotations

import uuid
from enum import StrEnum
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict

from baton.ids import BATON_NAMESPACE
from baton.types import TaskId


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


class SignalPayload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    file_paths: list[str] = []
    related_task_id: TaskId | None = None
    pr_number: int | None = None
    phase: str | None = None
    reason: str = ""


class Signal(BaseModel):
    """One coordination signal. emitted_at is always given by the emitter, never defaulted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    signal_id: UUID
    signal_type: SignalType
    task_id: TaskId
    session_id: str
    repo: str
    emitted_at: AwareDatetime
    payload: SignalPayload

    def subjects(self) -> list[str]:
        """What this signal is about: its tickets and files, as indexable subject keys."""
        found = {f"task:{self.task_id}"}
        if self.payload.related_task_id:
            found.add(f"task:{self.payload.related_task_id}")
        found.update(file_subject(self.repo, path) for path in self.payload.file_paths)
        return sorted(found)

    def summary(self) -> str:
        """One line for people: who, what, about which files."""
        parts = [self.payload.reason] if self.payload.reason else []
        if self.payload.related_task_id and not self.payload.reason:
            parts.append(f"with {self.payload.related_task_id}")
        if self.payload.file_paths and not self.payload.reason:
            parts.append(", ".join(self.payload.file_paths))
        return f"{self.signal_type.value} from {self.task_id}" + (f": {' '.join(parts)}" if parts else "")


def file_subject(repo: str, path: str) -> str:
    return f"file:{repo}:{path}" if repo else f"file:{path}"


def derived_signal_id(signal_type: SignalType, source: str) -> UUID:
    """Deterministic id from the event that caused the signal, so a replay emits nothing new."""
    return uuid.uuid5(BATON_NAMESPACE, f"{signal_type.value}:{source}")
