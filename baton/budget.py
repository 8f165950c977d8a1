"""One budget per command: how long a command may wait on servers, and what it learned
about them while it ran.

BATON_STORE_TIMEOUT is the budget of a whole command, not of each call, and the cap of the
servers' part of the command's deadline (baton.deadline): a call waits what is left of the
smaller. Its clock runs
while at least one call to a server is in flight (importing the server's client and
connecting included) and stops in between, so a command that runs a check for a minute
still has its budget for the registry afterwards; each call may wait what is left. Before
the first call to a server in a command, a TCP connection to its address within what is
left answers "refused" or "unreachable" at once, before its client library is even
imported. A server that failed once is not asked again in the same command, and a server
the health record (baton.health) saw down within the last BATON_RECHECK_AFTER seconds is
skipped without connecting at all. A server that only ran out of a short remainder of the
budget (under FAIR_WAIT) is not recorded as down: it never had a fair chance to answer.

Nothing here imports a server's client: the address of each server is read from its URL.
The sockets and URL parsing are imported where used, as a hook's touch makes a budget and
never connects.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, NamedTuple, TypeVar

from baton.deadline import Deadline, WaitClock
from baton.errors import ServerUnreachable, StoreUnavailable
from baton.health import HealthRecord
from baton.masking import mask

T = TypeVar("T")
FAIR_WAIT = 1.0  # seconds a server must have had before its silence goes in the health record
SLACK = 0.5  # seconds past the budget before a call still running is given up: the server's own timeout speaks first


def no_answer(seconds: float, what: str = "no answer") -> str:
    """How a server's silence is told: which limit ran out, so a slow server is told apart
    from a down one (which is "connection refused", or the server's own error)."""
    return f"{what} within the {seconds:g} s budget (BATON_STORE_TIMEOUT)"

# Threads this process stopped waiting for (calls past their deadline): while one runs, the
# process closes nothing it may use and ends without the interpreter's exit, which could
# wait for it (leave).
_abandoned: list[threading.Thread] = []


def abandoned() -> bool:
    """Whether a call this process gave up on is still running."""
    return any(thread.is_alive() for thread in _abandoned)


# A NamedTuple, not a dataclass: a fresh `baton touch` or hook defines it, and a frozen
# dataclass's generated methods cost a fresh process about 1 ms a class (Python 3.11).
class Server(NamedTuple):
    """A server as the budget knows it: its name in messages and in the health record, and
    the TCP addresses a connection may go to (none for a Unix socket)."""

    name: str
    addresses: tuple[tuple[str, int], ...]


class Budget:
    def __init__(self, seconds: float, *, health: HealthRecord | None = None, skip_known_down: bool = True,
                 deadline: Deadline | None = None) -> None:
        self.seconds = seconds
        self.health = health
        self.deadline = deadline  # the command's, which the servers' waits draw on too
        self.skip_known_down = skip_known_down
        self._clock = WaitClock(seconds)
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}

    def remaining(self) -> float:
        own = self._clock.left()
        return own if self.deadline is None else min(own, self.deadline.left())

    def _deadline_spent(self) -> bool:
        """Whether the command's deadline, rather than this budget, has run out."""
        return self.deadline is not None and self.deadline.left() <= 0

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Charge the time this block runs (once, however many blocks overlap), to the
        command's deadline too."""
        with self.deadline.waiting() if self.deadline is not None else nullcontext(), self._clock.waiting():
            yield

    def renew(self) -> None:
        """A fresh budget for the next unit of a long-running command (a projector's batch,
        a delivery attempt): the clock restarts, the command's deadline's too, and failed
        servers may be asked again."""
        self._clock.renew()
        with self._lock:
            for gate in self._gates.values():
                gate.forget()
        if self.deadline is not None:
            self.deadline.renew()

    def gate(self, server: Server) -> Gate:
        """The one gate of a server in this command (stores on one server share it)."""
        with self._lock:
            return self._gates.setdefault(server.name, Gate(self, server))

    def spent(self) -> str:
        if self._deadline_spent():
            return f"no time left of {self.deadline}"
        return f"no time left of this command's {self.seconds:g}s budget for servers (BATON_STORE_TIMEOUT)"

    def no_answer(self, what: str = "no answer") -> str:
        if self._deadline_spent():
            return f"{what} within what was left of {self.deadline}"
        return no_answer(self.seconds, what)


