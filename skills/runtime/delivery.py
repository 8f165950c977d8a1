"""Background delivery of writes kept on this machine, so a write reaches the servers (or the
embedded registry whose lock it found held: baton.write_queue) without the command waiting.

A command that kept writes starts `baton deliver --background` unless a delivery already
runs (it holds `delivery.lock` in the data home). The delivery drains what waits, lingers
briefly for the touches that follow an edit in bursts, and retries with backoff while a
server is down, for a bounded time. Each attempt asks every server, whatever the health
record says (baton.health). The lock is released before the last look at what waits, so a
write kept just after that look starts a delivery of its own: nothing is left waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from baton.locks import held, linger
from baton.retry import Backoff

if TYPE_CHECKING:
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

LOCK = "delivery.lock"
LINGER = 1.0  # seconds without new writes before a background delivery exits
GIVE_UP_AFTER = 120.0  # seconds of failed deliveries before it exits (the next touch retries)


def delivery_running(home: Path) -> bool:
    """Whether a background delivery holds the lock now."""
    with held(home / LOCK, within=0) as got:
        return not got


def start_background_delivery(settings: Settings) -> None:
    """Start a detached delivery process unless one runs or the settings turn it off; costs
    the caller a spawn, no wait."""
    if not settings.background_delivery or delivery_running(settings.home):
        return
    from baton.skills.runtime.spawn import spawn_baton

    spawn_baton("deliver", "--background")


def deliver_in_background(stores: Stores) -> None:
    """Deliver until nothing waits for LINGER seconds, retrying with backoff while it fails;
    returns at once if another delivery holds the lock. The stores apply what they deliver
    through their projection (baton.skills.runtime.sink)."""
    retry = Backoff(0.5, most=30.0, give_up_after=GIVE_UP_AFTER)

    def deliver() -> bool:
        stores.budget.renew()
        while stores.sink.waiting() and stores.sink.deliver(background=True):
            if not retry.wait():
                return False
            stores.budget.renew()
        retry.reset()
        return True

    linger(stores.settings.home / LOCK, deliver, stores.sink.waiting, idle=LINGER)
