"""Lease patterns: gitignore patterns relative to a repository's root, matched by pathspec's
gitignore rules, and whether two of them overlap (some path could match both).

Overlap is decided on the patterns alone: each is split into segments, anchored as gitignore
anchors it, and one side at a time is extended by `/**` (what matches a directory matches
everything under it) unless its last segment ends in a literal extension (a file). Two
segment lists overlap when `**` may stand for any run of segments and each aligned pair of
segments has a common match, a character at a time. A set against a negated set is taken to
overlap: a false overlap refuses a claim its holder can release, a missed one lets two writers in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import TypeVar

from baton.errors import BadInput

MAX_PATTERN = 1000
_GLOB = set("*?[")
_FILE_NAME = re.compile(r".*\.[A-Za-z0-9_]{1,10}")  # ends in a literal extension: names files, not directories

Token = tuple[str, str, bool]  # (kind: lit, any, star, set; characters; negated)
_STAR: Token = ("star", "", False)
T = TypeVar("T")


def normal_pattern(raw: str) -> str:
    """A lease pattern as stored: stripped, `./` dropped. BadInput for an empty one, a
    negation (a lease names what it holds), a `..` segment, or one pathspec cannot read."""
    pattern = raw.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern or pattern in {".", "/"}:
        raise BadInput(f"empty lease pattern: {raw!r}")
    if len(pattern) > MAX_PATTERN:
        raise BadInput(f"lease pattern longer than {MAX_PATTERN} characters")
    if pattern.startswith("!"):
        raise BadInput(f"a lease pattern cannot be a negation: {raw!r}")
    if ".." in pattern.split("/"):
        raise BadInput(f"a lease pattern is relative to the repository's root, without '..': {raw!r}")
    if pattern.startswith("#"):
        raise BadInput(f"a lease pattern cannot start with '#' (gitignore reads a comment): {raw!r}")
    from pathspec.patterns.gitignore import GitIgnorePatternError
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    try:
        readable = GitIgnoreSpecPattern(pattern).regex is not None
    except (GitIgnorePatternError, ValueError) as exc:
        raise BadInput(f"not a gitignore pattern: {raw!r}: {exc}") from None
    if not readable:
        raise BadInput(f"a gitignore pattern that matches nothing: {raw!r}")
    return pattern


def matches(pattern: str, path: str) -> bool:
    """Whether repository-relative path falls under pattern (gitignore semantics: under a
    directory it matches too)."""
    return _spec(pattern).match_file(path)


@cache
def _spec(pattern: str):  # type: ignore[no-untyped-def]  # pathspec stays off this module's import
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines([pattern])


def overlap(first: str, second: str) -> bool:
    """Whether some path could match both patterns (symmetric)."""
    a, b = _segments(first), _segments(second)
    return _segments_overlap(_under(first, a), b) or _segments_overlap(a, _under(second, b))


@cache
def _segments(pattern: str) -> tuple[str, ...]:
    trimmed = pattern.rstrip("/")
    anchored = "/" in trimmed
    parts = [part for part in trimmed.lstrip("/").split("/") if part]
    if not anchored and parts[:1] != ["**"]:
        parts.insert(0, "**")
    # Runs of ** are one **.
    return tuple(part for i, part in enumerate(parts) if not (part == "**" and i and parts[i - 1] == "**"))


def _under(pattern: str, segments: tuple[str, ...]) -> tuple[str, ...]:
    """The segments of what pattern matches and everything under it, unless it names files."""
    if segments[-1] == "**" or (not pattern.endswith("/") and _FILE_NAME.fullmatch(segments[-1])):
        return segments
    return (*segments, "**")


def _overlapping(a: Sequence[T], b: Sequence[T], star: T, meet_one: Callable[[T, T], bool]) -> bool:
    """Whether a and b have a common match: an item equal to star stands for any run of the
    other's items (`**` of segments, `*` of characters), and two other items aligned must
    meet_one."""
    # Memoised by hand: a functools.cache made per call costs more than most calls do (a
    # claim's decision asks this of every lease it may overlap).
    known: dict[tuple[int, int], bool] = {}

    def meet(i: int, j: int) -> bool:
        if (i, j) not in known:
            known[i, j] = step(i, j)
        return known[i, j]

    def step(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == star and (meet(i + 1, j) or (j < len(b) and meet(i, j + 1))):
            return True
        if j < len(b) and b[j] == star and (meet(i, j + 1) or (i < len(a) and meet(i + 1, j))):
            return True
        return (i < len(a) and j < len(b) and a[i] != star and b[j] != star
                and meet_one(a[i], b[j]) and meet(i + 1, j + 1))

    return meet(0, 0)


def _segments_overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return _overlapping(a, b, "**", _segment_overlap)


def _segment_overlap(a: str, b: str) -> bool:
    plain_a, plain_b = _plain(a), _plain(b)
    if plain_a and plain_b:
        return a == b
    if plain_a or plain_b:  # a name against a glob: whether the glob matches it
        glob, name = (b, a) if plain_a else (a, b)
        return _segment_regex(glob).fullmatch(name) is not None
    return _overlapping(_tokens(a), _tokens(b), _STAR, _characters_meet)


def _characters_meet(a: Token, b: Token) -> bool:
    if a[0] == "any" or b[0] == "any":
        return True
    if a[2] and b[2]:
        return True
    if a[2] or b[2]:  # a negated set against some characters: one of them outside it
        negated, given = (a, b) if a[2] else (b, a)
        return bool(set(given[1]) - set(negated[1]))
    return bool(set(a[1]) & set(b[1]))


def _plain(segment: str) -> bool:
    """Whether the segment is a name: no glob character, no escape."""
    return not (_GLOB & set(segment) or "\\" in segment)


@cache
def _segment_regex(segment: str) -> re.Pattern[str]:
    parts = []
    for kind, characters, negated in _tokens(segment):
        if kind == "lit":
            parts.append(re.escape(characters))
        elif kind == "any":
            parts.append(".")
        elif kind == "star":
            parts.append(".*")
        elif characters:
            parts.append(f"[{'^' if negated else ''}{''.join(re.escape(c) for c in characters)}]")
        else:  # a negated set of nothing: any character
            parts.append(".")
    return re.compile("".join(parts), re.DOTALL)


@cache
def _tokens(segment: str) -> tuple[Token, ...]:
    tokens: list[Token] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "\\" and i + 1 < len(segment):
            tokens.append(("lit", segment[i + 1], False))
            i += 2
        elif c == "*":
            if not tokens or tokens[-1] != _STAR:
                tokens.append(_STAR)
            i += 1
        elif c == "?":
            tokens.append(("any", "", False))
            i += 1
        elif c == "[" and (end := segment.find("]", i + 2)) != -1:
            body = segment[i + 1:end]
            negated = body[:1] in {"!", "^"}
            tokens.append(("set", _expanded(body[1:] if negated else body), negated))
            i = end + 1
        else:
            tokens.append(("lit", c, False))
            i += 1
    return tuple(tokens)


def _expanded(body: str) -> str:
    """The characters of a set's body, ranges spelt out."""
    out: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            out.extend(chr(code) for code in range(ord(body[i]), ord(body[i + 2]) + 1))
            i += 3
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
