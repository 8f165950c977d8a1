"""The name of every store Baton keeps, as errors, warnings and `--json` answers spell it."""

from __future__ import annotations

from enum import StrEnum


class Store(StrEnum):
    SESSION_REGISTRY = "session registry"
    CONFLICT_GRAPH = "conflict graph"
    SIGNAL_LOG = "signal log"
    RECALL_INDEX = "recall index"
    RECALL_QUEUE = "recall queue"
    EVENT_LOG = "event log"
    PENDING_WRITES = "pending writes"
    BINDING_FILE = "binding file"
    HANDOFF_KEY = "handoff key"
    HANDOFF_FILES = "handoff files"
    AGENT_SESSION_LOG = "agent session log"
