"""The doctor skill: each configured store, its server and version, and whether it answers.

The doctor asks every server afresh: it clears the health record (baton.health) first, and
whatever does not answer now is recorded again."""

from __future__ import annotations

from dataclasses import dataclass

from baton.masking import mask
from baton.outcome import Unavailable
from baton.skills.runtime.deadline import gather
from baton.skills.runtime.stores import Stores
from baton.store_names import Store


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
    if stores.event_log is not None:
        calls[Store.EVENT_LOG] = lambda: stores.event_log.describe()
    answers = gather(calls, stores.budget)
    # A store describes itself by its server's location: never with its credentials.
    return [StoreReport(name, f"unavailable: {answer.reason}", {}) if isinstance(answer, Unavailable)
            else StoreReport(name, "ok", {key: mask(value) for key, value in answer.items()})
            for name, answer in answers.items()]
