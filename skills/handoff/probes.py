"""Running one probe: an argument vector, no shell, a timeout, capped output, a minimal
environment, in the worktree root. A probe comes from a handoff anyone with write access to
the branch can edit, so it sees none of the user's environment beyond what finding programs
needs, cannot read the terminal, and is killed with its process group when it ends or its
time is up (baton.processes.run_bounded).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from baton.processes import path_outside, run_bounded
from baton.shown_text import clipped, escape_controls

OUTPUT_CAP = 64 * 1024  # bytes kept from a probe's output; the rest is read and dropped
SHOWN_LINES = 200  # lines of output a handoff records (the digest covers all kept output)
SHOWN_LINE_CHARS = 300


COMPLETED = "completed"
TIMED_OUT = "timed_out"
NOT_RUNNABLE = "not_runnable"


def probe_environment(root: Path) -> dict[str, str]:
    """What a probe sees of the environment: enough to find programs, nothing else.

    PATH keeps only entries outside the worktree at root (baton.processes.path_outside).
    """
    env = {"PATH": path_outside(root), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "NO_COLOR": "1",
           # Probes read state; they must not take git's index lock from the agent's own git.
           "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
           # A repository's own .git/config may name a command git runs on `git status`.
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false"}
    for name in ("HOME", "TMPDIR"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """One execution: completed (with an exit status), timed out, or not runnable here."""

    outcome: str
    exit_status: int | None = None
    output: str = ""
    truncated: bool = False
    reason: str | None = None

    @property
    def completed(self) -> bool:
        return self.outcome == COMPLETED


def run_probe(argv: list[str] | tuple[str, ...], cwd: Path, *, timeout: float) -> ProbeRun:
    """Run argv in cwd and wait at most timeout seconds; never raises for the probe's sake."""
    env = probe_environment(cwd)
    # A bare program name is found on the cleaned PATH, never in the working directory.
    program = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=env["PATH"])
    if program is None:
        return ProbeRun(NOT_RUNNABLE, reason=f"command not found: {argv[0]}")
    try:
        ran = run_bounded(argv, wait=timeout, cwd=cwd, env=env, executable=program, merged=True, output_cap=OUTPUT_CAP)
    except FileNotFoundError:
        return ProbeRun(NOT_RUNNABLE, reason=f"command not found: {argv[0]}")
    except PermissionError:
        return ProbeRun(NOT_RUNNABLE, reason=f"not executable here: {argv[0]}")
    except OSError as exc:
        return ProbeRun(NOT_RUNNABLE, reason=f"cannot start {argv[0]}: {exc.strerror or exc}")
    output = normalise_output(ran.stdout.decode("utf-8", errors="replace"))
    if ran.returncode is None:
        return ProbeRun(TIMED_OUT, output=output, truncated=ran.truncated, reason=f"timed out after {timeout:g}s")
    return ProbeRun(COMPLETED, exit_status=ran.returncode, output=output, truncated=ran.truncated)


def normalise_output(text: str) -> str:
    """Line endings unified, trailing spaces and trailing blank lines dropped."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def output_digest(output: str) -> str:
    """A short digest of a probe's whole kept output, so outputs compare beyond what is shown."""
    return hashlib.sha256(output.encode("utf-8")).hexdigest()[:16]


def shown_output(output: str, *, tail: bool = False, lines: int = SHOWN_LINES) -> str:
    """At most `lines` lines (the first ones, or the last with tail), control characters
    escaped, each cut to a width, with a note of how many were left out."""
    all_lines = escape_controls(output).split("\n") if output else []
    chosen = all_lines[-lines:] if tail else all_lines[:lines]
    cut = [clipped(line, SHOWN_LINE_CHARS) for line in chosen]
    left_out = len(all_lines) - len(chosen)
    if left_out:
        note = f"… {left_out} more line{'s' if left_out != 1 else ''}"
        cut = [note, *cut] if tail else [*cut, note]
    return "\n".join(cut)
