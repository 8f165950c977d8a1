"""A conflict graph seen from one project (baton.projects): any backend, unchanged, holds
every project's tickets under their qualified ids (`project`, a separator, the ticket id),
and this view writes and reads only its project's. A file two projects both touch (one
repository under two explicit projects) is never a conflict between them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from baton.files import FileRef
from baton.graph.base import ConflictGraph, TicketRecord
from baton.projects import check_project, qualified, split_qualified


class ProjectGraph(ConflictGraph):
    def __init__(self, graph: ConflictGraph, project: str) -> None:
        self.graph = graph
        self.project = check_project(project)
        self._scope = qualified(self.project, "")  # every id of this project starts with it

    def _in(self, task_id: str) -> str:
        return qualified(self.project, task_id)

    def _ours(self, key: str) -> str | None:
        """The ticket id of a qualified key of this project, else None."""
        project, task_id = split_qualified(key)
        return task_id if project == self.project else None

    def _record_rows(self, records: Sequence[TicketRecord]) -> list[tuple[str, str, str, str]] | None:
        rows = self.graph._record_rows([
            TicketRecord(self._in(r.task_id), r.status, r.files, r.at,
                         session_id=None if r.session_id is None else self._in(r.session_id),
                         depends_on=[self._in(d) for d in r.depends_on]) for r in records])
        return None if rows is None else self._ours_of(rows)

    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        return self.graph.touch(self._in(task_id), files, at)

    def _shared_rows(self, task_id: str, partners: int, scope: str = "") -> list[tuple[str, str, str]]:
        return [(other, repo, path) for key, repo, path in self.graph._shared_rows(self._in(task_id), partners,
                                                                                     self._scope)
                if (other := self._ours(key)) is not None]

    def _shared_rows_of(self, task_ids: list[str], among: bool, scope: str = "") -> list[tuple[str, str, str, str]]:
        return self._ours_of(self.graph._shared_rows_of([self._in(t) for t in task_ids], among, self._scope))

    def _ours_of(self, rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
        """Rows of shared files (ticket, other, repo, path) between this project's tickets."""
        return [(task, other, repo, path) for mine, key, repo, path in rows
                if (task := self._ours(mine)) is not None and (other := self._ours(key)) is not None]

    def _toucher_rows(self, files: list[FileRef], scope: str = "") -> list[tuple[str, str, str, str]]:
        return [(repo, path, task, at) for repo, path, key, at in self.graph._toucher_rows(files, self._scope)
                if (task := self._ours(key)) is not None]

    def _summary_rows(self, sample: int, expected: list[tuple[str, str]], task_ids: list[str] | None,
                      scope: str = "") -> list[tuple[str, int, int, list[str]]]:
        rows = self.graph._summary_rows(sample, [(self._in(a), self._in(b)) for a, b in expected],
                                        None if task_ids is None else [self._in(t) for t in task_ids], self._scope)
        return [(task, files, tickets, [other for key in partners if (other := self._ours(key)) is not None])
                for mine, files, tickets, partners in rows if (task := self._ours(mine)) is not None]

    def _kept_rows(self, task_ids: list[str] | None, scope: str = "", *,
                   at_most: int | None = None) -> list[tuple[str, int, int]] | None:
        rows = self.graph._kept_rows(None if task_ids is None else [self._in(t) for t in task_ids], self._scope,
                                     at_most=at_most)
        if rows is None:
            return None
        # Every key answered starts with this project's scope (asked by it, or in its range).
        start = len(self._scope)
        return [(key[start:], files, tickets) for key, files, tickets in rows]

    def _sample_rows(self, task_ids: list[str], sample: int, scope: str = "") -> dict[str, list[str]]:
        found = self.graph._sample_rows([self._in(t) for t in task_ids], sample, self._scope)
        return {task: [other for key in partners if (other := self._ours(key)) is not None]
                for mine, partners in found.items() if (task := self._ours(mine)) is not None}

    def counted(self) -> bool:
        return self.graph.counted()

    def recount(self) -> int:
        return self.graph.recount()

    def _under_rows(self, repo: str, prefix: str, scope: str = "") -> list[tuple[str, str]]:
        return [(task, path) for key, path in self.graph._under_rows(repo, prefix, self._scope)
                if (task := self._ours(key)) is not None]

    def _held_rows(self, task_ids: list[str]) -> list[tuple[str, str, str | None, str | None]]:
        return [(task, status, repo, path) for key, status, repo, path in self.graph._held_rows(
            [self._in(t) for t in task_ids]) if (task := self._ours(key)) is not None]

    def _held_count_rows(self, task_ids: list[str]) -> list[tuple[str, str, int]]:
        return [(task, status, files) for key, status, files in self.graph._held_count_rows(
            [self._in(t) for t in task_ids]) if (task := self._ours(key)) is not None]

    def forget(self, task_ids: Sequence[str]) -> None:
        self.graph.forget([self._in(t) for t in task_ids])

    def describe(self) -> dict[str, str]:
        return self.graph.describe()

    def close(self) -> None:
        self.graph.close()
