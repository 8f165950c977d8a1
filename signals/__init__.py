"""Coordination signals between tickets.

Interface: SignalBus. Backends: SqliteSignalBus (embedded default).
"""

from signals.base import SignalBus
from signals.model import Signal, SignalPayload, SignalType

__all__ = ["Signal", "SignalBus", "SignalPayload", "SignalType"]
