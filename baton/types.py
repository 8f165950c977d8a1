"""Validated field types for the pydantic boundary models."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from baton.errors import BadInput
from baton.ids import check_task_id


def _validate_task_id(value: str) -> str:
    try:
        return check_task_id(value)
    except BadInput as exc:
        raise ValueError(str(exc)) from None


TaskId = Annotated[str, AfterValidator(_validate_task_id)]
