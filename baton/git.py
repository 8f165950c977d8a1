"""Every git command Baton runs itself: one helper (run_git), one argument vector
(git_argv), one error (baton.errors.GitFailed) and one way to wait.

A repository's own configuration can name a program that git runs on `git status`,
`git diff` and more (`core.fsmonitor`): Baton's calls turn it off, so reading a worktree
never runs code from its `.git/config`. The handoff probes do the same through their
environment (baton.skills.handoff.probes.probe_environment). No optional locks are taken
(GIT_OPTIONAL_LOCKS=0): Baton reading a worktree never holds the index lock from its user.

A git command waits at most its cap (GIT_CAP unless its caller knows better) and what the
command's deadline has left (baton.deadline); it runs as every bounded child does
(baton.processes.run_bounded), and the error says which limit ran out. subprocess is
imported where used: the hooks import this module.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from baton.errors import GitFailed
from baton.shown_text import clipped

if TYPE_CHECKING:
    import subprocess

    from baton.deadline import Deadline

GIT_CAP = 10.0  # seconds one git command may wait, within the command's deadline


def git_argv(*args: str) -> list[str]:
    return ["git", "-c", "core.fsmonitor=false", *args]


def run_git(cwd: Path | str, *args: str, cap: float = GIT_CAP, deadline: Deadline | None = None,
            input: bytes | None = None, check: bool | Collection[int] = True,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` in cwd and answer what it did (output as bytes). Raises GitFailed
    when git cannot start, gives no answer within min(cap, what the deadline has left), or
    exits with a status `check` does not accept (True: only 0; False: any; else those
    given). env: the environment instead of the process's own."""
    import subprocess
    from contextlib import nullcontext

    from baton.deadline import wait_for
    from baton.processes import run_bounded
    from baton.pydantic_plugins import as_given

    what = f"git {subcommand(args)}"
    wait = wait_for(cap, deadline)
    if wait.seconds <= 0:
        raise GitFailed(f"{what}: not started, no time left of {deadline}" if deadline is not None
                        else f"{what}: no time to run")
    argv = git_argv(*args)
    try:
        with deadline.waiting() if deadline is not None else nullcontext():
            ran = run_bounded(argv, wait=wait.seconds, cwd=cwd, input=input,
                              env={**as_given(env), "GIT_OPTIONAL_LOCKS": "0"})
    except OSError as exc:
        raise GitFailed(f"{what}: cannot run git: {exc.strerror or exc}") from None
    if ran.returncode is None:
        raise GitFailed(wait.no_answer(what))
    done = subprocess.CompletedProcess(argv, ran.returncode, ran.stdout, ran.stderr)
    if check is not False and done.returncode not in ((0,) if check is True else check):
        first = first_line(ran.stderr)
        raise GitFailed(f"{what} exited {done.returncode}" + (f": {first}" if first else ""))
    return done


def first_line(stderr: bytes) -> str:
    """git's first line of complaint, as one line of at most 200 characters."""
    line = next((line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()), "")
    return clipped(line, 200)


def subcommand(args: tuple[str, ...]) -> str:
    """The git command's name, past its `-c name=value` and other options."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return args[0] if args else "git"
