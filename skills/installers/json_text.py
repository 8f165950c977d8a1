"""Edit a JSON document's text in place, one member or element at a time.

Agents' settings files belong to their users: their order, spacing, escapes and line
endings must survive Baton's edits. So nothing here re-serialises a document. A parse
records where each value starts and ends; an insertion adds text after the last member
(or inside an empty container), and a removal deletes exactly the text such an insertion
added. Appending then removing the same member gives back the document byte for byte.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # public at run time, not in typeshed
from typing import Any, NoReturn

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_INDENT = re.compile(r"[ \t]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass
class Node:
    """A JSON value and its span [start, end) in the text; containers list their parts."""

    start: int
    end: int
    value: Any
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays

    @property
    def is_object(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_array(self) -> bool:
        return isinstance(self.value, list)

    def member(self, key: str) -> Member | None:
        return next((m for m in reversed(self.members) if m.key == key), None)


@dataclass
class Member:
    key: str
    start: int  # where the key's opening quote is
    value: Node

    @property
    def end(self) -> int:
        return self.value.end


def parse(text: str) -> Node:
    """The document's root value with spans; ValueError (json.JSONDecodeError) if it is not JSON."""
    json.loads(text, parse_constant=_not_json)  # the standard parser's error messages, and strictness, first
    node, end = _value(text, _skip(text, 0))
    return node


def _not_json(word: str) -> NoReturn:
    """NaN and Infinity: Python's json reads them, JSON (and Claude Code) does not."""
    raise ValueError(f"{word} is not JSON")


def _skip(text: str, at: int) -> int:
    return _span(_WHITESPACE, text, at).end()


def _span(pattern: re.Pattern[str], text: str, at: int) -> re.Match[str]:
    """pattern's match at `at`, where it cannot fail: it matches the empty string, or parse()
    checked the text is JSON first."""
    match = pattern.match(text, at)
    assert match is not None, f"{pattern.pattern} does not match at {at}"
    return match


def _value(text: str, at: int) -> tuple[Node, int]:
    char = text[at]
    if char == "{":
        return _object(text, at)
    if char == "[":
        return _array(text, at)
    if char == '"':
        value, end = scanstring(text, at + 1)
        return Node(at, end, value), end
    for word, value in _LITERALS.items():
        if text.startswith(word, at):
            return Node(at, at + len(word), value), at + len(word)
    match = _span(_NUMBER, text, at)
    return Node(at, match.end(), json.loads(match.group())), match.end()


def _object(text: str, at: int) -> tuple[Node, int]:
    node = Node(at, at, {})
    position = _skip(text, at + 1)
    while text[position] != "}":
        key, after_key = scanstring(text, position + 1)
        value, end = _value(text, _skip(text, _skip(text, after_key) + 1))
        node.members.append(Member(key, position, value))
        node.value[key] = value.value
        position = _skip(text, end)
        if text[position] == ",":
            position = _skip(text, position + 1)
    node.end = position + 1
    return node, node.end


def _array(text: str, at: int) -> tuple[Node, int]:
    node = Node(at, at, [])
    position = _skip(text, at + 1)
    while text[position] != "]":
        item, end = _value(text, position)
        node.items.append(item)
        node.value.append(item.value)
        position = _skip(text, end)
        if text[position] == ",":
            position = _skip(text, position + 1)
    node.end = position + 1
    return node, node.end


@dataclass(frozen=True)
class Style:
    """How the document is laid out, so inserted text looks like its neighbours."""

    newline: str  # "\n" or "\r\n"
    unit: str  # one level of indentation
    multiline: bool  # a non-empty document written on one line gets one-line insertions

    @classmethod
    def of(cls, text: str, root: Node) -> Style:
        newline = "\r\n" if "\r\n" in text else "\n"
        first = root.members[0].start if root.members else None
        unit = _line_indent(text, first) if first is not None and _breaks(text, root.start, first) else ""
        # An empty root object (a new file, or `{}`) is laid out like a file written by an editor.
        return cls(newline, unit or "  ", "\n" in text.strip() or not root.members)


def append_member(text: str, obj: Node, key: str, value: Any, style: Style) -> str:
    """The text with `"key": value` added as obj's last member."""
    rendered = f"{json.dumps(key, ensure_ascii=False)}: "
    return _append(text, obj, obj.members[-1].end if obj.members else None,
                   obj.members[0].start if obj.members else None, rendered, value, style)


def append_item(text: str, array: Node, value: Any, style: Style) -> str:
    """The text with value added as array's last element."""
    return _append(text, array, array.items[-1].end if array.items else None,
                   array.items[0].start if array.items else None, "", value, style)


def _append(text: str, container: Node, last_end: int | None, first_start: int | None, prefix: str,
            value: Any, style: Style) -> str:
    outer = _line_indent(text, container.start)
    if last_end is not None:
        if first_start is None or not _breaks(text, container.start, first_start):  # one line stays one line
            return text[:last_end] + ", " + prefix + _compact(value) + text[last_end:]
        inner = _line_indent(text, first_start)
        return text[:last_end] + "," + style.newline + inner + prefix + _render(value, inner, style) + text[last_end:]
    opened = container.start + 1
    if not style.multiline:
        return text[:opened] + prefix + _compact(value) + text[opened:]
    inner = outer + style.unit
    added = style.newline + inner + prefix + _render(value, inner, style) + style.newline + outer
    return text[:opened] + added + text[opened:]


def remove(text: str, container: Node, index: int) -> str:
    """The text without the container's index-th member or element: the exact inverse of
    an append for the last one, and a clean cut with its separator for any other."""
    parts = [(m.start, m.end) for m in container.members] if container.is_object \
        else [(i.start, i.end) for i in container.items]
    start, end = parts[index]
    if index > 0:
        return text[:parts[index - 1][1]] + text[end:]
    if len(parts) > 1:
        return text[:start] + text[parts[1][0]:]
    opened = container.start + 1
    closing = _span(_WHITESPACE, text, end).end()
    tail = text[end:closing]
    outer = _line_indent(text, container.start)
    for newline in ("\r\n", "\n"):
        if tail.startswith(newline + outer):
            return text[:opened] + text[end + len(newline + outer):]
    return text[:opened] + text[end:]


def new_document(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _render(value: Any, indent: str, style: Style) -> str:
    lines = json.dumps(value, indent=style.unit, ensure_ascii=False).split("\n")
    return (style.newline + indent).join(lines)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _line_indent(text: str, at: int) -> str:
    """The whitespace that starts the line holding position `at`."""
    return _span(_INDENT, text, text.rfind("\n", 0, at) + 1).group()


def _breaks(text: str, start: int, end: int | None) -> bool:
    return end is not None and "\n" in text[start:end]
