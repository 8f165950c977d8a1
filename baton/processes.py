"""A process's identity on this machine: its pid and its start time, which together name
one process however the kernel reuses pids (Linux /proc; elsewhere nothing is known); and
the lowest priority, which Baton's own background work runs at."""

from __future__ import annotations

import os
from contextlib import suppress

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
