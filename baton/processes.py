"""A process's identity on this machine: its pid and its start time, which together name
one process however the kernel reuses pids (Linux /proc; elsewhere nothing is known)."""

from __future__ import annotations

import os


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
