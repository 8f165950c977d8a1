"""The doctor skill: each configured store, its server and version, and whether it answers;
the data home, whose it is and its mode (baton.trust); and whether the resident process
serves here.

The doctor asks every server afresh: it clears the health record (baton.health) first, and
whatever does not answer now is recorded again."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from baton.budget import gather
from baton.errors import StoreUnavailable
from baton.home import unusable
from baton.masking import mask
from baton.outcome import Unavailable
from baton.skills.runtime.settings import Settings
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

DATA_HOME = "data home"


@dataclass
class StoreReport:
    store: str
    state: str
    details: dict[str, str]

    def to_json(self) -> dict:
        return {"store": self.store, "state": self.state, **self.details}


def _model() -> dict[str, str]:
    from baton.recall.embedding import MiniLMEncoder, model_dir

    MiniLMEncoder.load()
    return {"backend": "all-MiniLM-L6-v2 in NumPy", "location": str(model_dir()), "version": "384 dimensions"}


def _data_home(home: Path) -> dict[str, str]:
    """Whose the data home is and its mode: reaching here, the user's own and writable by
    nobody else (baton.trust refuses any other before a command runs). StoreUnavailable
    when it is not a usable directory."""
    problem = unusable(home)
    if problem is not None:
        raise StoreUnavailable(DATA_HOME, problem)
    try:
        mode = stat.S_IMODE(os.stat(home).st_mode)
    except FileNotFoundError:
        return {"backend": "not created yet (mode 700 when it is), at", "location": str(home)}
    others = "; readable by other users" if mode & 0o077 else ""
    return {"backend": f"owned by you, mode {mode:o}{others}, at", "location": str(home)}


def resident_state(settings: Settings) -> str:
    """Whether commands go to the resident process here: "on", else "off: why"."""
    from baton.skills.runtime.resident_client import unsupported

    off = unsupported()
    if off is not None:
        return f"off: {off}; each command runs in its own process"
    return "on" if settings.resident else "off: BATON_RESIDENT=off"


def doctor(stores: Stores) -> list[StoreReport]:
    """Ask every store to describe itself, side by side, within the command's budget."""
    health = stores.budget.health
    if health is not None:  # the stores' budget always keeps one
        health.clear()
    calls = {
        "registry": lambda: stores.registry.describe(),
        "graph": lambda: stores.graph.describe(),
        "recall": lambda: stores.recall().index.describe(),
        "embedding model": _model,
        "signals": lambda: stores.signals.describe(),
    }
    event_log = stores.event_log
    if event_log is not None:
        calls[Store.EVENT_LOG] = event_log.describe
    calls[DATA_HOME] = lambda: _data_home(stores.settings.home)
    answers = gather(calls, stores.budget)
    # A store describes itself by its server's location: never with its credentials.
    return [StoreReport(name, f"unavailable: {answer.reason}", {}) if isinstance(answer, Unavailable)
            else StoreReport(name, "ok", {key: mask(value) for key, value in answer.items()})
            for name, answer in answers.items()]
