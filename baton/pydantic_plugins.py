"""pydantic's plugins kept out of Baton's commands, and the switch kept out of what they start.

pydantic looks its plugins up when it builds its first validator: it reads the entry points
of every installed distribution (about 7 ms of a fresh `baton resume` here; importing
importlib.metadata for it costs more and stays: docs/performance.md). Baton's models are its
own records, and a plugin that observed them would see the sessions' text, so a command
switches plugins off with pydantic's documented PYDANTIC_DISABLE_PLUGINS. The programs a
command starts (git and its hooks, a setup command, another Baton process) get the
environment as the user gave it: the switch goes with them only when the user set it."""

from __future__ import annotations

import os
from collections.abc import Mapping

VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
_switched = False  # whether this process set VARIABLE (a user's own setting passes on as theirs)


def switch_off() -> None:
    """Switch pydantic's plugins off for this process, unless the user chose for it. Called
    where a command starts, with os.environ as the user gave it (the resident's child, once
    it took its client's)."""
    global _switched
    _switched = VARIABLE not in os.environ
    if _switched:
        os.environ[VARIABLE] = "__all__"


def as_given(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment (the process's by default) for a program this process starts:
    without the switch that switch_off set."""
    given = dict(os.environ if environ is None else environ)
    if _switched:
        given.pop(VARIABLE, None)
    return given
