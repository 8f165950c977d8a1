"""Answers that fit the client: a JSON answer within a character budget, whole and valid.

A client cuts a long tool result in the middle (Codex keeps about 12 KB, and what it keeps
of a JSON text no longer parses), so an answer over the budget is filled again in priority
order instead: what is not a list (status, state, next action) first, then each list in
its section's order (a resume: conflicts, live state, the journal, decisions, files,
signals), as many items of each as fit. A list recorded oldest first keeps its newest
items. `omitted` then says, per section, how many items there are and which are shown,
and `fetch` how to ask for the rest: resume_session (or `baton resume --json`) with
`section` and `offset` returns one section's items from offset on (page), again within
the budget, with the offset to ask for next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

STRING_LIMITS = (2000, 1000, 400, 160)  # a string cut to fit ends with CUT_MARK
CUT_MARK = "…[cut]"


@dataclass(frozen=True, slots=True)
class AnswerList:
    """A list of an answer: its name (what `section` asks for) and where it is."""

    name: str
    path: tuple[str, ...]
    newest_last: bool = False  # kept in the order recorded: its newest items are the ones shown
    detail: bool = False  # filled after every other list (the answer's own lists included)


# A resume's lists in the order they are filled (its other lists, such as compatibility,
# come before the details); what is not a list is never cut.
RESUME_SECTIONS: tuple[AnswerList, ...] = (
    AnswerList("conflicts", ("conflicts",)),
    AnswerList("live_state", ("live_state",)),
    AnswerList("failures", ("session", "failures"), newest_last=True),
    AnswerList("remaining_work", ("session", "remaining_work")),
    AnswerList("constraints", ("session", "constraints")),
    AnswerList("completed_steps", ("session", "completed_steps"), newest_last=True),
    AnswerList("checks", ("session", "checks"), newest_last=True),
    AnswerList("evidence", ("session", "evidence"), newest_last=True),
    AnswerList("depends_on", ("session", "depends_on")),
    AnswerList("decisions", ("session", "decisions"), newest_last=True, detail=True),
    AnswerList("related_decisions", ("related_decisions",), detail=True),
    AnswerList("files", ("session", "files_touched"), newest_last=True, detail=True),
    AnswerList("signals", ("signals",), newest_last=True, detail=True),
)


SECTION_NAMES = tuple(s.name for s in RESUME_SECTIONS)
RESUME_FETCH = ("resume_session again with section=NAME and offset=N (each omitted section's `next`) returns "
                "the items left out, a page at a time")
WHOLE_FETCH = "the matching `baton` command with --json prints the whole answer"


def resume_answer(answer: dict, budget: int, section: str | None = None, offset: int = 0) -> dict:
    """A resume within the budget: the answer filled in priority order, or (section) one
    page of a section from offset on."""
    if section is None:
        return fit_answer(answer, budget, sections=RESUME_SECTIONS, fetch=RESUME_FETCH)
    return page(answer, RESUME_SECTIONS, section, offset, budget)


def size(answer: Any) -> int:
    """Characters of the answer as a tool returns it (json.dumps, non-ASCII kept)."""
    return len(json.dumps(answer, ensure_ascii=False))


def fit_answer(answer: Any, budget: int, *, sections: tuple[AnswerList, ...] = (), fetch: str | None = None) -> Any:
    """The answer itself when it fits the budget; else as much of it as fits, filled in
    priority order, with `omitted` (and `fetch`, how to ask for the rest). A list answer
    that does not fit becomes {"items": [...], "omitted": ...}."""
    if size(answer) <= budget:
        return answer
    wrapped = isinstance(answer, list)
    whole = {"items": answer} if wrapped else dict(answer)
    declared = [s for s in sections if isinstance(_get(whole, s.path), list)]
    known = {s.path for s in declared}
    order = [s for s in declared if not s.detail]
    order += [AnswerList(".".join(path), path) for path in _lists(whole) if path not in known]
    order += [s for s in declared if s.detail]
    lists = {s.name: _get(whole, s.path) for s in order}
    shown = {s.name: 0 for s in order}

    def built(answer_lists: dict[str, int], strings: int | None) -> dict:
        out = _copy_containers(whole)
        for section in order:
            items = lists[section.name]
            count = answer_lists[section.name]
            kept = items[len(items) - count:] if section.newest_last and count else items[:count]
            _set(out, section.path, kept)
        cut = 0
        if strings is not None:
            out, cut = _cut_strings(out, strings, skip={s.path for s in order})
        note = {s.name: _note(s, len(lists[s.name]), answer_lists[s.name], pageable=s in sections) for s in order
                if answer_lists[s.name] < len(lists[s.name])}
        out["omitted"] = {**note, **({"strings_cut": cut} if cut else {})}
        if fetch and note:
            out["fetch"] = fetch
        return out

    strings: int | None = None
    if size(built(shown, None)) > budget:
        strings = next((limit for limit in STRING_LIMITS if size(built(shown, limit)) <= budget), None)
        if strings is None:
            return _least(whole, budget, fetch)
    for section in order:  # the most items of each section that fit, the earlier sections' kept (called at once)
        shown[section.name] = _most(len(lists[section.name]),
                                    lambda n: size(built({**shown, section.name: n}, strings)) <= budget)  # noqa: B023
    return built(shown, strings)


def page(answer: dict, sections: tuple[AnswerList, ...], name: str, offset: int, budget: int) -> dict:
    """One section's items from offset on, in the order recorded, as many as fit the budget;
    `next_offset` is where the next page starts (None: none left)."""
    from baton.errors import BadInput

    section = next((s for s in sections if s.name == name), None)
    if section is None:
        raise BadInput(f"unknown section {name!r}: one of {', '.join(s.name for s in sections)}")
    if offset < 0:
        raise BadInput("offset must be 0 or more")
    items = _get(answer, section.path)
    items = items if isinstance(items, list) else []
    head = {"status": answer.get("status"), "task_id": answer.get("task_id"), "section": name, "offset": offset,
            "total": len(items)}
    low = _most(len(items) - offset, lambda n: size({**head, "items": items[offset:offset + n],
                                                        "next_offset": offset + n}) <= budget)
    if low == 0 and offset < len(items):
        low = 1  # one item over the budget alone still comes: it is what was asked for
    end = offset + low
    return {**head, "items": items[offset:end], "next_offset": end if end < len(items) else None}


def _most(high: int, fits: Callable[[int], bool]) -> int:
    """The most items, up to high, that fit: a binary search (fewer items, a smaller answer)."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _note(section: AnswerList, total: int, shown: int, *, pageable: bool) -> dict:
    """How many items the section has, which are shown (from first_shown on), and, for a
    section page() serves, the page that starts with the first one left out."""
    first = total - shown if section.newest_last else 0
    note: dict[str, Any] = {"total": total, "shown": shown, "first_shown": first}
    if pageable:
        note["next"] = {"section": section.name, "offset": 0 if section.newest_last else shown}
    return note


