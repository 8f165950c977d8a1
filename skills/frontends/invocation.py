"""One `baton` command's invocation: its words, directory, environment, standard streams and
the agent that ran it. The console script takes it from its own process; the resident
process builds it from the client's request, whose parent is the agent (the resident's
child has another parent). The command reads the agent from here, never from os.getppid()."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TextIO

from baton.masking import mask
from baton.shown_text import one_line


# A NamedTuple, not a dataclass: every fresh command builds this class, and a dataclass's
# generated methods cost a fresh process about 1 ms each class (Python 3.11).
class Invocation(NamedTuple):
    argv: tuple[str, ...]  # the words after `baton`
    cwd: str  # empty when the directory was removed
    environ: Mapping[str, str]
    agent_pid: int  # the process that ran `baton`: a hook's agent
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO


def of_process(argv: list[str] | None = None) -> Invocation:
    """This process's invocation: argv, else its own command line's words."""
    try:
        cwd = os.getcwd()
    except OSError:  # removed since: the command says so where it needs its directory
        cwd = ""
    return Invocation(tuple(sys.argv[1:] if argv is None else argv), cwd, os.environ, os.getppid(),
                      sys.stdin, sys.stdout, sys.stderr)


def say(text: str, head: str = "", *, flat: bool = True) -> None:
    """A line of Baton's own on stderr, `baton: ` and head before text, which is masked (never
    a server's credentials) and, flat, made one line."""
    print(f"baton: {head}{one_line(mask(text)) if flat else mask(text)}", file=sys.stderr)


def warn(warnings: Iterable[str], told: set[str] | None = None, *, flat: bool = True) -> None:
    """Each warning said (say); with told, a store's failure only the first time (told, the
    stores already told, grows)."""
    for warning in warnings:
        store, sep, _ = warning.partition(" unavailable: ")
        if told is not None and sep:
            if store in told:
                continue
            told.add(store)
        say(warning, "warning: ", flat=flat)
