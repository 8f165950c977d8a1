"""The two lanes the shell tests (the command line, the hooks, the MCP server) run in:
`--resident=off`, each command run in the test's own process or a fresh one, and
`--resident=on`, the way users run Baton (the default setting), each command handed to the
data home's resident process by the `baton` console entry
(baton.skills.frontends.entry). A lane `on` that quietly ran commands here would test
nothing new, so the lane watches itself: a command that ran in its own process while a
resident was listening for its home fails the test (ResidentLane.check)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

from baton.skills.runtime.resident_client import LOCK_NAME, NOT_FORWARDED, SOCKET_NAME, command_word, switched_off
from tests.timing import wait_for
from tests.workspace import live_processes

OPTION = "--resident"
# Where the console entry below writes, per command, whether a resident answered it.
RECORD = "BATON_TEST_RESIDENT_RECORD"
ANSWERED, LOCAL = "answered", "local"
# The console entry, recording the client's verdict. A user's command waits 50 ms to be
# accepted; on 2 busy cores a resident can take longer to get scheduled, and the lane would
# then run the command here: it waits up to 10 s instead.
ENTRY = f"""
import os, sys
from baton.skills.runtime import resident_client

resident_client.CONNECT_WAIT = 10.0
offer = resident_client.forwarded


def forwarded(argv):
    code = offer(argv)
    if resident_client.command_word(argv) not in resident_client.NOT_FORWARDED \\
            and not resident_client.switched_off(os.environ):
        with open(os.environ[{RECORD!r}], "a") as record:
            record.write(("{ANSWERED}" if code is not None else "{LOCAL}") + " " + os.environ.get("BATON_HOME", "")
                         + "\\n")
    return code


resident_client.forwarded = forwarded
sys.argv[0] = "baton"
from baton.skills.frontends.entry import run

run()
"""
STOP_WAIT = 30.0  # seconds a resident may take to leave on SIGTERM
MAX_SOCKET_PATH = 107  # sockaddr_un's sun_path, less its terminating NUL
START_WAIT = 60.0  # seconds a resident may take to listen (imports, the model, the index)
current: ResidentLane | None = None  # the running test's, in lane `on` (tests/conftest.py's resident_lane)
tally = {ANSWERED: 0, LOCAL: 0}  # the session's commands, by who ran them (the terminal summary)


def lane_on() -> bool:
    return not switched_off(os.environ)


def forwardable(args: tuple[str, ...] | list[str]) -> bool:
    return command_word(["baton", *args]) not in NOT_FORWARDED


class ResidentLane:
    """One test's residents in lane `on`: commands go through the console entry, the
    resident a command started is waited for before the next command (bounded), and at
    teardown every resident this test started is stopped (bounded)."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.fallbacks: list[str] = []

    def run(self, cwd: Path, args: list[str] | tuple[str, ...], *, stdin: str | None = None,
            env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        environ = {**os.environ, **(env or {}), RECORD: str(self.record)}
        home = Path(environ["BATON_HOME"]) if environ.get("BATON_HOME") else None
        listening = False
        if home is not None and forwardable(args) and not switched_off(environ):
            if len(os.fsencode(home / SOCKET_NAME)) > MAX_SOCKET_PATH:
                self.fallbacks.append(f"{home} is too long a path for a resident's socket: give the test a shorter one")
            listening = self._await(home)
        before = self._lines()
        result = subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=cwd, input=stdin, capture_output=True,
                                text=True, timeout=timeout, env=environ,
                                stdin=subprocess.DEVNULL if stdin is None else None)
        if listening and f"{LOCAL} {home}" in self._lines()[len(before):]:
            self.fallbacks.append(f"`baton {' '.join(args)}` ran in its own process while a resident listened "
                                  f"for {home}: {result.stderr.strip()[-400:]}")
        return result

    def check(self) -> str | None:
        """Why the lane was not what it claims, or None."""
        return "; ".join(self.fallbacks) or None

    def count(self) -> None:
        for line in self._lines():
            verdict = line.partition(" ")[0]
            tally[verdict] = tally.get(verdict, 0) + 1

    def stop(self) -> None:
        """Stop every resident (and command of one) started with this test's record."""
        found = live_processes(f"{RECORD}={self.record}")
        for pid in found:
            for sent in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(pid, sent)
                except ProcessLookupError:
                    break
        wait_for(lambda: not live_processes(f"{RECORD}={self.record}"), STOP_WAIT, "exit of this test's residents")

    def _lines(self) -> list[str]:
        try:
            return self.record.read_text().splitlines()
        except FileNotFoundError:
            return []

    @staticmethod
    def _await(home: Path) -> bool:
        """Whether a resident listens for home, once one that is starting (it holds the
        lock, its socket is not there yet) listens."""
        if not held(home / LOCK_NAME):
            return False
        socket = home / SOCKET_NAME
        wait_for(lambda: socket.exists() or not held(home / LOCK_NAME), START_WAIT, f"the resident of {home}")
        return socket.exists()


def held(lock: Path) -> bool:
    """Whether a process holds lock (a resident, or one starting)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


