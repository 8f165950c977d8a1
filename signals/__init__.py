"""Coordination signals between tickets.

Interface: SignalBus (signals.base). Backends: SqliteSignalBus (signals.sqlite, the
embedded default). Models: signals.model, imported only by those who build signals.
"""

from signals.base import SignalBus

__all__ = ["SignalBus"]
