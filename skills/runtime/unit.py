"""The unit of work of one command, one hook or one MCP tool call: the command's edge, where
its one deadline is made (Stores.deadline). Open the stores, deliver the writes kept on this
machine first when the caller reads (so it sees the writes made before it), run, close the
stores (which starts the background delivery of what the command kept). The caller gives the
projection (baton.skills.core.commit.apply_events), which lives above this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from baton.home import readable_by_others
from baton.skills.runtime.settings import load_settings
from baton.skills.runtime.stores import Apply, Stores


@contextmanager
def unit_of_work(*, projection: Apply, deliver: bool = False,
                 warn: Callable[[list[str]], None] = lambda _: None, store_timeout: float | None = None,
                 skip_known_down: bool = True, project: str | None = None) -> Iterator[Stores]:
    """The stores for one command, settings from the environment (store_timeout: at most this many
    seconds of servers); projection: how the stores apply events; deliver: deliver the kept
    writes first (read commands), telling warn what could not be; skip_known_down=False asks
    every server anyway (the background's work); project: the caller's worktree's repository."""
    settings = load_settings()
    if store_timeout is not None and store_timeout < settings.store_timeout:
        settings = settings._replace(store_timeout=store_timeout)
    stores = Stores(settings, skip_known_down=skip_known_down, project=project, projection=projection)
    try:
        if deliver:  # what reads: a command a person may be reading too
            exposed = readable_by_others(settings.home)
            warn([exposed] if exposed else [])
            warn(stores.sink.deliver())
        yield stores
    finally:
        stores.close()  # closes nothing while a read abandoned at its deadline runs
