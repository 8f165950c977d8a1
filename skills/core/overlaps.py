"""Overlaps between tickets and their conflict_detected signals, shared by the touch skill
(embedded default) and the projection of touches (servers). Imports no pydantic model
until a new overlap has to be signalled: the touch is the hook's hot path."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from baton.errors import StoreUnavailable
from baton.files import FileRef
from baton.graph.conflicts import FileConflict, should_emit_conflict_signal
from baton.outcome import Found
from baton.skills.core.binding import ActiveTask
from baton.skills.runtime.stores import Stores
from baton.store_names import Store


# A NamedTuple: a frozen dataclass costs a fresh process ~1 ms to define (docs/performance.md).
class Overlaps(NamedTuple):
    conflicts: list[FileConflict]
    paths: dict[str, list[str]]
    new: list[FileConflict]
    forks: dict[str, str]  # see fork_related


def fork_related(stores: Stores, task_id: str, others: Iterable[str]) -> dict[str, str]:
    """{other: "A is a fork of B"} for each of others that task_id was forked from or that
    was forked from task_id: their overlap is expected, shown as "fork of", not as a
    conflict. Read from the registry's signal scopes (no pydantic on SQLite); a ticket the
    registry cannot answer for counts as unrelated."""
    def parent(task: str) -> str | None:
        scope = stores.registry.signal_scope(task)
        return scope.value.fork_of if isinstance(scope, Found) else None

    others = sorted(set(others) - {task_id})
    if not others:
        return {}
    mine = parent(task_id)
    related = {}
    for other in others:
        if other == mine:
            related[other] = f"{task_id} is a fork of {other}"
        elif parent(other) == task_id:
            related[other] = f"{other} is a fork of {task_id}"
    return related


def conflicts_of(task_id: str, shared: dict[str, list[FileRef]]
                 ) -> tuple[list[FileConflict], dict[str, list[str]], dict[str, FileRef]]:
    """The conflicts of task_id given the files each other ticket shares with it, the
    shared paths per ticket, and the shared files by key."""
    by_key = {f.key: f for files in shared.values() for f in files}
    conflicts = should_emit_conflict_signal(
        {"task_id": task_id, "files_touched": list(by_key)},
        [{"task_id": other, "files_touched": [f.key for f in files]} for other, files in shared.items()])
    return conflicts, {other: [f.path for f in files] for other, files in shared.items()}, by_key


def signal_new_overlaps(stores: Stores, task: ActiveTask, touched: list[FileRef], at: datetime,
                        warnings: list[str]) -> Overlaps | None:
    """Look up task's overlaps and publish one conflict_detected per overlap that includes a
    touched file; `new` holds those the signal log had not seen (all of them if it is down).
    None when the graph cannot answer; failures are added to warnings."""
    shared = stores.graph.shared_files(task.task_id)
    if not isinstance(shared, Found):
        warnings.append(f"conflict graph unavailable: {shared.reason}")
        return None
    conflicts, paths, by_key = conflicts_of(task.task_id, shared.value)
    candidates = _touching(conflicts, touched)
    published = _publish_new(stores, [(task, c, by_key, at) for c in candidates], warnings) if candidates else []
    forks = fork_related(stores, task.task_id, (c.other_task_id for c in published)) if published else {}
    return Overlaps(conflicts, paths, published, forks)


def signal_overlaps_of(stores: Stores, touches: Sequence[tuple[ActiveTask, Sequence[FileRef], datetime]],
                       warnings: list[str], *, strict: bool = False,
                       shared: dict[str, dict[str, list[FileRef]]] | None = None) -> list[FileConflict]:
    """signal_new_overlaps for many tickets at once (the projection of a batch): one read
    of the graph (none when `shared` gives what shared_files_of the tickets answers) and
    one publish; returns the overlaps signalled that the signal log had not seen. Failures
    are added to warnings; strict (the projector), a graph or outbox that fails raises
    StoreUnavailable."""
    if not touches:
        return []
    if shared is None:
        read = stores.graph.shared_files_of([task.task_id for task, _, _ in touches])
        if not isinstance(read, Found):
            if strict:
                raise StoreUnavailable(Store.CONFLICT_GRAPH, read.reason)
            warnings.append(f"conflict graph unavailable: {read.reason}")
            return []
        shared = read.value
    candidates: dict[str, tuple[ActiveTask, FileConflict, dict[str, FileRef], datetime]] = {}
    for task, touched, at in touches:
        conflicts, _, by_key = conflicts_of(task.task_id, shared.get(task.task_id, {}))
        for conflict in _touching(conflicts, touched):
            candidates.setdefault(str(conflict.signal_id), (task, conflict, by_key, at))
    if not candidates:
        return []
    if strict:
        return keep_unknown(stores, list(candidates.values()))
    return _publish_new(stores, list(candidates.values()), warnings)


def _touching(conflicts: list[FileConflict], touched: Sequence[FileRef]) -> list[FileConflict]:
    keys = {ref.key for ref in touched}
    return [c for c in conflicts if keys.intersection(c.shared_files)]


Candidate = tuple[ActiveTask, FileConflict, dict[str, FileRef], datetime]  # a conflict, its ticket, files by key, time


def _publish_new(stores: Stores, candidates: list[Candidate], warnings: list[str]) -> list[FileConflict]:
    """Publish the conflicts that the signal log has not seen; returns those it had not
    seen (all of them if it is down)."""
    try:
        known = stores.signals.known([str(c.signal_id) for _, c, _, _ in candidates])
        candidates = [entry for entry in candidates if str(entry[1].signal_id) not in known]
        return _keep(stores, candidates)
    except StoreUnavailable as exc:
        warnings.append(str(exc))
        return [c for _, c, _, _ in candidates]


def keep_unknown(stores: Stores, candidates: list[Candidate]) -> list[FileConflict]:
    """Keep the signals of the conflicts that the signal log has not seen (Sink.keep_signals);
    returns those conflicts. Raises StoreUnavailable."""
    known = stores.signals.known([str(c.signal_id) for _, c, _, _ in candidates])
    return _keep(stores, [entry for entry in candidates if str(entry[1].signal_id) not in known])


def _keep(stores: Stores, candidates: list[Candidate]) -> list[FileConflict]:
    if not candidates:
        return []
    from baton.skills.core.signalling import conflict_signal

    signals = [conflict_signal(c, task, [by_key[k] for k in c.shared_files], at) for task, c, by_key, at in candidates]
    fresh = stores.sink.keep_signals(signals)
    return [c for (_, c, _, _), new in zip(candidates, fresh, strict=True) if new]
