"""The resident process: one per user and data home, a fork server for `baton` commands
(docs/architecture.md says when it starts, refuses and leaves).

It loads Baton, its libraries, the embedding model and the recall index once; each request
forks a child that becomes the command's process (the client's directory, environment,
umask and standard streams) and runs the same `main(argv)` a fresh process runs. Only what
a fresh process would rebuild from the same files is shared: no connection is open in the
parent, so none crosses a fork. The parent is one thread: a selector over the socket, each
client connection (EOF: the client is gone, so its child is ended) and each child's pidfd.
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import selectors
import signal
import socket
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from baton.skills.runtime import resident_client as client

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from baton.skills.runtime.settings import Settings

REQUEST_WAIT = 1.0  # seconds a connected client may take to send its request and say GO
OWNERSHIP_CHECK = 5.0  # seconds between checks that the socket is still this resident's
MAX_REQUEST = 16 << 20
DISTRIBUTION = "baton-sessions"  # pyproject.toml's project name: whose requirements are watched


@dataclass
class Request:
    argv: list[str]
    cwd: bytes
    umask: int
    parent_pid: int
    streams: list[tuple[str, str, bool, bool]]
    environ: dict[bytes, bytes]


class Refused(Exception):
    """A request not served: the client runs the command itself."""


def main(argv: list[str]) -> int:
    """`baton resident`: serve in the foreground until idle; 0 also when another serves.
    `--lock-fd N`: resident.lock, taken by the command that started this process."""
    # Before NumPy is imported: no BLAS or tokenizer thread pool may exist when the process forks.
    for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[threads] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from baton.errors import BatonError
    from baton.pydantic_plugins import switch_off

    switch_off()  # before the preload builds the models' validators
    from baton.skills.runtime.settings import Settings

    try:
        settings = Settings.from_env()
    except BatonError as exc:
        print(f"baton: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if not settings.resident:
        print("baton: the resident process is switched off (BATON_RESIDENT)", file=sys.stderr)
        return 2
    off = client.unsupported()
    if off is not None:
        print(f"baton: the resident process is off: {off}", file=sys.stderr)
        return 2
    if argv not in ([], ["--lock-fd", "3"]):
        print("usage: baton resident", file=sys.stderr)
        return 2
    home = settings.home.absolute()
    lock = _lock(home, 3 if argv else None)
    if lock is None:
        print(f"baton: a resident process already serves {home}", file=sys.stderr)
        return 0
    _preload_at_lowest_priority(settings)
    gc.freeze()  # what is loaded now stays out of the children's collections: their pages stay shared
    os.chdir("/")  # holds no directory of the user's; each child takes its client's
    Resident(home, settings.resident_idle, lock, recall_embedded=not settings.qdrant_url).serve()
    return 0


def _lock(home: Path, inherited: int | None) -> int | None:
    """resident.lock, held: the descriptor the spawning command handed over, else taken
    here; None when another process holds it."""
    from baton.locks import taken

    if inherited is not None:
        os.set_inheritable(inherited, False)
        return inherited
    return taken(home / client.LOCK_NAME)


def _preload_at_lowest_priority(settings: Settings) -> None:
    """preload on a thread of its own at the lowest priority (baton.processes): the start
    takes no core and no disk from the command the user waits for, while this thread, which
    forks the children that run commands, keeps the user's own priority for them (Linux keeps
    priorities per thread, and an unprivileged process cannot raise its own back)."""
    from concurrent.futures import ThreadPoolExecutor

    from baton.processes import run_at_lowest_priority

    with ThreadPoolExecutor(1, initializer=run_at_lowest_priority) as thread:
        thread.submit(preload, settings).result()


def preload(settings: Settings) -> None:
    """Import what commands import, load the model and map the recall index: every module of
    the kernel and of the layers of the skills, then of each store package (those the layers
    import, and recall, which the warm-up loads), and the client library of each server the
    settings name. A package inside a layer (the dashboard's, run by `baton serve` in its own
    process) and the libraries a command imports lazily (not pathspec, which matches leases
    before an edit) are left to the command; so is a module that cannot be imported (an extra
    not installed), which the command reports as it would anyway."""
    import baton.skills

    layers = [info.name for info in pkgutil.iter_modules(baton.skills.__path__, "baton.skills.") if info.ispkg]
    for package in ("baton", *layers):
        _import_modules(package)
    # Caches a command fills on first use, filled here once: argparse's and gettext's (the
    # parser built once and dropped: each command builds its own), re's cache of the
    # redaction rules (a command compiles them again: a lookup), and the stores' own.
    from baton.skills.frontends import cli

    cli._parser()
    with suppress(Exception):
        from baton.redaction import redactor

        redactor(None).warm()
    from baton.skills.runtime.warm_stores import warm

    warm(settings)
    # pathspec, which the check before an edit imports only to match a lease that may cover
    # the file (baton.skills.core.path_patterns): a library Baton always installs.
    with suppress(ImportError):
        import pathspec.gitignore  # noqa: F401
    # Baton's tools as `baton mcp` serves them (their schemas and argument models built).
    from baton.skills.frontends.mcp_server import catalogue

    catalogue(cli.COMMANDS)
    for package in _stores_loaded():
        _import_modules(package)


def _stores_loaded() -> list[str]:
    """The store packages imported so far: Baton's packages directly in baton, but the skills."""
    return sorted(name for name, module in list(sys.modules.items())
                  if name.count(".") == 1 and name.startswith("baton.") and hasattr(module, "__path__")
                  and name != "baton.skills")


