"""PostgreSQL from Debian's packages, run by the `postgres` user when we are root."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.servers.common import free_port, port_open
from tests.timing import wait_for


def bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("PostgreSQL server not installed: apt-get install -y postgresql")
    return Path(found[-1]).parent


class PostgresServer:
    def __init__(self, port: int | None = None) -> None:
        # Its own directory straight under the system temp dir: the postgres user must be
        # able to reach it, which a test's private tmp_path does not allow.
        self.root = Path(tempfile.mkdtemp(prefix="baton-postgres-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.port = port or free_port()
        self._as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, text=True)

    def start(self) -> PostgresServer:
        if port_open(self.port):
            return self
        if not (self.data / "PG_VERSION").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            self.sockets.mkdir(exist_ok=True)
            if self._as_user:
                owner = pwd.getpwnam("postgres")
                for path in (self.root, self.sockets):
                    os.chown(path, owner.pw_uid, owner.pw_gid)
            self._run(str(bin_dir() / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(bin_dir() / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
                  "-w", "-t", "30", "start")
        wait_for(lambda: port_open(self.port), timeout=30, what="PostgreSQL")
        return self

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def _processes(self) -> list[int]:
        """The postmaster and its children (each backend is a process of its own)."""
        pid = self.pid()
        if pid is None:
            return []
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            if int(fields[1]) == pid:
                children.append(int(Path(stat).parent.name))
        return [pid, *children]

    def pause(self) -> None:
        """Stall the server (SIGSTOP to the postmaster and every backend): connections stay
        open and nothing is answered; resume() lets it go on."""
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def kill(self) -> None:
        """Take the server away as a crash would: SIGQUIT drops every connection at once and
        exits without a checkpoint (the next start recovers). Not SIGKILL: a killed
        postmaster leaves its lock file and its backends behind."""
        pid = self.pid()
        if pid:
            os.kill(pid, signal.SIGQUIT)
            wait_for(lambda: not port_open(self.port) and not (self.data / "postmaster.pid").exists(),
                     timeout=10, what="PostgreSQL shutdown")

    def stop(self) -> None:
        if self.pid() and port_open(self.port):
            self._run(str(bin_dir() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
