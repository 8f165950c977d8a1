"""Text from outside Baton: refused where it enters holding a control character, shown as data.

Every text a command or an MCP tool is given (an argument, a path, a decision) may hold tabs
and line breaks and no other C0 or C1 control (check_text): a NUL or an escape in a stored
decision could only ever reach a reader as an escape.

Journal entries, decisions, file names, signal reasons and probe output come from agents,
branches and the file system. Wherever Baton shows them as text (the resume, the hooks'
context, `baton list`, `baton signals`, `baton recall`, the handoff document, stderr),
each value goes through one_line and behind a marker of Baton's own (`- [reported] `,
`Next action: `, a time): it then cannot open a section, a list item or a fence, nor pose
as Baton's own output. Control characters are escaped, so the text can neither drive a
terminal nor reorder what is read: ANSI escapes and the rest of C0 and C1, Unicode line
and paragraph separators, and the bidirectional embeddings, overrides and isolates.

JSON answers keep the stored text as it is: json.dumps escapes line breaks and C0
controls, and json_for_terminal escapes the rest of the set above, as JSON escapes (the
same data once parsed).
"""

from __future__ import annotations

import re

from baton.errors import BadInput

_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0 and C1 but tab, line feed, return
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # what json.dumps leaves raw


def check_text(label: str, value: str) -> None:
    """BadInput naming label when value holds a control character other than a tab or a
    line break."""
    found = _REFUSED.search(value)
    if found is not None:
        code = "NUL" if found[0] == "\x00" else f"\\x{ord(found[0]):02x}"
        raise BadInput(f"{label} holds a control character ({code}): text may hold tabs and line breaks, no other")


def escape_controls(text: str) -> str:
    """Control characters as visible escapes (`\\x1b`, `\\u202e`); tabs and newlines kept."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def clipped(text: str, size: int) -> str:
    """text cut to at most size characters, the cut marked by an ellipsis."""
    return text if len(text) <= size else text[:size - 1] + "…"


def one_line(text: str) -> str:
    """text as one line: every run of whitespace (line breaks and separators included) one
    space, control characters escaped."""
    return escape_controls(" ".join(text.split()))


def json_for_terminal(text: str) -> str:
    """JSON text from json.dumps(ensure_ascii=False) with the controls it leaves raw written
    as \\u escapes. They can only occur inside strings, where the escape means the same."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
