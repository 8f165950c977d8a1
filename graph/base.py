"""The conflict graph interface: tickets, the files they touched, and who is active."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from baton import clock
from baton.backend import Backend
from baton.files import FileRef
from baton.outcome import Found, Unavailable, answering
from baton.projects import qualified, split_qualified


# NamedTuples, not dataclasses: a fresh `baton touch` or hook defines them, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class ConflictSummary(NamedTuple):
    """How much an active ticket conflicts, counted in the store (no pair leaves it)."""

    files: int  # its files that another active ticket touches too
    tickets: int  # the other active tickets sharing at least one file with it
    sample: tuple[str, ...]  # the first few of those tickets, by id


class TicketRecord(NamedTuple):
    """One ticket's part of a batch write (the arguments of ConflictGraph.record)."""

    task_id: str
    status: str
    files: Sequence[FileRef]
    at: datetime
    session_id: str | None = None
    depends_on: Sequence[str] = ()


def project_prefix(task_id: str) -> str:
    """The start every id of the ticket's project has (baton.projects; empty for an id kept
    before projects): the kept counts count tickets of one project together only."""
    project, _ = split_qualified(task_id)
    return "" if project is None else qualified(project, "")


def id_range(scope: str) -> tuple[str, str]:
    """The ids that start with scope, as a range (after, before): a project's scope ends with
    a separator (baton.projects), and no id holds U+10FFFF (the bound of every id)."""
    return scope, (scope[:-1] + chr(ord(scope[-1]) + 1) if scope else "\U0010ffff")


def count_moves(before: Mapping[str, set[str]], after: Mapping[str, set[str]],
                others: Mapping[str, Mapping[str, Collection[str]]]
                ) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """How the kept conflict counts move for tickets written together: `before` and `after`,
    the files (keys) each actively touched before the write and after it (none while it is
    not active); `others`, for each of them and each file it touches, the other active
    tickets of its project that touch it, after the write. Answers the written tickets'
    counts (files, tickets), counted afresh, and by how much each other ticket's move: only
    the written tickets changed, so another's relation to each of them is all that moved."""
    written = set(before)
    counts = {}
    for task in written:
        mine = others.get(task, {})
        shared = [f for f in after[task] if mine.get(f)]
        counts[task] = (len(shared), len({other for f in shared for other in mine[f]}))
    moves: dict[str, list[int]] = {}
    for task in written:
        mine = others.get(task, {})
        then = {other for f in before[task] for other in mine.get(f, ())} - written
        now = {other for f in after[task] for other in mine.get(f, ())} - written
        for other in now ^ then:
            moves.setdefault(other, [0, 0])[1] += 1 if other in now else -1
    # A file's other touchers see it shared while any ticket but themselves touches it.
    untouched: dict[tuple[str, str], set[str]] = {}  # a file's touchers not written, by project
    written_then: dict[tuple[str, str], int] = {}
    written_now: dict[tuple[str, str], int] = {}
    for task in written:
        for f, touchers in others.get(task, {}).items():
            key = (project_prefix(task), f)
            untouched.setdefault(key, set()).update(set(touchers) - written)
            written_then[key] = written_then.get(key, 0) + (f in before[task])
            written_now[key] = written_now.get(key, 0) + (f in after[task])
    for key, touchers in untouched.items():
        beside = len(touchers) - 1
        for other in touchers:
            moves.setdefault(other, [0, 0])[0] += (beside + written_now[key] > 0) - (beside + written_then[key] > 0)
    return counts, {other: (f, t) for other, (f, t) in moves.items() if f or t}


def _shared_by_ticket(rows: Sequence[tuple[str, str, str, str]]) -> dict[str, dict[str, list[FileRef]]]:
    """Rows (ticket, other, repo, path), sorted, as {ticket: {other: files}}."""
    shared: dict[str, dict[str, list[FileRef]]] = {}
    for task, other, repo, path in rows:
        shared.setdefault(task, {}).setdefault(other, []).append(FileRef(repo=repo, path=path))
    return shared


