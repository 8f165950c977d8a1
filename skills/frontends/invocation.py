"""One `baton` command's invocation: its words, directory, environment, standard streams and
the agent that ran it. The console script takes it from its own process; the resident
process builds it from the client's request, whose parent is the agent (the resident's
child has another parent). The command reads the agent from here, never from os.getppid()."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NamedTuple, TextIO


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
