"""Which probes of a handoff may run: the security boundary of re-verification.

A probe runs when its signature holds (Baton wrote it with a key configured here), when its
command matches the allowlist (Baton's own read-only git probes, plus `[handoff] allow`), or
with --allow-unsigned-probes; otherwise the reason says which rule refused it.

An allowlist pattern is shell-style words matched word by word against the probe's argument
vector, with fnmatch wildcards inside a word; a word starting with `-` matches only a pattern
word starting with `-`, and a last word `**` matches any further words. An option that makes
the program write a file, run another program or act on another repository
(DANGEROUS_OPTIONS, per program) is admitted only by a pattern word that names it
(`--output=*`), never by `**` or a wildcard option word (`-*`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class Dangerous:
    anywhere: tuple[str, ...] = ()
    leading: tuple[str, ...] = ()  # dangerous only before the program's subcommand
    of_subcommand: dict[str, tuple[str, ...]] = field(default_factory=dict)  # only after that subcommand


# Options of any program that write or run what their value names.
_ANY_PROGRAM = ("--output", "--output-file", "--output-dir", "--output-directory", "--exec", "--log-file")
DANGEROUS_OPTIONS: dict[str, Dangerous] = {
    # -c/-C before the subcommand set configuration (core.pager, core.fsmonitor: programs)
    # or move to another repository; after it they are harmless diff options. A short option
    # is dangerous only for the subcommands where it is (grep -O runs a pager, -o and -x are
    # harmless to git status or log). --textconv is not here: git log and diff run text
    # conversion by default, from the user's own configuration.
    "git": Dangerous(
        anywhere=(*_ANY_PROGRAM, "--extcmd", "--tool", "--upload-pack", "--receive-pack", "--ext-diff",
                  "--open-files-in-pager", "--config-env", "--git-dir", "--work-tree", "--exec-path", "--namespace",
                  "--super-prefix", "--template", "--separate-git-dir"),
        leading=("-c", "-C"),
        of_subcommand={"grep": ("-O",), "format-patch": ("-o",), "rebase": ("-x",), "difftool": ("-x",),
                       "clone": ("-u",), "archive": ("-o",)}),
    # Plugins and configuration are code; the rest write files where their value says.
    "pytest": Dangerous(anywhere=(*_ANY_PROGRAM, "-p", "-c", "--config-file", "-o", "--override-ini", "--rootdir",
                                  "--confcutdir", "--basetemp", "--junitxml", "--junit-xml", "--debug",
                                  "--report-log", "--resultlog", "--pastebin")),
}


def _names(word: str, option: str) -> bool:
    if option.startswith("--"):
        name = word.partition("=")[0]
        # Long options may be abbreviated (argparse, git's parse-options): a prefix counts.
        return word.startswith("--") and len(name) > 2 and option.startswith(name)
    # A short option may carry its value (-oFILE) or come bundled with others (-po).
    return not word.startswith("--") and word.startswith("-") and option[1] in word[1:]


def _pattern_names(pattern: str, option: str) -> bool:
    """Does this pattern word name the option in full before any wildcard (`--output=*`, `-o`)?"""
    head = pattern[:min((i for i, c in enumerate(pattern) if c in "*?["), default=len(pattern))]
    if option.startswith("--"):
        return head.partition("=")[0] == option
    return head.startswith(option)


def _dangerous(argv: tuple[str, ...]) -> tuple[str, ...]:
    """For each word of argv, the dangerous option it gives ('' for none)."""
    table = DANGEROUS_OPTIONS.get(os.path.basename(argv[0]) if argv else "", Dangerous(anywhere=_ANY_PROGRAM))
    found, options = [""], (*table.leading, *table.anywhere)
    subcommand = None
    for word in argv[1:]:
        if subcommand is None and not word.startswith("-"):
            subcommand = word
            options = (*table.anywhere, *table.of_subcommand.get(word, ()))
        found.append(next((option for option in options if _names(word, option)), ""))
    return tuple(found)


def _word_matches(word: str, pattern: str, dangerous: str) -> bool:
    # An option (`--output=FILE`) can change what a command does: only a pattern word that
    # is itself an option may match one, and a dangerous one only a word that names it.
    if not fnmatchcase(word, pattern) or (word.startswith("-") and not pattern.startswith("-")):
        return False
    return not dangerous or pattern == word or _pattern_names(pattern, dangerous)


def matches(pattern: tuple[str, ...], argv: tuple[str, ...]) -> bool:
    dangerous = _dangerous(argv)
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return (len(argv) >= len(head) and not any(dangerous[len(head):])
                and all(_word_matches(w, p, d) for w, p, d in zip(argv, head, dangerous, strict=False)))
    return len(argv) == len(pattern) and all(_word_matches(w, p, d)
                                             for w, p, d in zip(argv, pattern, dangerous, strict=True))


def allowlisted(argv: tuple[str, ...], allow: tuple[tuple[str, ...], ...]) -> str | None:
    """Why argv may run without a signature (one of Baton's read-only git probes, or a
    pattern of `[handoff] allow`); None when nothing allows it."""
    if argv in GIT_STATE_PROBES.values():
        return "Baton's read-only git probe"
    if any(matches(pattern, argv) for pattern in allow):
        return "allowed by [handoff] allow"
    return None


def permit(argv: tuple[str, ...], message: bytes, signature: str | None, keys: tuple[SigningKey, ...],
           allow: tuple[tuple[str, ...], ...], allow_unsigned: bool) -> Permission:
    signed = check(signature, message, list(keys))
    if signed.holds:
        return Permission(True, signed.reason, signed=True)
    allowed = allowlisted(argv, allow)
    if allowed:
        return Permission(True, f"{signed.reason}; {allowed}")
    if allow_unsigned:
        return Permission(True, f"{signed.reason}; run because of --allow-unsigned-probes")
    return Permission(False, f"{signed.reason} and not allowlisted ([handoff] allow in baton.toml); "
                             "--allow-unsigned-probes would run it")