class ConflictGraph(Backend):
    """Writes raise StoreUnavailable; reads answer Found or Unavailable.

    Backends implement the row queries; the grouping into answers is shared here.
    """

    def record(self, task_id: str, status: str, files: Sequence[FileRef], at: datetime, *,
               session_id: str | None = None, depends_on: Sequence[str] = ()) -> None:
        """Set the ticket's status and add touches of files (idempotent), in one transaction:
        record_many of one ticket.

        session_id and depends_on become edges where the backend is a graph database; the
        embedded backend answers conflicts only and leaves them to the registry.
        """
        self.record_many([TicketRecord(task_id, status, files, at, session_id, depends_on)])

    def record_many(self, records: Sequence[TicketRecord]) -> dict[str, dict[str, list[FileRef]]] | None:
        """record() for each ticket; a graph database writes them in one transaction. Answers
        what shared_files_of the written tickets would, as the write left them, where the
        backend read it on the way (a graph database keeping its counts, for a write that
        moved some ticket's activity); else None, and the caller asks shared_files_of."""
        rows = self._record_rows(records)
        return None if rows is None else _shared_by_ticket(rows)

    @abstractmethod
    def _record_rows(self, records: Sequence[TicketRecord]) -> list[tuple[str, str, str, str]] | None:
        """record_many's write; the rows of _shared_rows_of the written tickets when read on the way."""

    @abstractmethod
    def touch(self, task_id: str, files: Sequence[FileRef], at: datetime) -> bool:
        """Add touches of files; a stalled or unknown ticket becomes active, a completed one
        stays completed. Returns whether the ticket is active."""

    @answering
    def shared_files(self, task_id: str, *, partners: int | None = None
                     ) -> Found[dict[str, list[FileRef]]] | Unavailable:
        """For each other active ticket (the first `partners` by id, when given), the files
        it shares with task_id.

        Cost grows with task_id's own files and their active sharers, never with the
        number of sessions.
        """
        if partners is None:
            return Found(_shared_by_ticket(self._shared_rows_of([task_id], False)).get(task_id, {}))
        shared: dict[str, list[FileRef]] = {}
        for other, repo, path in self._shared_rows(task_id, partners):
            shared.setdefault(other, []).append(FileRef(repo=repo, path=path))
        return Found(shared)

    @answering
    def shared_files_of(self, task_ids: Collection[str], *, among: bool = False
                        ) -> Found[dict[str, dict[str, list[FileRef]]]] | Unavailable:
        """shared_files() of each of task_ids, {task: {other: files}}, in one read; a ticket
        that shares nothing is absent. With `among`, only the files two active tickets of
        task_ids share (both ways): cost follows the given tickets' files, so a caller bounds
        it by asking about a bounded set (the tickets a map shows)."""
        return Found(_shared_by_ticket(self._shared_rows_of(sorted(set(task_ids)), among) if task_ids else []))

    @answering
    def touchers(self, files: Sequence[FileRef], *, exclude: str | None = None
                 ) -> Found[dict[FileRef, list[tuple[str, datetime]]]] | Unavailable:
        """For each of files that another active ticket touched (not `exclude`), those
        tickets and when each last touched it, by ticket id: what an edit is checked against
        before it happens. Cost follows the files asked about and their active touchers."""
        found: dict[FileRef, list[tuple[str, datetime]]] = {}
        for repo, path, task, at in self._toucher_rows(list(dict.fromkeys(files))) if files else []:
            if task != exclude:
                found.setdefault(FileRef(repo=repo, path=path), []).append((task, clock.parse(at)))
        return Found(found)

    @answering
    def touchers_under(self, repo: str, prefix: str, *, exclude: str | None = None
                       ) -> Found[dict[str, list[str]]] | Unavailable:
        """The active tickets (not `exclude`) that touched files of repo whose path starts
        with prefix, and those paths: what a lease of a pattern under prefix may cover
        (baton.skills.core.path_patterns decides which it does). Cost follows those files."""
        found: dict[str, list[str]] = {}
        for task, path in self._under_rows(repo, prefix):
            if task != exclude:
                found.setdefault(task, []).append(path)
        return Found(found)

    @answering
    def held(self, task_ids: Collection[str]) -> Found[dict[str, tuple[str, set[str]]]] | Unavailable:
        """For each of task_ids the graph holds, its status and the keys of the files it
        touched (what `baton doctor --repair` compares with the registry)."""
        held: dict[str, tuple[str, set[str]]] = {}
        for task, status, repo, path in self._held_rows(sorted(set(task_ids))) if task_ids else []:
            files = held.setdefault(task, (status, set()))[1]
            if path is not None:
                files.add(FileRef(repo=repo or "", path=path).key)
        return Found(held)

    @answering
    def held_counts(self, task_ids: Collection[str]) -> Found[dict[str, tuple[str, int]]] | Unavailable:
        """For each of task_ids the graph holds, its status and how many files it touched:
        one row per ticket, what repair compares before it reads any ticket's files."""
        rows = self._held_count_rows(sorted(set(task_ids))) if task_ids else []
        return Found({task: (status, files) for task, status, files in rows})

    @answering
    def conflict_summaries(self, *, sample: int, expected: Collection[tuple[str, str]] = (),
                           task_ids: Collection[str] | None = None
                           ) -> Found[dict[str, ConflictSummary]] | Unavailable:
        """Every active ticket that shares files with another (or those of task_ids that
        do): how many files, how many tickets, and up to `sample` of those tickets.

        Aggregated in the store, one ticket at a time: memory holds one ticket's partners,
        never the pairs. A pair in `expected` (a fork and its parent, either order) is
        no conflict and is left out of both counts.
        """
        both_ways = sorted({pair for a, b in expected for pair in ((a, b), (b, a))})
        asked = None if task_ids is None else sorted(set(task_ids))
        kept = None if asked is None else self._kept_rows(asked)
        if kept is None or asked is None:
            rows = self._summary_rows(sample, both_ways, asked)
        else:
            # The kept counts hold a fork's expected overlap: those tickets are counted here.
            involved = sorted({task for pair in expected for task in pair}.intersection(asked))
            rows = self._summary_rows(sample, both_ways, involved) if involved else []
            rest = [(task, files, tickets) for task, files, tickets in kept if files and task not in involved]
            found = self._sample_rows([task for task, _, _ in rest], sample) if sample and rest else {}
            rows += [(task, files, tickets, found.get(task, [])) for task, files, tickets in rest]
        return Found({task: ConflictSummary(files=files, tickets=tickets, sample=tuple(sorted(partners)[:sample]))
                      for task, files, tickets, partners in rows if files})

    @answering
    def conflict_counts(self, task_ids: Collection[str] | None = None, *,
                        at_most: int | None = None) -> Found[dict[str, tuple[int, int]]] | Unavailable:
        """Every active ticket that shares files with another (or those of task_ids that
        do; without task_ids, at most at_most of them, any): (files, tickets) as
        conflict_summaries counts them, except that a fork's overlap with its parent counts
        too. Read from the counts kept at write time where the backend keeps them (one row
        per ticket in conflict), else counted now, as conflict_summaries does."""
        asked = None if task_ids is None else sorted(set(task_ids))
        if asked == []:
            return Found({})
        kept = self._kept_rows(asked, at_most=None if asked else at_most)
        rows = ([(task, files, tickets) for task, files, tickets, _ in self._summary_rows(0, [], asked)]
                if kept is None else kept)
        found = {task: (files, tickets) for task, files, tickets in rows if files}
        if asked is None and at_most is not None and len(found) > at_most:
            found = dict(list(found.items())[:at_most])
        return Found(found)

    @abstractmethod
    def counted(self) -> bool:
        """Whether the conflict counts kept at write time are whole (False: the backend keeps
        none, or a graph from before them waits for recount). Raises StoreUnavailable."""

    @abstractmethod
    def recount(self) -> int:
        """Count every ticket's conflicts again and keep them from now on (doctor --repair,
        a projector's start); answers how many tickets were counted, 0 where the backend
        keeps no counts. Raises StoreUnavailable."""

    @abstractmethod
    def _kept_rows(self, task_ids: list[str] | None, scope: str = "", *,
                   at_most: int | None = None) -> list[tuple[str, int, int]] | None:
        """(task, conflicting files, conflicting tickets) per active ticket (of task_ids, when
        given; else those with files only, at most at_most of them) from the counts kept at
        write time, forks' expected overlap included; None when they are not kept (counted()
        is False)."""

    @abstractmethod
    def _sample_rows(self, task_ids: list[str], sample: int, scope: str = "") -> dict[str, list[str]]:
        """Up to `sample` of the active tickets sharing files with each of task_ids (the first
        found: a backend need not read every partner), by ticket."""

    # scope: a prefix of task ids (a project's, baton.graph.projects): the other tickets
    # counted, and the tickets summarised, are those whose id starts with it ("": every one).
    @abstractmethod
    def _shared_rows(self, task_id: str, partners: int, scope: str = "") -> list[tuple[str, str, str]]:
        """(other task, repo, path) for each file task_id shares with the first `partners`
        other active tickets by id, ordered by other task."""

    @abstractmethod
    def _shared_rows_of(self, task_ids: list[str], among: bool, scope: str = "") -> list[tuple[str, str, str, str]]:
        """(task, other task, repo, path) for each file a task of task_ids shares with another
        active ticket, ordered; with `among`, the task active and the other one of task_ids."""

    @abstractmethod
    def _toucher_rows(self, files: list[FileRef], scope: str = "") -> list[tuple[str, str, str, str]]:
        """(repo, path, task, last touched, as clock.to_text) for each active ticket's touch of
        one of files, ordered by repo, path and task."""

    @abstractmethod
    def _summary_rows(self, sample: int, expected: list[tuple[str, str]], task_ids: list[str] | None,
                      scope: str = "") -> list[tuple[str, int, int, list[str]]]:
        """(task, conflicting files, conflicting tickets, the first `sample` of them by id)
        per active ticket (of task_ids, when given), pairs in `expected` left out; a ticket
        without conflicts may be left out or given 0 files."""

    @abstractmethod
    def _under_rows(self, repo: str, prefix: str, scope: str = "") -> list[tuple[str, str]]:
        """(task, path) for each active ticket's touch of a file of repo whose path starts
        with prefix, ordered by path and task."""

    @abstractmethod
    def _held_rows(self, task_ids: list[str]) -> list[tuple[str, str, str | None, str | None]]:
        """(task, status, repo, path) for each file a task of task_ids touched, and (task,
        status, None, None) for one that touched none; tasks the graph lacks are absent."""

    @abstractmethod
    def _held_count_rows(self, task_ids: list[str]) -> list[tuple[str, str, int]]:
        """(task, status, files touched) for each task of task_ids the graph holds."""

    @abstractmethod
    def forget(self, task_ids: Sequence[str]) -> None:
        """Remove those tickets and their touches (their sessions were pruned), and the
        files no ticket touches any more. Raises StoreUnavailable."""
