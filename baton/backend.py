"""What every store's interface asks of its backends, whichever concern the store serves."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Backend(ABC):
    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Backend, location, server version and a size, read from the store itself.

        Raises StoreUnavailable when it does not answer (what `baton doctor` shows).
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
