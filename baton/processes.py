"""Processes: a process's identity on this machine (its pid and its start time, which
together name one process however the kernel reuses pids; Linux /proc, elsewhere nothing is
known), the one way Baton runs a child and waits for it (run_bounded: git, the toolchains'
versions, the handoff probes, Codex's app-server), and the lowest priority, which Baton's own
background work runs at. subprocess and selectors are imported where used: the hooks import
this module."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from subprocess import Popen

# ioprio_set(2), which Python's os module does not wrap: its number per architecture, and
# (IOPRIO_WHO_PROCESS, the calling thread, IOPRIO_CLASS_IDLE << 13): the disk only when no one
# else asks for it.
_IOPRIO_SET = {"x86_64": 251, "i686": 289, "aarch64": 30, "riscv64": 30}
_IDLE_IO = (1, 0, 3 << 13)


def run_at_lowest_priority() -> None:
    """Run the calling thread (Linux keeps these per thread, and a thread or child it starts
    inherits them) at the lowest CPU and I/O priority: nice 19, the idle scheduling class,
    and the idle I/O class where the kernel has ioprio_set. Background work then takes no
    core and no disk from a command a user waits for. What the system refuses stays as it was."""
    with suppress(OSError):
        os.nice(19 - os.getpriority(os.PRIO_PROCESS, 0))
    with suppress(OSError, AttributeError):  # SCHED_IDLE: Linux only
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    number = _IOPRIO_SET.get(os.uname().machine)
    if number is not None:
        import ctypes

        with suppress(OSError, AttributeError):
            ctypes.CDLL(None).syscall(number, *_IDLE_IO)


def wait_gone(pid: int, wait: float) -> bool:
    """Whether process pid, not necessarily a child, ended within `wait` seconds; a child
    stays unreaped. Through a pidfd (Linux); where there is none, False at once."""
    import select

    try:
        pidfd = os.pidfd_open(pid)  # readable once the process has exited
    except ProcessLookupError:
        return True
    except (OSError, AttributeError):
        return False
    try:
        waiting = select.poll()  # not select.select: a descriptor past 1023 is refused there
        waiting.register(pidfd, select.POLLIN)
        return bool(waiting.poll(wait * 1000))
    finally:
        os.close(pidfd)


def process_start(pid: int) -> str | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22), which
    with the pid names one process; None where /proc does not say."""
    found = _proc_stat(pid)
    return found[1] if found else None


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether pid runs and, when start is given, is still the process that started then
    (a pid reused by a later process is not it). A zombie is not alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by another user
    except OSError:
        return False
    found = _proc_stat(pid)
    if found is None:
        return True
    state, started = found
    return state not in ("Z", "X") and (start is None or started == start)


def _proc_stat(pid: int) -> tuple[str, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2:].split()  # the name, in parentheses, may hold spaces
    return (fields[0], fields[19]) if len(fields) > 19 else None


def path_outside(root: Path) -> str:
    """PATH with only its absolute entries outside the worktree at root: a worktree's files
    are its branch's, so `git` must never resolve to a `./git`, a `.venv/bin/git` or a
    `node_modules/.bin/git` planted there."""
    real_root = Path(os.path.realpath(root))
    return os.pathsep.join(entry for entry in os.environ.get("PATH", os.defpath).split(os.pathsep)
                           if os.path.isabs(entry) and not Path(os.path.realpath(entry)).is_relative_to(real_root))


class Ran(NamedTuple):
    """What a bounded child did: its exit status (None when it did not end and close its
    output within its wait), what it wrote (each stream kept up to the cap) and whether
    more was written than kept."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool = False


def run_bounded(argv: Sequence[str], *, wait: float, cwd: Path | str | None = None,
                env: Mapping[str, str] | None = None, executable: str | None = None, input: bytes | None = None,
                capture: bool = True, merged: bool = False, output_cap: int | None = None,
                enough: Callable[[bytes], bool] | None = None) -> Ran:
    """Run argv (no shell, no terminal) in a session of its own, write input to it, and read
    what it writes until it ends and closes its output or `wait` seconds pass; then kill its
    process group, always (what it started in the background ends with it), and reap it.
    capture: keep stdout and stderr (merged: as one, in stdout), else send them nowhere;
    output_cap: bytes kept of each, the rest read and dropped so the child never blocks on
    a full pipe; enough: stop as soon as it says the stdout read so far suffices (for a
    server that answers and stays: its input is left open, it is killed, its status None).
    Raises OSError when argv cannot be started.

    A child that calls setsid itself leaves the group and escapes the kill: bounded, not
    sandboxed."""
    import signal
    import subprocess

    until = time.monotonic() + wait
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    process = subprocess.Popen(list(argv), executable=executable, cwd=cwd, env=env, start_new_session=True,
                               stdin=subprocess.DEVNULL if input is None else subprocess.PIPE, stdout=output,
                               stderr=subprocess.STDOUT if capture and merged else output)
    try:
        (stdout, stderr), truncated, closed = _read(process, input, until, output_cap, enough)
        ended = closed and _exited_unreaped(process.pid, until)
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:  # closed, not drained: a grandchild that left the group may hold it open
                stream.close()
    return Ran(process.returncode if ended else None, stdout, stderr, truncated)


def _read(process: Popen, input: bytes | None, until: float, cap: int | None,
          enough: Callable[[bytes], bool] | None) -> tuple[tuple[bytes, bytes], bool, bool]:
    """Write input and read the child's output until it closes it (or enough says so) or
    `until` passes; keep cap bytes of each stream. Returns ((stdout, stderr), truncated,
    whether every stream was closed)."""
    import select
    import selectors

    stdout, stderr = bytearray(), bytearray()
    pending = memoryview(input or b"")
    truncated = False
    with selectors.DefaultSelector() as selector:
        for stream, kept in ((process.stdout, stdout), (process.stderr, stderr)):
            if stream is not None:
                selector.register(stream, selectors.EVENT_READ, kept)
        if process.stdin is not None:
            selector.register(process.stdin, selectors.EVENT_WRITE)
        while selector.get_map():
            remaining = until - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in selector.select(remaining):
                if key.data is None:  # its input
                    try:
                        pending = pending[os.write(key.fd, pending[:select.PIPE_BUF]):]
                    except BrokenPipeError:  # it stopped reading: what it says still counts
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fileobj)
                        if enough is None and process.stdin is not None:  # a server asked keeps it open
                            process.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                kept = key.data
                room = len(chunk) if cap is None else max(cap - len(kept), 0)
                truncated = truncated or len(chunk) > room
                kept += chunk[:room]
                if enough is not None and kept is stdout and enough(bytes(stdout)):
                    return (bytes(stdout), b""), truncated, False
        closed = not selector.get_map()
    return (bytes(stdout), bytes(stderr)), truncated, closed


def _exited_unreaped(pid: int, until: float) -> bool:
    """Wait until the child exits or `until` passes, without reaping it: while it is
    unreaped its pid, which is its process group's id, cannot be given to anyone else."""
    if hasattr(os, "pidfd_open"):
        return wait_gone(pid, max(0.0, until - time.monotonic()))
    while True:  # no pidfd on this platform: poll
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.01)


if __name__ == "__main__":  # python -m baton.processes MODULE ARGS: `python -m MODULE ARGS` at the lowest priority
    import runpy
    import sys

    run_at_lowest_priority()
    del sys.argv[0]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
