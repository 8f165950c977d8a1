"""The conflict graph interface: tickets, the files they touched, and who is active."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.outcome import Found, Unavailable


@dataclass(frozen=True, slots=True)
class TicketRecord:
    """One ticket's part of a batch write (the arguments of ConflictGraph.record)."""

    task_id: str
    status: str
    files: Sequence[FileRef]
    at: datetime
    session_id: str | None = None
    depends_on: Sequence[str] = ()


class ConflictGraph(ABC):
    """Writes raise StoreUnavailable; reads answer Found or Unavailable.

    Backends implement the row queries; the grouping into answers is shared here.
    """

    @abstractmethod
    def record(self, task_id: str, status: str, files: Sequence[FileRef], at: datetime, *,
               session_id: str | None = None, depends_on: Sequence[str] = ()) -> None:
        """Set the ticket's status and add touches of files (idempotent).

        session_id and depends_on become edges where the backend is a graph database; the
        embedded backend answers conflicts only and leaves them to the registry.
        """

    def record_many(self, records: Sequence[TicketRecord]) -> None:
        """record() for each ticket; a graph database writes them in one transaction."""
        for r in records:
            self.record(r.task_id, r.status, r.files, r.at, session_id=r.session_id, depends_on=r.depends_on)

    @abstractmethod
    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        """Add touches of files; a stalled or unknown ticket becomes active, a completed one
        stays completed. Returns whether the ticket is active."""

    def shared_files(self, task_id: str) -> Found[dict[str, list[FileRef]]] | Unavailable:
        """For each other active ticket, the files it shares with task_id.

        Cost grows with task_id's own files and their sharers, never with the number of
        sessions.
        """
        try:
            rows = self._shared_rows(task_id)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        shared: dict[str, list[FileRef]] = {}
        for other, repo, path in rows:
            shared.setdefault(other, []).append(FileRef(repo=repo, path=path))
        return Found(shared)

    def shared_files_of(self, task_ids: Sequence[str]) -> Found[dict[str, dict[str, list[FileRef]]]] | Unavailable:
        """shared_files() of each of task_ids, {task: {other: files}}, in one read where the
        backend can; a ticket that shares nothing is absent."""
        try:
            rows = self._shared_rows_of(task_ids)
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        shared: dict[str, dict[str, list[FileRef]]] = {}
        for task, other, repo, path in rows:
            shared.setdefault(task, {}).setdefault(other, []).append(FileRef(repo=repo, path=path))
        return Found(shared)

    def _shared_rows_of(self, task_ids: Sequence[str]) -> list[tuple[str, str, str, str]]:
        """(task, other task, repo, path) for each file a task of task_ids shares with
        another active ticket."""
        return [(task_id, *row) for task_id in task_ids for row in self._shared_rows(task_id)]

    def active_overlaps(self) -> Found[dict[str, dict[str, list[FileRef]]]] | Unavailable:
        """Every active ticket that shares files with another: {task: {other: files}}."""
        try:
            rows = self._overlap_rows()
        except StoreUnavailable as exc:
            return Unavailable(exc.reason)
        overlaps: dict[str, dict[str, list[FileRef]]] = {}
        for task, other, repo, path in rows:
            overlaps.setdefault(task, {}).setdefault(other, []).append(FileRef(repo=repo, path=path))
        return Found(overlaps)

    @abstractmethod
    def _shared_rows(self, task_id: str) -> list[tuple[str, str, str]]:
        """(other task, repo, path) for each file task_id shares with another active ticket."""

    @abstractmethod
    def _overlap_rows(self) -> list[tuple[str, str, str, str]]:
        """(task, other task, repo, path) for each file two active tickets share."""

    @abstractmethod
    def forget(self, task_ids: Sequence[str]) -> None:
        """Remove those tickets and their touches (their sessions were pruned), and the
        files no ticket touches any more. Raises StoreUnavailable."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Backend, location, server version and a size, read from the store itself.

        Raises StoreUnavailable when it does not answer (what `baton doctor` shows).
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections."""
