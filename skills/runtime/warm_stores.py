"""What the stores load once and keep, loaded ahead by a long-lived process (the resident)
so that the commands it forks find it ready: pydantic's schemas of the events and of a
session, the embedding model, the embedded recall index's memory map and the client
library of each server the settings name."""

from __future__ import annotations

import importlib
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.skills.runtime.settings import Settings

# The client library each server setting needs. A command imports it on its first use of
# the server, and that import costs more than the rest of the command: qdrant_client about
# 0.6 s on an idle machine, neo4j 0.3 s, psycopg 0.2 s. None of them starts a thread or
# opens a connection when imported, so the commands forked after it inherit no such state.
SERVER_CLIENTS = (("database_url", "psycopg"), ("graph_url", "neo4j"), ("qdrant_url", "qdrant_client"),
                  ("kafka_bootstrap", "confluent_kafka"))


def warm(settings: Settings) -> None:
    """Fill the stores' caches; what cannot be loaded (no model) is left to the command
    that needs it, which says why as it does without a resident."""
    with suppress(Exception):
        from baton.registry.model import Session, Stamp

        # What a resume validates (defer_build leaves it to the first use): about 15 ms a
        # child would otherwise spend building pydantic's schema of a session.
        for model in (Session, Stamp):
            model.model_rebuild(force=True)
    from baton.recall.embedding import keep_loaded

    with suppress(Exception):
        keep_loaded()
    if not settings.qdrant_url:
        keep_index_mapped(settings.home.absolute())
    for module in [module for name, module in SERVER_CLIENTS if getattr(settings, name)]:
        with suppress(ImportError):  # an extra not installed: the command says so when it needs it
            importlib.import_module(module)


def keep_index_mapped(home: Path) -> None:
    """Map the embedded recall index of the data home, or map it again when it was
    rewritten since (a stat otherwise)."""
    from baton.recall.embedded import keep_mapped

    keep_mapped(home / "recall")
