"""The health record: which servers were found down recently, shared by every process of
the data home, so that the next commands skip a dead server without connecting to it (and
without importing its client).

One small JSON file, `server-health.json`, maps a server ("PostgreSQL at host:5432") to
when it was first and last found down and why. Only failures to reach or hear from a
server go in (refused, unreachable, timed out, connection lost), never a refused request.
Every change is a read-modify-write under a lock file, written to a temporary file and
renamed into place, so concurrent processes never see a torn record; a record that cannot
be parsed is ignored and rewritten, never fatal. It is advice: when the lock cannot be had
at once or the data home is not writable, the change is dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import NamedTuple

from baton.trust import read_private

FILE = "server-health.json"
LOCK = "server-health.lock"
LOCK_WAIT = 0.2  # seconds a change waits for another process's change


# A NamedTuple, not a dataclass: a fresh `baton touch` or hook defines it, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class Down(NamedTuple):
    since: float  # epoch seconds of the first failure of this outage
    last: float  # epoch seconds of the latest failure
    reason: str

    def describe(self, now: float) -> str:
        return f"down since {max(0, round(now - self.since))} s: {self.reason}"


class HealthRecord:
    def __init__(self, home: Path, *, recheck_after: float, clock: Callable[[], float] = time.time) -> None:
        self.path = home / FILE
        self.recheck_after = recheck_after
        self._clock = clock

    def down(self, server: str) -> Down | None:
        """The server's outage if one was recorded within recheck_after seconds, else None."""
        servers, garbled = self._read()
        if garbled:
            with self._changing():
                pass  # rewritten clean
        entry = servers.get(server)
        if entry is None or self._clock() - entry.last > self.recheck_after:
            return None
        return entry

    def knows(self, server: str) -> bool:
        """Whether the record holds anything about the server (fresh or not)."""
        return server in self._read()[0]

    def mark_down(self, server: str, reason: str) -> None:
        now = self._clock()
        with self._changing() as servers:
            earlier = servers.get(server)
            since = earlier.since if earlier is not None else now
            servers[server] = Down(since=since, last=now, reason=" ".join(reason.split()))

    def clear(self, server: str | None = None) -> None:
        """Forget one server, or (None) every server."""
        if not self.path.exists():
            return
        with self._changing() as servers:
            if server is None:
                servers.clear()
            else:
                servers.pop(server, None)

    def _read(self) -> tuple[dict[str, Down], bool]:
        """The recorded servers, and whether the file was garbled (then they are {})."""
        try:
            text = read_private(self.path).decode("utf-8")
        except FileNotFoundError:
            return {}, False
        except (OSError, UnicodeDecodeError):
            return {}, True
        servers = _parse(text)
        return ({}, True) if servers is None else (servers, False)

    @contextmanager
    def _changing(self) -> Iterator[dict[str, Down]]:
        """The recorded servers to change in place; written back if changed or garbled."""
        from baton.locks import held  # only to change the record: reading it stays cheap

        with ExitStack() as stack:
            try:
                got = stack.enter_context(held(self.path.parent / LOCK, within=LOCK_WAIT))
            except OSError:
                got = False  # the data home is not writable: the change is dropped
            servers, garbled = self._read() if got else ({}, False)
            before = dict(servers)
            yield servers
            if got and (servers != before or garbled):
                from baton.files import write_whole  # only when something changed: reading the record stays cheap

                body = {"servers": {name: down._asdict() for name, down in servers.items()}}
                with suppress(OSError):  # the record is advice: a write that fails is skipped
                    write_whole(self.path, json.dumps(body, ensure_ascii=False))


def _parse(text: str) -> dict[str, Down] | None:
    """The record's servers, or None when it is garbled."""
    try:
        raw = json.loads(text)
        return {name: Down(since=float(entry["since"]), last=float(entry["last"]), reason=str(entry["reason"]))
                for name, entry in raw["servers"].items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