def _import_modules(package: str) -> None:
    """Import each module directly in package (not its packages)."""
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
        if not info.ispkg:
            with suppress(Exception):  # left to the command that needs it, which reports it
                importlib.import_module(info.name)


class Resident:
    def __init__(self, home: Path, idle: float, lock: int, *, recall_embedded: bool) -> None:
        self.home = home
        self.recall_embedded = recall_embedded
        self.idle = idle
        self.lock = lock
        self.path = home / client.SOCKET_NAME
        self.sources = _sources()
        self.fingerprint = client.install_fingerprint()
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, client connection)
        self.listener: socket.socket | None = None

    def serve(self) -> None:
        self.listener = listener = self._listen()
        signal.signal(signal.SIGTERM, _leave)
        signal.signal(signal.SIGINT, _leave)
        self.selector.register(listener, selectors.EVENT_READ, "listener")
        bound = os.stat(self.path)
        last = time.monotonic()
        try:
            while True:
                wait = None if self.children else max(0.0, last + self.idle - time.monotonic())
                if wait == 0.0 or not self._still_bound(bound):
                    return
                wait = OWNERSHIP_CHECK if wait is None else min(wait, OWNERSHIP_CHECK)
                for key, _ in self.selector.select(wait):
                    if key.data == "listener":
                        self._accept(listener)
                    elif key.data == "child":
                        self._reap(key.fd)
                    elif key.data in self.children and self.children[key.data][1] is key.fileobj:
                        self._client_event(key.fileobj, key.data)  # unless its child was reaped just now
                    last = time.monotonic()
        except _Leave:
            pass
        finally:
            # Before the lock goes, and only our own socket: a data home removed and made again
            # may hold another resident's.
            if self._still_bound(bound):
                with suppress(OSError):
                    os.unlink(self.path)
            listener.close()
            os.close(self.lock)

    def _still_bound(self, bound: os.stat_result) -> bool:
        """The socket is still the one this process bound: a data home removed (a test's, a
        benchmark's) or taken over leaves no resident waiting out its idle time for nobody."""
        try:
            now = os.stat(self.path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (bound.st_dev, bound.st_ino)

    def _listen(self) -> socket.socket:
        """The socket, created 0600 (the umask covers the moment between bind and chmod)."""
        with suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a resident that died: the lock says none runs
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o177)
        try:
            listener.bind(os.fsencode(self.path))
        finally:
            os.umask(umask)
        os.chmod(self.path, 0o600)
        listener.listen(64)
        listener.setblocking(False)
        return listener

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        fds: list[int] = []
        try:
            conn.settimeout(REQUEST_WAIT)
            if client.peer_uid(conn) != os.getuid():
                raise Refused("another user")
            try:
                # First, so that a client of a newer protocol meets no older resident: a source file or
                # a distribution changed since (_sources: a few hundred stats, about a millisecond).
                if _sources(self.sources) != self.sources:
                    raise _Leave
                request = self._read(conn)
            except _Leave:
                with suppress(OSError):
                    conn.sendall(client.STALE)
                raise
            conn.sendall(client.ACCEPT)
            go, fds, _, _ = socket.recv_fds(conn, 1, 3)
            if go != client.GO or len(fds) != 3:
                raise Refused("the client gave up")
            self._fork(request, fds, conn)
        except (Refused, OSError, ValueError):
            conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def _read(self, conn: socket.socket) -> Request:
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            if len(data) >= 4 and int.from_bytes(data[:4], "big") > MAX_REQUEST:
                raise Refused("too large")
            chunk = conn.recv(1 << 20)
            if not chunk:
                raise Refused("cut short")
            data += chunk
        return parse_request(data[4:], self.fingerprint)

    def _fork(self, request: Request, fds: list[int], conn: socket.socket) -> None:
        from baton.skills.runtime.warm_stores import keep_index_mapped

        if self.recall_embedded:
            keep_index_mapped(self.home)
        pid = os.fork()
        if pid == 0:
            code = 70  # EX_SOFTWARE: the child failed before the command ran
            try:
                self._forget()
                code = run_child(request, fds, conn)
            except BaseException:  # noqa: BLE001 -- the child must never return into the loop
                with suppress(Exception):
                    import traceback

                    traceback.print_exc()
            finally:
                os._exit(code)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, "child")
        self.selector.register(conn, selectors.EVENT_READ, pidfd)

    def _forget(self) -> None:
        """In a child: close what belongs to the resident (the socket, the lock, the other
        commands' connections and pidfds)."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        if self.listener is not None:
            self.listener.close()
        os.close(self.lock)
        for pidfd, (_, other) in self.children.items():
            os.close(pidfd)
            other.close()

    def _client_event(self, conn: socket.socket, pidfd: int) -> None:
        """The client sends nothing more: readable means it is gone, so its command ends."""
        with suppress(BlockingIOError, InterruptedError):
            if conn.recv(16, socket.MSG_DONTWAIT):
                return
        self.selector.unregister(conn)
        with suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)

    def _reap(self, pidfd: int) -> None:
        """A child's pidfd is readable: it exited (an event left over from a pidfd closed in
        the same round, whose number a new child took, finds it running and waits on)."""
        if pidfd not in self.children:
            return
        pid, conn = self.children[pidfd]
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            return
        del self.children[pidfd]
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if os.WIFSIGNALED(status):  # an exiting child answered itself
            with suppress(OSError):
                conn.sendall(b"%d\n" % (128 + os.WTERMSIG(status)))
        with suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        conn.close()


class _Leave(Exception):
    """Stop serving: out of date, or told to (SIGTERM, SIGINT)."""


def _leave(signum: int, frame: FrameType | None) -> None:
    raise _Leave


def parse_request(data: bytes, fingerprint: bytes) -> Request:
    fields = data.split(b"\0")
    if len(fields) < 9 or fields[0] != client.PROTOCOL:
        raise Refused("another protocol")
    if fields[1] != fingerprint:
        raise _Leave  # another installation or interpreter: the one in use takes over
    cwd, umask, parent, *rest = fields[2:]
    streams = []
    for text in rest[:3]:
        encoding, errors, line, through = text.decode().split(":")
        streams.append((encoding, errors, line == "1", through == "1"))
    argc = int(rest[3])
    argv = [os.fsdecode(word) for word in rest[4:4 + argc]]
    environ = dict(item.split(b"=", 1) for item in rest[4 + argc:] if b"=" in item)
    return Request(argv, cwd, int(umask), int(parent), streams, environ)


def _sources(previous: dict[str, tuple[int, int, int]] | None = None) -> dict[str, tuple[int, int, int]]:
    """The identity (inode, modification time, size) of each file whose change makes this
    process out of date: each Baton module's file loaded here, and the metadata of each
    distribution it imported or Baton requires (an upgrade removes and writes them)."""
    files = previous or _watched()
    stamps = {}
    for path in files:
        try:
            found = os.stat(path)
            stamps[path] = (found.st_ino, found.st_mtime_ns, found.st_size)
        except OSError:
            stamps[path] = (-1, -1, -1)
    return stamps


def _watched() -> list[str]:
    baton = [path for name, module in list(sys.modules.items())
             if name.partition(".")[0] == "baton" and (path := getattr(module, "__file__", None))]
    return baton + _distribution_files()


def _distribution_files() -> list[str]:
    """The dist-info directory, METADATA and RECORD of each distribution a top-level
    module loaded here comes from, and of each that Baton requires whatever its extras
    (pydantic, and cryptography, which a command may import after the resident was started)."""
    import re
    from importlib import metadata

    loaded = {name.partition(".")[0] for name in list(sys.modules)}
    names = {dist for top, dists in metadata.packages_distributions().items() if top in loaded for dist in dists}
    with suppress(metadata.PackageNotFoundError):
        required = metadata.requires(DISTRIBUTION) or []
        names.update(found.group(0) for requirement in required if ";" not in requirement
                     if (found := re.match(r"[A-Za-z0-9._-]+", requirement)))
    files = []
    for name in sorted(names):
        try:
            # The directory of its metadata: public API names none (PathDistribution keeps it here).
            where = getattr(metadata.distribution(name), "_path", None)
        except metadata.PackageNotFoundError:
            continue
        if where is not None:
            files += [str(where), str(Path(where) / "METADATA"), str(Path(where) / "RECORD")]
    return files


def run_child(request: Request, fds: list[int], conn: socket.socket) -> int:
    """Become the client's command, run it as `baton` runs it, answer its exit status."""
    import io
    import tempfile

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    fds.clear()
    os.chdir(request.cwd)
    os.umask(request.umask)
    os.environ.clear()
    os.environb.update(request.environ)
    time.tzset()
    tempfile.tempdir = None
    sys.argv = list(request.argv)
    modes = ("r", "w", "w")
    for target, (encoding, errors, line_buffering, write_through) in enumerate(request.streams):
        raw = io.FileIO(target, modes[target], closefd=False)
        buffered = io.BufferedReader(raw) if target == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(buffered, encoding=encoding, errors=errors, line_buffering=line_buffering,
                                  write_through=write_through)
        setattr(sys, ("stdin", "stdout", "stderr")[target], stream)
        setattr(sys, ("__stdin__", "__stdout__", "__stderr__")[target], stream)
    from baton.skills.frontends.cli import main
    from baton.skills.frontends.invocation import Invocation

    # The client's parent is the agent that ran `baton` (this process's parent is the resident).
    invocation = Invocation(tuple(request.argv[1:]), os.fsdecode(request.cwd), os.environ, request.parent_pid,
                            sys.stdin, sys.stdout, sys.stderr)
    code = _exit_status(lambda: main(invocation=invocation))
    from baton.budget import abandoned

    if not abandoned():  # as leave() does: an abandoned read may hold a handler's lock
        import logging

        # What the interpreter's exit would flush besides the streams: the logging handlers a
        # library attached (the only exit handler a command leaves to it; the checkpoints'
        # temporary directories, whose finalizers are the other, go with their with blocks).
        logging.shutdown()
    for written in (sys.stdout, sys.stderr):
        with suppress(Exception):
            written.flush()
    # The client's streams let go of before it is answered: whoever reads them to their end
    # (the agent, a pipe) waits for no teardown of this process's memory at its exit, which
    # comes before the kernel closes its descriptors.
    nowhere = os.open(os.devnull, os.O_RDWR)
    for target in range(3):
        os.dup2(nowhere, target)
    os.close(nowhere)
    conn.settimeout(None)
    with suppress(OSError):
        conn.sendall(b"%d\n" % code)
    return code


def _exit_status(command: Callable[[], object]) -> int:
    """What `sys.exit(command())` would leave as the exit status, traceback included."""
    try:
        result = command()
    except SystemExit as exc:
        result = exc.code
    except BaseException:  # noqa: BLE001 -- reported as the interpreter reports it
        import traceback

        traceback.print_exc()
        return 1
    if result is None:
        return 0
    if isinstance(result, int):
        return result & 0xFF
    print(result, file=sys.stderr)
    return 1


if __name__ == "__main__":
    # Through its module name, so that this file is among the sources checked for changes.
    from baton.skills.frontends.resident import main as resident

    sys.exit(resident(sys.argv[1:]))
