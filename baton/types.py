"""Validated field types for the pydantic boundary models."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated

from pydantic import AfterValidator

from baton.errors import BadInput
from baton.ids import parse_ticket_id
from baton.projects import check_project


def _validator(check: Callable[[str], str]) -> AfterValidator:
    """check (which raises BadInput) as pydantic expects a validator to fail: ValueError."""
    def validate(value: str) -> str:
        try:
            return check(value)
        except BadInput as exc:
            raise ValueError(str(exc)) from None

    return AfterValidator(validate)


# The models also read stored records: the ids of earlier versions stay readable. Every edge
# that takes an id parses it with parse_ticket_id first.
TaskId = Annotated[str, _validator(partial(parse_ticket_id, stored=True))]
Project = Annotated[str, _validator(check_project)]
