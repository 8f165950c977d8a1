"""Decisions on their way to the index, without pydantic: the point id and the queued
payload that `baton decide` builds on its hot path (baton.recall.base.DecisionRecord is the
validated form; tests/test_hot_path.py pins the two together)."""

from __future__ import annotations

import hashlib
import json
import uuid
from uuid import UUID


def decision_point_id(task_id: str, text: str) -> UUID:
    """One point per (ticket, decision text): recording a decision twice writes one point."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"{task_id}:{digest}")


def decision_payload(task_id: str, session_id: str, text: str, context: str, recorded_at: str, repo: str) -> str:
    """The JSON of a DecisionRecord, as the queue and the index store it."""
    return json.dumps({"task_id": task_id, "session_id": session_id, "text": text, "context": context,
                       "recorded_at": recorded_at, "repo": repo}, separators=(",", ":"), ensure_ascii=False)
