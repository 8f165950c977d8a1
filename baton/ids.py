"""Ticket ids and the deterministic ids derived from them."""

from __future__ import annotations

import re
import uuid

from baton.errors import BadInput

_TASK_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

# Fixed namespaces: changing one changes every id derived from it, so they never change.
CONFLICT_NAMESPACE = uuid.UUID("a1b2c3d4-e5f6-7890-abcd-ef1234567890")
BATON_NAMESPACE = uuid.UUID("6f1c2a3e-4b5d-5e6f-8a9b-0c1d2e3f4a5b")


def check_task_id(value: object) -> str:
    """Return value if it is a valid ticket id, else raise BadInput naming the problem."""
    if not isinstance(value, str):
        raise BadInput(f"task id must be a string, got {type(value).__name__}")
    if _TASK_ID.fullmatch(value) is None:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise BadInput(
            f"invalid task id {shown!r}: use 1 to 64 characters of letters, digits and . _ : -"
        )
    return value
