"""The coordination signal bus interface."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from baton.backend import Backend
from baton.outcome import Found, Unavailable

if TYPE_CHECKING:
    from baton.signals.model import Signal
    from baton.signals.wire import WireSignal


class SignalBus(Backend):
    """An append-only, idempotent log of signals. Writes raise StoreUnavailable."""

    @abstractmethod
    def publish(self, signals: Sequence[Signal | WireSignal]) -> list[bool]:
        """Append signals; for each, True if new, False if its id was already stored. A
        backend that sends through a local outbox keeps them there for a later delivery
        (baton.skills.runtime.delivery) and never waits for its server here."""

    def prepare(self) -> None:
        """Open now what the first delivery would open (a long-running writer, the
        projector, calls it when it starts, so its first batch does not wait for it).
        Raises StoreUnavailable; nothing to do for a local log."""

    @abstractmethod
    def known(self, signal_ids: Sequence[str]) -> set[str]:
        """Which of signal_ids are already stored (lets the hot path skip building signals)."""

    def watermark(self) -> str | None:
        """An opaque mark of the log's end that changes whenever a signal is stored, read
        without decoding any signal (an agent's prompt hook checks it before paying for a
        read); None when the backend cannot give one cheaply."""
        return None

    @abstractmethod
    def concerning(self, subjects: Sequence[str], *, after: datetime | None,
                   limit: int) -> Found[list[Signal]] | Unavailable:
        """The newest `limit` signals about any of subjects emitted strictly after `after`, oldest first."""

    def concerning_wire(self, subjects: Sequence[str], *, after: datetime | None,
                        limit: int) -> Found[list[WireSignal]] | Unavailable:
        """concerning() in the stored form, for the prompt hook: a backend that can read it
        without building the validated models (and importing pydantic) says so here."""
        from baton.signals.wire import WireSignal

        found = self.concerning(subjects, after=after, limit=limit)
        if not isinstance(found, Found):
            return found
        return Found([WireSignal.from_json(signal.to_json()) for signal in found.value])

    @abstractmethod
    def conflict_pairs(self, *, after: datetime | None) -> Found[set[frozenset[str | None]]] | Unavailable:
        """The two tickets of every conflict_detected signal emitted after `after`, in one read
        (on Kafka one pass over the topic): what a repair needs of the signals, far smaller than they."""

    @abstractmethod
    def recent(self, *, task_id: str | None, after: datetime | None, limit: int) -> Found[list[Signal]] | Unavailable:
        """The newest `limit` signals (about task_id, if given) emitted after `after`, oldest first."""

    @abstractmethod
    def rewrite(self, signals: Sequence[Signal]) -> int:
        """Replace the stored copy of each signal (by id) with this one: what `baton redact
        --scan` does with a reason that holds a secret. Returns how many were replaced (on
        Kafka: sent; readers keep a signal's last copy). Raises StoreUnavailable."""

    @abstractmethod
    def prune(self, before: datetime) -> int:
        """Remove the signals emitted before `before`; returns how many went. Raises
        StoreUnavailable. On Kafka the topic's retention (retention.ms) removes old signals,
        so nothing is removed here."""
