"""A loopback port in front of a server that can take the server away in the two ways a
client meets: refused (nothing listens) and stalled (a socket that accepts and never
answers), and bring it back (forward each connection to the server), on the same port.

Clients are pointed at `port`; the server itself stays up throughout, so an outage and a
recovery take milliseconds instead of a restart. Kafka clients learn the broker's own
address from the first answer and connect there directly: a stalled or refused bootstrap
still keeps them from ever getting that answer.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

from tests.servers.common import free_port

FORWARD, STALL, REFUSE = "forward", "stall", "refuse"


class Outage:
    def __init__(self, target: tuple[str, int] | None = None, *, mode: str = FORWARD) -> None:
        """target: the server to forward to (None: it can only refuse or stall)."""
        self.target = target
        self.port = free_port()
        self.mode = REFUSE
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self.accepted = 0  # connections accepted, in any mode
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"outage-{self.port}")
        self._thread.start()
        self.switch(mode)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def switch(self, mode: str) -> Outage:
        """Refuse, stall or forward from now on; connections made before are cut."""
        if mode == FORWARD and self.target is None:
            raise ValueError("nothing to forward to")
        with self._lock:
            for conn in self._connections:
                _close(conn)
            self._connections.clear()
            if mode == REFUSE and self._listener is not None:
                self._selector.unregister(self._listener)
                _close(self._listener)
                self._listener = None
            elif mode != REFUSE and self._listener is None:
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self.port))
                listener.listen(64)
                listener.setblocking(False)
                self._selector.register(listener, selectors.EVENT_READ, "accept")
                self._listener = listener
            self.mode = mode
        return self

    def close(self) -> None:
        self.switch(REFUSE)
        self._stop.set()
        self._thread.join(5)

    def _serve(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                listening = self._listener is not None
            if not listening:
                self._stop.wait(0.01)
                continue
            for key, _ in self._selector.select(timeout=0.05):
                with self._lock:
                    if key.fileobj is not self._listener:
                        continue
                    try:
                        client, _ = self._listener.accept()
                    except (BlockingIOError, OSError):
                        continue
                    self._connections.append(client)
                    self.accepted += 1
                    mode = self.mode
                if mode == FORWARD:
                    threading.Thread(target=self._forward, args=(client,), daemon=True).start()
                # STALL: the connection is held open and never answered.

    def _forward(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client)
            return
        server.settimeout(None)
        with self._lock:
            self._connections.append(server)
        threading.Thread(target=_pump, args=(server, client), daemon=True).start()
        _pump(client, server)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
