"""Typed coordination signals."""

# No `from __future__ import annotations`: pydantic would evaluate each annotation from its
# string (baton/registry/model.py says what that costs).

from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict

from baton.signals.wire import SignalType, derived_signal_id, file_subject, subjects_of, summary_of
from baton.types import TaskId

__all__ = ["Signal", "SignalPayload", "SignalType", "derived_signal_id", "file_subject"]


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
        return subjects_of(self.task_id, self.payload.related_task_id, self.repo, self.payload.file_paths)

    def to_json(self) -> str:
        return self.model_dump_json()

    def summary(self) -> str:
        return summary_of(self.signal_type, self.task_id, self.payload.reason, self.payload.related_task_id,
                          self.payload.file_paths)


