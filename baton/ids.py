"""Ticket ids and the deterministic ids derived from them."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, NewType

from baton.errors import BadInput
from baton.shown_text import clipped

if TYPE_CHECKING:
    from uuid import UUID

# Not led by `.`, `-` or `:`, which make `..`, `-x` or `:` pass for a path or an option. Stored
# records are read by the rule of the versions before, which took them (parse_ticket_id).
_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:-]{0,63}")
_STORED_TASK_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

# A ticket id parse_ticket_id accepted: parsed once where it enters (a command's argument, a
# tool's, the binding file) and carried as this type, so nothing past the edge checks it again.
TicketId = NewType("TicketId", str)

# Fixed namespaces: changing one changes every id derived from it, so they never change.
CONFLICT_NAMESPACE = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
BATON_NAMESPACE = "6f1c2a3e-4b5d-5e6f-8a9b-0c1d2e3f4a5b"


def random_uuid() -> str:
    """A new random (version 4) UUID as text, what str(uuid.uuid4()) gives. Written out
    because the hooks' paths need nothing else of the uuid module, whose import costs a fresh
    process 2.4 ms on Python 3.11 (it imports platform): `python -X importtime -c "import uuid"`."""
    return _uuid_text(bytearray(os.urandom(16)), 4)


def name_uuid(namespace: str, name: str) -> UUID:
    """The version 5 UUID of name in namespace: the same for the same name, everywhere."""
    import uuid

    return uuid.uuid5(uuid.UUID(namespace), name)


def name_uuid_text(namespace: str, name: str) -> str:
    """str(name_uuid(namespace, name)), written out as random_uuid is, for the hooks' paths:
    the first 16 bytes of the SHA-1 of the namespace's bytes and the name (RFC 4122)."""
    import hashlib

    digest = hashlib.sha1(bytes.fromhex(namespace.replace("-", "")) + name.encode(), usedforsecurity=False).digest()
    return _uuid_text(bytearray(digest[:16]), 5)


def _uuid_text(raw: bytearray, version: int) -> str:
    raw[6] = raw[6] & 0x0F | version << 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def parse_ticket_id(value: object, *, stored: bool = False) -> TicketId:
    """value as a TicketId if it is a valid ticket id, else BadInput naming the problem.
    stored: an id in a stored record (the models), which an earlier version may have taken."""
    if not isinstance(value, str):
        raise BadInput(f"task id must be a string, got {type(value).__name__}")
    if (_STORED_TASK_ID if stored else _TASK_ID).fullmatch(value) is None:
        shown = clipped(value, 80)
        raise BadInput(
            f"invalid task id {shown!r}: use 1 to 64 characters of letters, digits and . _ : -, "
            "not starting with . - or :"
        )
    return TicketId(value)
