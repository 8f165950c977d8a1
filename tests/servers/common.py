from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll ready() until it holds; raise after timeout seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready within {timeout:g}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