def _least(whole: dict, budget: int, fetch: str | None) -> dict:
    """What is left when even the answer without its lists and long strings is over the
    budget: its status and ticket, and that the rest was left out."""
    least = {key: whole[key] for key in ("status", "task_id") if isinstance(whole.get(key), str | None)}
    least["omitted"] = {"answer": f"over the budget of {budget} characters"}
    if fetch:
        least["fetch"] = fetch
    return least


def _lists(answer: dict) -> Iterator[tuple[str, ...]]:
    """Where the answer holds lists: at its top and one object down."""
    for key, value in answer.items():
        if isinstance(value, list):
            yield (key,)
        elif isinstance(value, dict):
            for inner, item in value.items():
                if isinstance(item, list):
                    yield (key, inner)


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _set(data: dict, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _copy_containers(data: dict) -> dict:
    """A copy of the answer's top object and the objects in it (the lists are set anew)."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}


def _cut_strings(data: Any, limit: int, skip: set[tuple[str, ...]], path: tuple[str, ...] = ()) -> tuple[Any, int]:
    """data with every string longer than limit cut to it (CUT_MARK at the end), and how
    many were cut; the sections' lists (skip) are left as built."""
    if isinstance(data, str):
        return (data[:limit] + CUT_MARK, 1) if len(data) > limit else (data, 0)
    if path in skip:
        return data, 0
    if isinstance(data, dict):
        out, cut = {}, 0
        for key, value in data.items():
            out[key], count = _cut_strings(value, limit, skip, (*path, key))
            cut += count
        return out, cut
    if isinstance(data, list):
        pairs = [_cut_strings(item, limit, skip, (*path, "[]")) for item in data]
        return [item for item, _ in pairs], sum(count for _, count in pairs)
    return data, 0
