"""The argument vector of every git command Baton runs itself.

A repository's own configuration can name a program that git runs on `git status`,
`git diff` and more (`core.fsmonitor`): Baton's calls turn it off, so reading a worktree
never runs code from its `.git/config`. The handoff probes do the same through their
environment (baton.skills.handoff.probes.probe_environment).
"""

from __future__ import annotations


def git_argv(*args: str) -> list[str]:
    return ["git", "-c", "core.fsmonitor=false", *args]
