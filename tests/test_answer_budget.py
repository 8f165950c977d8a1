"""Answers within a character budget: always whole JSON, filled in priority order, saying
what was left out (skills/frontends/answer_budget.py)."""

import json

import pytest

from baton.errors import BadInput
from baton.skills.frontends.answer_budget import RESUME_SECTIONS, fit_answer, page, resume_answer, size


def test_an_answer_that_fits_is_unchanged():
    answer = {"status": "found", "session": {"files_touched": ["a.py"]}}
    assert fit_answer(answer, 2000, sections=RESUME_SECTIONS) is answer


def test_a_list_answer_over_the_budget_keeps_its_first_rows_and_says_how_many():
    rows = [{"task_id": f"OMN-{n}", "files": [f"src/{n}.py"]} for n in range(500)]
    fitted = fit_answer(rows, 3000, fetch="the CLI")
    assert size(fitted) <= 3000 and fitted["items"] == rows[:len(fitted["items"])]
    assert fitted["omitted"]["items"]["total"] == 500 and fitted["fetch"] == "the CLI"
    assert "next" not in fitted["omitted"]["items"], "only a resume's sections can be paged"


def test_long_strings_are_cut_when_nothing_else_is_left_to_cut():
    answer = {"status": "found", "task_id": "OMN-1", "reason": "x" * 9000, "session": {"next_action": "y" * 9000}}
    fitted = fit_answer(answer, 4000, sections=RESUME_SECTIONS)
    assert size(fitted) <= 4000 and fitted["omitted"]["strings_cut"] == 2
    assert fitted["reason"].endswith("…[cut]") and fitted["task_id"] == "OMN-1"


def test_what_cannot_fit_at_all_still_parses_and_says_so():
    answer = {"status": "found", "task_id": "OMN-1", **{f"k{n}": n for n in range(2000)}}
    fitted = fit_answer(answer, 2000)
    assert size(fitted) <= 2000 and fitted["task_id"] == "OMN-1" and "over the budget" in fitted["omitted"]["answer"]


def test_a_page_of_a_section_and_its_bad_input():
    answer = {"status": "found", "task_id": "OMN-1", "session": {"files_touched": [f"f{n}.py" for n in range(3000)]}}
    first = resume_answer(answer, 2000, "files")
    assert size(first) <= 2000 and first["items"][0] == "f0.py" and first["next_offset"] == len(first["items"])
    with pytest.raises(BadInput, match="unknown section 'nope'"):
        page(answer, RESUME_SECTIONS, "nope", 0, 2000)
    with pytest.raises(BadInput, match="offset must be 0 or more"):
        page(answer, RESUME_SECTIONS, "files", -1, 2000)
    assert json.loads(json.dumps(page(answer, RESUME_SECTIONS, "files", 5000, 2000)))["items"] == []
