"""A command written as shell-style words, split into the argument vector Baton runs
without a shell (checks and probes) or matches (the `[handoff] allow` setting)."""

from __future__ import annotations

import re
import shlex

from baton.errors import BadInput

# Tokens a shell would treat as syntax. Commands run without a shell, so one using them
# would not do what it says: refuse it instead of running something else.
_SHELL_SYNTAX = re.compile(r"^(\d*[<>]|[|&;()`])")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def parse_command(command: str) -> list[str]:
    """The argument vector of a probe command written as shell-style words.

    BadInput names what is wrong: unbalanced quotes, shell syntax (pipes, redirections,
    command lists, substitutions) or leading environment assignments, none of which a
    probe can use because no shell runs it.
    """
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise BadInput(f"probe command {command!r} cannot be split into words: {exc}") from None
    if not argv:
        raise BadInput("probe command is empty")
    if _ASSIGNMENT.match(argv[0]):
        raise BadInput(f"probe command {command!r} sets an environment variable ({argv[0]}): probes run "
                       "with a minimal environment and no shell")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        syntax = [token for token in lexer if _SHELL_SYNTAX.match(token)]
    except ValueError as exc:
        raise BadInput(f"probe command {command!r} cannot be split into words: {exc}") from None
    if syntax or any("$(" in word or "`" in word for word in argv):
        shown = syntax[0] if syntax else "$(...)"
        raise BadInput(f"probe command {command!r} uses shell syntax ({shown}): probes run without a shell; "
                       "put the pipeline in a script and probe the script")
    return argv
