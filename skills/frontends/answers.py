"""The JSON answers of Baton's commands: what `baton ... --json` prints and what the MCP
tools return, built in one place so that the two never differ."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic import BaseModel

    from baton.skills.core.binding import ActiveTask, Place
    from baton.skills.core.write_report import WriteReport
    from baton.skills.services.decision_age import AgedDecision
    from baton.skills.services.listing import Listing
    from baton.skills.services.touch import TouchReport


def bind_answer(task_id: str, place: Place, report: WriteReport) -> dict:
    return {"task_id": task_id, "session_id": report.session_id, "worktree": str(place.root),
            "previous_task": report.previous_task, "warnings": report.warnings}


def touch_answer(task: ActiveTask, report: TouchReport) -> dict:
    new = {c.other_task_id for c in report.new_conflicts}
    return {"task_id": task.task_id, "files": [f.path for f in report.files],
            "conflicts": [{"other_task_id": c.other_task_id, "shared_files": report.conflict_paths[c.other_task_id],
                           "signal_id": str(c.signal_id), "new": c.other_task_id in new} for c in report.conflicts],
            "warnings": report.warnings}


def decide_answer(task: ActiveTask, text: str, context: str, report: WriteReport) -> dict:
    return {"task_id": task.task_id, "decision": text, "context": context.strip(), "warnings": report.warnings}


def update_answer(task: ActiveTask, report: WriteReport, **recorded: object) -> dict:
    """recorded: the fields the request carried; those it left empty are not shown."""
    return {"task_id": task.task_id, "recorded": {k: v for k, v in recorded.items() if v not in (None, [], ())},
            "warnings": report.warnings}


def end_answer(task: ActiveTask, status: str, report: WriteReport) -> dict:
    return {"task_id": task.task_id, "status": status, "warnings": report.warnings}


def listing_answer(listing: Listing) -> list[dict]:
    return [line.to_json() for line in listing.lines]


def signals_answer(signals: Sequence[BaseModel]) -> list[dict]:
    return [s.model_dump(mode="json") for s in signals]


def recall_answer(hits: Sequence[AgedDecision]) -> list[dict]:
    """One entry a result; the superseded decisions shown with a replacement are in its "replaces"."""
    return [{"task_id": a.hit.record.task_id, "text": a.hit.record.text, "context": a.hit.record.context,
             "score": round(a.hit.score, 4), "recorded_at": a.hit.record.recorded_at, "current": a.current,
             "marks": list(a.marks), "replaces": recall_answer(a.replaces)} for a in hits]
