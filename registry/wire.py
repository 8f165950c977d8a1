"""Events on the wire: the stored JSON form every registry backend reads and writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

from baton.files import FileRef

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from baton.registry.model import Event


@cache
def event_adapter() -> TypeAdapter[Event]:
    """Validates and dumps any registry event (pydantic is imported on first use only)."""
    from pydantic import TypeAdapter

    from baton.registry.model import Event

    return TypeAdapter(Event)


def event_of(event_type: str, body: str) -> Event:
    """An event's model read by its type's own model (see EVENT_MODELS); a type this version
    does not know is left to the union's validator, which says why it cannot read it."""
    from baton.registry.model import EVENT_MODELS

    model = EVENT_MODELS.get(event_type)
    return model.model_validate_json(body) if model else event_adapter().validate_json(body)  # type: ignore[return-value]


def event_in(body: str) -> Event:
    """An event's model read from its JSON alone, by the type it names (event_of): a command
    reading a few events does not build the union's validator (about 50 ms)."""
    try:
        event_type = json.loads(body).get("type")
    except (ValueError, AttributeError):  # not an object: the union's validator says why
        event_type = None
    return event_of(event_type if isinstance(event_type, str) else "", body)


def event_body(event_type: str, *, event_id: str, task_id: str, session_id: str, at: datetime, **fields: object) -> str:
    """The JSON of one registry event of event_type, built without pydantic: a write kept
    for delivery never pays for importing the models. The caller gives exactly the model's
    fields, already valid (tests/test_outages.py pins each form the writes build). Its time
    reads as the model writes it (UTC as Z): an event stores the same bytes on either path."""
    return json.dumps({"event_id": event_id, "task_id": task_id, "session_id": session_id,
                       "at": at.isoformat().replace("+00:00", "Z"),
                       "type": event_type, **fields}, separators=(",", ":"), ensure_ascii=False)


def files_touched_body(event_id: str, task_id: str, session_id: str, at: datetime, files: Sequence[FileRef]) -> str:
    """The JSON of a FilesTouched event, for the hook's hot path (tests/test_hot_path.py pins it)."""
    return event_body("files_touched", event_id=event_id, task_id=task_id, session_id=session_id, at=at,
                      files=[{"repo": f.repo, "path": f.path} for f in files])

