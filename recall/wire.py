"""Decisions on their way to the index, without pydantic: the point id and the queued
payload that `baton decide` builds on its hot path (baton.recall.base.DecisionRecord is the
validated form; tests/test_hot_path.py pins the two together)."""

from __future__ import annotations

import hashlib
import json
import uuid
from uuid import UUID

from baton.projects import qualified


def decision_point_id(project: str, task_id: str, text: str) -> UUID:
    """One point per (project, ticket, decision text): recording a decision twice writes one
    point, and the same ticket id in two projects is two points: the id of the qualified ticket's."""
    return unscoped_point_id(qualified(project, task_id), text)


def unscoped_point_id(task_id: str, text: str) -> UUID:
    """The id a point had before projects (of its ticket and text only): what the index's
    healing (baton.skills.core.indexing.heal_unscoped) looks up to reuse its vector."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"{task_id}:{digest}")


def decision_payload(project: str, task_id: str, session_id: str, text: str, context: str, recorded_at: str,
                     repo: str) -> str:
    """The JSON of a DecisionRecord, as the queue and the index store it."""
    return json.dumps({"project": project, "task_id": task_id, "session_id": session_id, "text": text,
                       "context": context, "recorded_at": recorded_at, "repo": repo},
                      separators=(",", ":"), ensure_ascii=False)
