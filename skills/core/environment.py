"""The environment manifest: what a worktree's work ran on, content-addressed.

It holds the operating system, the versions of the toolchains found on PATH (each asked
with a bounded wait, all at once, within the command's deadline), the SHA-256 of each
lockfile present, whether each declared service answered its probe, and the exit statuses
of the setup commands run (run_setup). Its id is the SHA-256 of its canonical JSON, so a
checkpoint can name it. It never holds an environment variable's value, a probe's command or
output, nor where a program was found (that would spell out PATH and home directories).
Programs are looked up on PATH without its relative entries and those inside the worktree,
whose files are the branch's: `node --version` must not run a planted `node_modules/.bin/node`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from baton.deadline import Deadline, Wait, wait_for
from baton.errors import GitFailed
from baton.git import run_git
from baton.processes import Ran, path_outside, run_bounded
from baton.pydantic_plugins import as_given

FORMAT = 1
# (name, the command asking its version); java answers on stderr, the others on stdout.
TOOLCHAINS = (("python", ("python3", "--version")), ("node", ("node", "--version")), ("go", ("go", "version")),
              ("java", ("java", "-version")), ("rustc", ("rustc", "--version")), ("git", ("git", "--version")))
LOCKFILES = ("uv.lock", "poetry.lock", "requirements*.txt", "package-lock.json", "pnpm-lock.yaml", "yarn.lock",
             "Cargo.lock", "go.sum")
VERSION_CAP = 3.0  # seconds for one program to say its version (and a service its probe), all side by side
QUICK_WAIT = 1.0  # what a bind or a resume gives them
MAX_VERSION_TEXT = 200


@dataclass(frozen=True, slots=True)
class SetupResult:
    """A setup command the caller ran, and its exit status (None: did not finish)."""

    command: str
    exit_status: int | None


@dataclass(frozen=True, slots=True)
class Manifest:
    id: str
    body: dict

    def to_json(self) -> bytes:
        return _canonical(self.body)

    def for_checkpoint(self) -> tuple[str, bytes]:
        return self.id, self.to_json()


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _version(command: tuple[str, ...], search_path: str, wait: Wait) -> dict:
    ran = _run(None, command, search_path, wait, missing="not found")
    if isinstance(ran, str):
        return {"status": ran}
    said = (ran.stdout + b"\n" + ran.stderr).decode("utf-8", "replace").strip().splitlines()
    first = next((line.strip() for line in said if line.strip()), "")
    if ran.returncode != 0:  # what it said then is an error, which may name paths: not kept
        return {"status": f"exit {ran.returncode}"}
    return {"status": "ok", "version": first[:MAX_VERSION_TEXT]}


def _run(root: Path | None, command: Sequence[str], search_path: str, wait: Wait, *, missing: str) -> Ran | str:
    """The program's run within the wait (its output kept unless in root), or why it did not
    run or answer. missing: what a program not on search_path is said to be."""
    if wait.seconds <= 0:
        return f"not asked: {wait.limit}"
    program = shutil.which(command[0], path=search_path) if os.path.basename(command[0]) == command[0] \
        else command[0]
    if program is None:
        return missing
    try:
        ran = run_bounded([program, *command[1:]], wait=wait.seconds, cwd=root, env=_child_environment(search_path),
                          capture=root is None)
    except OSError as exc:
        return f"cannot run: {exc.strerror or exc}"
    return f"no answer within {wait.limit}" if ran.returncode is None else ran


def _child_environment(search_path: str) -> dict[str, str]:
    return {"PATH": search_path, "LC_ALL": "C", **({"HOME": os.environ["HOME"]} if "HOME" in os.environ else {})}


def _lockfiles(root: Path, wait: Wait, extra: Sequence[str] = ()) -> dict[str, str]:
    """{path relative to root: sha256} of the lockfiles at root and, in a git worktree, the
    tracked ones below it; extra: more globs, relative to root (git pathspecs)."""
    paths = {p.name for pattern in LOCKFILES for p in root.glob(pattern) if p.is_file()}
    paths.update(p.relative_to(root).as_posix() for pattern in extra for p in root.glob(pattern)
                 if p.is_file() and ".git" not in p.relative_to(root).parts)
    with suppress(GitFailed):  # outside git, or git too slow: the lockfiles at the root still count
        listed = run_git(root, "ls-files", "-z", "--", *(f":(glob)**/{pattern}" for pattern in LOCKFILES),
                         *(f":(glob){pattern}" for pattern in extra), cap=wait.seconds)
        paths.update(os.fsdecode(p) for p in listed.stdout.split(b"\0") if p)
    hashes = {}
    for path in sorted(paths):
        try:
            hashes[path] = hashlib.sha256((root / path).read_bytes()).hexdigest()
        except OSError as exc:
            hashes[path] = f"unreadable: {exc.strerror or exc}"
    return hashes


def _probe(root: Path, command: Sequence[str], search_path: str, wait: Wait) -> str:
    """Whether a service answers its probe: "ok", "exit N", "not found" or no answer."""
    ran = _run(root, command, search_path, wait, missing=f"{command[0]} not found")
    return ran if isinstance(ran, str) else "ok" if ran.returncode == 0 else f"exit {ran.returncode}"


def run_setup(root: Path, command: str, argv: Sequence[str], *, output: TextIO | None = None) -> SetupResult:
    """Run one setup command (no shell) in the worktree, its output to `output` (default:
    standard error, streamed when it is a file), and answer its exit status; `command` is
    how the manifest names it."""
    import sys

    output = output or sys.stderr
    try:
        streamed = output.fileno()
    except (OSError, AttributeError):  # io.UnsupportedOperation is an OSError
        streamed = None
    try:
        done = subprocess.run(list(argv), cwd=root, stdin=subprocess.DEVNULL, env=as_given(),
                              stdout=streamed if streamed is not None else subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    except OSError:
        return SetupResult(command, None)
    if streamed is None and done.stdout:
        output.write(done.stdout.decode("utf-8", "replace"))
    return SetupResult(command, done.returncode)


def capture(root: Path, *, setup: Sequence[SetupResult] = (), lockfiles: Sequence[str] = (),
            services: Mapping[str, Sequence[str]] | None = None, wait: float = VERSION_CAP,
            deadline: Deadline | None = None) -> Manifest:
    """The manifest of the environment a worktree (at root) works in now. Takes at most
    about `wait` seconds for the toolchains and the service probes, all asked side by side,
    and no more than the command's deadline has left. lockfiles: globs of more lockfiles;
    services: {name: probe command}."""
    search_path = path_outside(root)
    services = services or {}
    allowed = wait_for(wait, deadline)
    if allowed.seconds <= 0:  # nothing is asked: each says why
        allowed = Wait(0.0, f"no time left of {deadline}")
    charged = deadline.waiting() if deadline is not None else nullcontext()
    with charged, ThreadPoolExecutor(max_workers=len(TOOLCHAINS) + len(services) + 1) as pool:
        asked = {name: pool.submit(_version, command, search_path, allowed) for name, command in TOOLCHAINS}
        probed = {name: pool.submit(_probe, Path(root), command, search_path, allowed)
                  for name, command in services.items()}
        found_locks = pool.submit(_lockfiles, Path(root), allowed, lockfiles)
        toolchains = {name: future.result() for name, future in asked.items()}
        answered = {name: future.result() for name, future in probed.items()}
        locks = found_locks.result()
    body = {"format": FORMAT,
            "os": {"system": platform.system(), "release": platform.release(), "machine": platform.machine()},
            "toolchains": toolchains, "lockfiles": locks,
            "setup": [{"command": s.command, "exit_status": s.exit_status} for s in setup]}
    if services:
        body["services"] = {name: {"status": status} for name, status in sorted(answered.items())}
    return Manifest(hashlib.sha256(_canonical(body)).hexdigest(), body)