class Gate:
    """Every call to one server passes here: it answers at once for a server known to be
    down, and records what a call found out."""

    def __init__(self, budget: Budget, server: Server) -> None:
        self.budget = budget
        self.server = server
        self._cleared = False
        self.forget()

    def forget(self) -> None:
        self._failure: str | None = None
        self._reached = self._record_read = False
        self.unreachable = False  # whether the failure in this command was the server's silence

    def left(self) -> float:
        """Seconds the call in progress may still wait (at least a little, so a client
        given it as a timeout fails by itself rather than at once)."""
        return max(self.budget.remaining(), 0.05)

    def waiting(self) -> AbstractContextManager[None]:
        """Charge a wait that is not a call to the server (another process's delivery)."""
        return self.budget.waiting()

    def no_answer(self, what: str = "no answer") -> str:
        return self.budget.no_answer(what)

    def refuse_known(self, store: str) -> None:
        """Raise StoreUnavailable for store if the server failed earlier in this command or
        the health record saw it down recently; costs no connection."""
        if self._failure is not None:
            raise StoreUnavailable(store, self._failure)
        health = self.budget.health
        if health is not None and self.budget.skip_known_down and not self._record_read:
            self._record_read = True  # once per command: later calls find out for themselves
            down = health.down(self.server.name)
            if down is not None:
                self._failure, self.unreachable = down.describe(time.time()), True
                raise StoreUnavailable(store, self._failure)

    @contextmanager
    def call(self, store: str) -> Iterator[float]:
        """Run one call to the server; yields the seconds it may wait. Raises
        StoreUnavailable for store at once when the server failed earlier in this command,
        is recorded as down, refuses a TCP connection, or the budget is spent."""
        self.refuse_known(store)
        with self.budget.waiting():
            left = self.budget.remaining()
            if left <= 0:
                # Not heard from in this command (so what waits for it keeps waiting), but
                # not recorded as down: the server had no chance to answer.
                self.unreachable = True
                raise StoreUnavailable(store, f"{self.server.name}: {self.budget.spent()}")
            try:
                if not self._reached:
                    self._reach(store, left)
                yield left
            except ServerUnreachable as exc:
                self.unreachable = True
                # Out of a short remainder of the budget: the server had no fair chance.
                self._failed(exc.reason, unreachable=left >= FAIR_WAIT or self.budget.remaining() > 0.05)
                raise
            except StoreUnavailable as exc:
                self._failed(exc.reason, unreachable=False)
                raise
        self._succeeded()

    def _reach(self, store: str, left: float) -> None:
        """A TCP connection to one of the server's addresses within `left` seconds."""
        import socket

        if not self.server.addresses:
            self._reached = True
            return
        reasons = []
        deadline = time.monotonic() + left
        for host, port in self.server.addresses:
            try:
                with socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.01)):
                    self._reached = True
                    return
            except ConnectionRefusedError:
                reason = "connection refused"
            except TimeoutError:
                reason = self.budget.no_answer("no TCP connection")
            except OSError as exc:
                reason = f"unreachable ({exc.strerror or exc})"
            reasons.append(reason if len(self.server.addresses) == 1 else f"{host}:{port} {reason}")
        raise ServerUnreachable(store, f"{self.server.name}: {'; '.join(reasons)}")

    def _failed(self, reason: str, *, unreachable: bool) -> None:
        """Remember the failure for the command; record it when the server was unreachable."""
        self._failure = " ".join(reason.split())
        if unreachable and self.budget.health is not None:
            self.budget.health.mark_down(self.server.name, self._failure)
            self._cleared = False

    def _succeeded(self) -> None:
        health = self.budget.health
        if health is not None and not self._cleared:
            self._cleared = True
            if health.knows(self.server.name):
                health.clear(self.server.name)


