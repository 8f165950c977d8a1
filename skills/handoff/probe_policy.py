"""Which probes of a handoff may run: the security boundary of re-verification.

A probe runs when its signature holds (Baton wrote it with a key configured here), when
its command matches the allowlist (Baton's own read-only git probes, plus the patterns in
`[handoff] allow` of baton.toml), or when the user passed --allow-unsigned-probes.
Otherwise it is not run, and the reason says which rule refused it.

An allowlist pattern is a command in shell-style words, matched word by word with
fnmatch-style wildcards (`*`, `?`, `[...]`) inside a word; a word starting with `-` (an
option, which may make a command write files: `git log --output=FILE`) matches only a
pattern word starting with `-`. A last word `**` matches any further words, options
included. `pytest -q` allows exactly that; `pytest -q **` allows any arguments after.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from baton.skills.handoff.files import HANDOFFS_DIR
from baton.skills.handoff.probe_signing import SigningKey, check

# The live-state probes `baton handoff` writes for every worktree. They only read git's
# state (with GIT_OPTIONAL_LOCKS=0 they do not even refresh the index), so they may run
# even unsigned, e.g. from a handoff written on another machine. Handoff documents are
# left out: committing a handoff neither moves the recorded HEAD nor dirties the tree.
GIT_STATE_PROBES: dict[str, tuple[str, ...]] = {
    "Branch": ("git", "rev-parse", "--abbrev-ref", "HEAD"),
    "HEAD commit": ("git", "log", "-1", "--format=%H %s", "--", ".", f":(exclude){HANDOFFS_DIR}"),
    "Dirty files": ("git", "status", "--porcelain=v1", "--untracked-files=all", "--", ".", f":(exclude){HANDOFFS_DIR}"),
}


@dataclass(frozen=True, slots=True)
class Permission:
    run: bool
    basis: str  # why it may run, or why not
    signed: bool = False  # it may run because its signature holds


def _word_matches(word: str, pattern: str) -> bool:
    # An option (`--output=FILE`) can change what a command does: only a pattern word that
    # is itself an option may match one.
    return fnmatchcase(word, pattern) and (not word.startswith("-") or pattern.startswith("-"))


def matches(pattern: tuple[str, ...], argv: tuple[str, ...]) -> bool:
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return len(argv) >= len(head) and all(_word_matches(word, p) for word, p in zip(argv, head, strict=False))
    return len(argv) == len(pattern) and all(_word_matches(word, p) for word, p in zip(argv, pattern, strict=True))


def allowlisted(argv: tuple[str, ...], allow: tuple[tuple[str, ...], ...]) -> str | None:
    """Why argv may run without a signature (one of Baton's read-only git probes, or a
    pattern of `[handoff] allow`); None when nothing allows it."""
    if argv in GIT_STATE_PROBES.values():
        return "Baton's read-only git probe"
    if any(matches(pattern, argv) for pattern in allow):
        return "allowed by [handoff] allow"
    return None


@dataclass(frozen=True, slots=True)
class ProbePolicy:
    keys: tuple[SigningKey, ...]
    allow: tuple[tuple[str, ...], ...]
    allow_unsigned: bool = False

    def permit(self, argv: tuple[str, ...], message: bytes, signature: str | None) -> Permission:
        signed = check(signature, message, list(self.keys))
        if signed.holds:
            return Permission(True, signed.reason, signed=True)
        allowed = allowlisted(argv, self.allow)
        if allowed:
            return Permission(True, f"{signed.reason}; {allowed}")
        if self.allow_unsigned:
            return Permission(True, f"{signed.reason}; run because of --allow-unsigned-probes")
        return Permission(False, f"{signed.reason} and not allowlisted ([handoff] allow in baton.toml); "
                                 "--allow-unsigned-probes would run it")
