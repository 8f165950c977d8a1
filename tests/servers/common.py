from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Self
from xml.etree import ElementTree

from tests.timing import wait_for


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of the process is stopped by a signal (state T in /proc)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks]
    except (FileNotFoundError, ProcessLookupError):
        return True  # gone: nothing answers
    return all(state in ("T", "t", "Z", "X") for state in states)


FIRST_PORT = 10000  # the least port free_port hands out: above the well-known services'


def free_port() -> int:
    """A port no process listens on, below the kernel's ephemeral range. A port from that range
    (what binding port 0 gives) can be taken by any outgoing connection on the machine between
    this probe and the server's bind, or while an outage test has the server stopped (a Neo4j
    that then failed to bind was seen on the busy 2-core machine); below it, only a listener can."""
    ephemeral = _ephemeral_start()
    if ephemeral <= FIRST_PORT + 1000:  # a range that leaves no room below it: any free port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]
    for _ in range(1000):
        port = random.randrange(FIRST_PORT, ephemeral)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {FIRST_PORT} and {ephemeral}")


def _ephemeral_start() -> int:
    """The first port of the kernel's range for outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def pom_property(pom: Path, name: str) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    value = ElementTree.parse(pom).getroot().findtext(f"m:properties/m:{name}", namespaces=ns)
    if not value:
        raise RuntimeError(f"no {name} property in {pom}")
    return value


def fetch_maven_jars(pom: Path, cache_name: str) -> Path:
    """The pom's runtime jars, copied once from Maven Central into a cache outside the repo."""
    libs = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "baton" / cache_name / "libs"
    if libs.is_dir():
        return libs
    if not shutil.which("mvn"):
        raise RuntimeError("Maven not installed: apt-get install -y maven")
    libs.parent.mkdir(parents=True, exist_ok=True)
    # Copy into a scratch folder and rename it into place, so an interrupted or concurrent
    # fetch never leaves a half-filled libs folder behind.
    scratch = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    try:
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={scratch}"],
            check=False, capture_output=True, text=True, timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mvn could not fetch the {cache_name} jars:\n{(result.stdout + result.stderr)[-4000:]}")
        try:
            scratch.rename(libs)
        except OSError:
            if not libs.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return libs


class JvmServer(ABC):
    """One JVM in its own process group under a temporary root, its output in root/server.log.

    A subclass writes its configuration and names the java command (_prepare), and says when
    the server answers once its port listens (_answers)."""

    name: str  # in messages and the root's name: "Kafka", "Neo4j"
    start_timeout: float
    stop_timeout: float

    def __init__(self, port: int | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"baton-{self.name.lower()}-"))
        self.port = port or free_port()
        self.log = self.root / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    @abstractmethod
    def address(self) -> str:
        """Where clients connect."""

    @abstractmethod
    def _prepare(self) -> list[str]:
        """Write what the server reads at start; return the command that runs it."""

    @abstractmethod
    def _answers(self) -> bool:
        """Whether a client gets an answer; asked only once the port listens."""

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> Self:
        if self.running():
            return self
        command = self._prepare()
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            wait_for(self._ready, timeout=self.start_timeout, what=f"{self.name} on {self.address}")
        except (TimeoutError, RuntimeError) as error:
            self._abandon()  # no half-started JVM left behind
            raise type(error)(f"{error}; tail of {self.log}:\n{self.log_tail()}") from None
        return self

    def _ready(self) -> bool:
        if not self.running():
            raise RuntimeError(f"{self.name} exited during start")
        return port_open(self.port) and self._answers()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def _signal(self, process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
        # Only while unreaped: a reaped process's group id may already belong to someone else.
        if process.poll() is None:
            os.killpg(process.pid, signum)  # its own group: start_new_session

    def _abandon(self) -> None:
        """SIGKILL the server and reap it, without waiting for its port: after a failed start
        another process may hold that port."""
        process, self._process = self._process, None
        if process is not None:
            self._signal(process, signal.SIGKILL)
            process.wait(timeout=self.stop_timeout)

    def pause(self) -> None:
        """Stall the server (SIGSTOP): connections stay open and nothing is answered, as in
        a long pause of its JVM; resume() lets it go on with what it was sent meanwhile."""
        if self._process is not None:
            self._signal(self._process, signal.SIGSTOP)
            # kill() returns before every thread has stopped: on busy cores a JVM thread may
            # still answer a request sent right after it. Stalled means every thread stopped.
            pid = self._process.pid
            wait_for(lambda: _all_threads_stopped(pid), timeout=10, what=f"every thread of {self.name} stopped")

    def resume(self) -> None:
        if self._process is not None:
            self._signal(self._process, signal.SIGCONT)

    def kill(self) -> None:
        """Take the server away as a crash would; the next start() recovers its data."""
        if self._process is None:
            return
        self._abandon()
        wait_for(lambda: not port_open(self.port), timeout=self.stop_timeout, what=f"{self.name} shutdown")

    def stop(self) -> None:
        if self._process is not None:
            self._signal(self._process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=self.stop_timeout)  # kill() below ends it
        self.kill()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