class OpenGate:
    """The gate of a backend used on its own (tests, tools): each call may wait `timeout`
    seconds, and nothing is remembered between calls."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def left(self) -> float:
        return self.timeout

    def waiting(self) -> AbstractContextManager[None]:
        return nullcontext()

    def no_answer(self, what: str = "no answer") -> str:
        return no_answer(self.timeout, what)

    def refuse_known(self, store: str) -> None:
        pass

    @contextmanager
    def call(self, store: str) -> Iterator[float]:
        yield self.timeout


# What a backend waits through: a command's gate for its server, or an open one.
AnyGate = Gate | OpenGate


def side_by_side(calls: dict[str, Callable[[], Any]], seconds: float) -> dict[str, tuple[bool, Any] | None]:
    """Run each call in a daemon thread of its own for at most `seconds` in all: each call's
    (True, answer), (False, what it raised), or None when it still runs (abandoned: a stuck
    driver call must not keep the process alive after it answered)."""
    done: dict[str, tuple[bool, Any]] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        try:
            done[name] = (True, call())
        except BaseException as exc:  # noqa: BLE001 -- the caller's thread raises it or says why
            done[name] = (False, exc)

    threads = {name: threading.Thread(target=run, args=(name, call), daemon=True, name=f"baton-{name}")
               for name, call in calls.items()}
    for thread in threads.values():
        thread.start()
    deadline, late = time.monotonic() + seconds, set()
    for name, thread in threads.items():
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            _abandoned.append(thread)
            late.add(name)
    return {name: None if name in late else done[name] for name in calls}


def within(seconds: float, call: Callable[[], T]) -> T:
    """call()'s answer within `seconds`, run in a daemon thread; TimeoutError otherwise. For
    a client whose own timeouts are coarser than a budget: the thread is left to end by
    itself, and the gate keeps the command from asking that server again."""
    ran = side_by_side({"call": call}, seconds)["call"]
    if ran is None:
        raise TimeoutError(f"no answer within {seconds:.1f}s")
    done, value = ran
    if not done:
        raise value
    return value


def gather(calls: dict[str, Callable[[], Any]], budget: Budget) -> dict[str, Any]:
    """Store reads side by side, so a hung store cannot hang a resume: each call's answer
    within what the budget has left plus SLACK (each store reports its own, precise reason
    first; this only catches a call that ignores its timeout). A call still running then
    answers Unavailable (the budget's "no answer within"), one that raises StoreUnavailable
    answers Unavailable(reason), and anything else it raises is raised here."""
    from baton.outcome import Unavailable

    results: dict[str, Any] = {}
    for name, ran in side_by_side(calls, max(budget.remaining(), 0.0) + SLACK).items():
        if ran is None:
            results[name] = Unavailable(budget.no_answer())
        elif ran[0]:
            results[name] = ran[1]
        elif isinstance(ran[1], StoreUnavailable):
            results[name] = Unavailable(ran[1].reason)
        else:
            raise ran[1]
    return results


def leave(code: int) -> None:
    """End the process with code once the exit handlers ran (none while an abandoned call
    still runs: one could wait for it) and what was written is flushed, without the
    interpreter's teardown of every module and the native handles of a server's client: 0.1
    to 0.3 s more for a resume whose server stalled, on a loaded 2-core machine (bench/outages.py)."""
    import sys

    if not abandoned():
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


@contextmanager
def cut_when_silent(limit: float, last_heard: Callable[[], float], cut: Callable[[], None],
                    done: threading.Event) -> Iterator[None]:
    """Call cut(), and set done, once `limit` seconds pass since last_heard() (a monotonic
    time) while the block runs. For a client that waits on a connected socket without a
    limit (a server stalled after it answered the login: a paused process, a frozen host,
    which no server-side timeout ends): cut shuts the socket down, and the client's wait ends
    with an error in its own thread, which keeps its locks and its connection's state."""
    finished = threading.Event()
    lock = threading.Lock()

    def watch() -> None:
        while not finished.wait(max(last_heard() + limit - time.monotonic(), 0.0)):
            if time.monotonic() - last_heard() < limit:
                continue  # heard from meanwhile
            with lock:
                if not finished.is_set():
                    done.set()
                    cut()
                return

    threading.Thread(target=watch, daemon=True, name="baton-watch").start()
    try:
        yield
    finally:
        with lock:
            finished.set()


def shut_socket(fileno: int) -> None:
    """End every wait on a connected socket another object owns (its reads then see the end
    of the stream) without closing its descriptor, which stays the owner's to close."""
    import socket

    with suppress(OSError), socket.socket(fileno=os.dup(fileno)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)


def _host_port(text: str, default_port: int) -> tuple[str, int] | None:
    """'host', 'host:port', '[v6]:port' -> (host, port); None for a Unix socket path."""
    from urllib.parse import unquote

    text = unquote(text.strip())
    if not text or text.startswith(("/", "@")):
        return None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    return host, int(port) if port.isdigit() else default_port


def postgres_server(url: str) -> Server:
    """PostgreSQL's addresses from a postgresql:// URL or a key=value connection string."""
    import re
    from urllib.parse import parse_qs

    if re.match(r"^postgres(ql)?://", url):
        rest = url.split("://", 1)[1]
        netloc, _, tail = rest.partition("/")
        query = parse_qs(tail.partition("?")[2]) if "?" in tail else parse_qs(netloc.partition("?")[2])
        netloc = netloc.partition("?")[0].rpartition("@")[2]
        hosts = query.get("host", [])[0].split(",") if query.get("host") else netloc.split(",") if netloc else []
        ports = query.get("port", [""])[0]
    else:
        pairs = dict(re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", url))
        hosts = pairs.get("host", "").strip("'").split(",") if pairs.get("host") else []
        ports = pairs.get("port", "").strip("'")
    port = int(ports) if ports.isdigit() else 5432
    addresses = tuple(a for a in (_host_port(h, port) for h in hosts) if a is not None)
    shown = ",".join(f"{h}:{p}" for h, p in addresses) or "its local socket"
    return Server(f"PostgreSQL at {shown}", addresses)


def bolt_server(uri: str) -> Server:
    """The Bolt server's address from a bolt:// or neo4j:// URI (with +s or +ssc)."""
    netloc = uri.split("://", 1)[-1].partition("/")[0].partition("?")[0].rpartition("@")[2]
    address = _host_port(netloc, 7687)
    return Server(f"Bolt server at {mask(uri.split('?')[0])}", (address,) if address else ())


def kafka_server(bootstrap: str) -> Server:
    """Kafka's addresses from a bootstrap list (host:port,host:port)."""
    addresses = tuple(a for a in (_host_port(entry.split("://")[-1], 9092) for entry in bootstrap.split(","))
                      if a is not None)
    return Server(f"Kafka at {mask(bootstrap)}", addresses)


def qdrant_server(url: str) -> Server:
    """A Qdrant server's address from its http(s) URL (qdrant-client's default port 6333)."""
    netloc = url.split("://", 1)[-1].partition("/")[0].rpartition("@")[2]
    address = _host_port(netloc, 6333)
    return Server(f"Qdrant at {mask(url)}", (address,) if address else ())
