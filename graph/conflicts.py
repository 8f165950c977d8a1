"""Pure conflict detection: which other tickets share files with this one, and the signal id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from baton.ids import CONFLICT_NAMESPACE, name_uuid_text


# A NamedTuple, not a dataclass: a fresh `baton touch` or hook defines it, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class FileConflict(NamedTuple):
    other_task_id: str
    shared_files: list[str]
    signal_id: str  # a UUID's text: a touch derives it without the uuid module (baton.ids.name_uuid_text)


def conflict_signal_id(task_a: str, task_b: str, shared_files: Iterable[str]) -> str:
    """The same id whichever side computes it: the pair and the files are sorted first."""
    low, high = sorted((task_a, task_b))
    return name_uuid_text(CONFLICT_NAMESPACE, f"{low}:{high}:{','.join(sorted(shared_files))}")


def _file_set(task: Mapping, role: str) -> set[str]:
    files = task.get("files_touched") or ()
    if isinstance(files, (str, bytes)):
        raise TypeError(f"{role} files_touched must be a collection of paths, not a single string")
    return set(files)


def should_emit_conflict_signal(current_task: Mapping, other_tasks: Iterable[Mapping]) -> list[FileConflict]:
    """One FileConflict per other ticket sharing files with current_task, self skipped.

    Tasks are mappings with "task_id" and "files_touched". A ticket listed twice is
    reported once, with the union of its files.
    """
    current_id = current_task.get("task_id")
    if not current_id:
        raise ValueError("current_task needs a task_id")
    mine = _file_set(current_task, "current_task")
    if not mine:
        return []
    shared_by_task: dict[str, set[str]] = {}
    for other in other_tasks:
        other_id = other.get("task_id")
        if not other_id or other_id == current_id:
            continue
        overlap = mine & _file_set(other, f"task {other_id}")
        if overlap:
            shared_by_task.setdefault(other_id, set()).update(overlap)
    return [
        FileConflict(other_task_id=other_id, shared_files=sorted(files),
                     signal_id=conflict_signal_id(current_id, other_id, files))
        for other_id, files in shared_by_task.items()
    ]
