"""`baton install git-hook` and `baton uninstall git-hook`: the pre-commit guard.

The repository's hooks directory is asked from git (linked worktrees included). A
pre-commit hook that was already there is moved aside, unchanged, to
`pre-commit.before-baton`; Baton's script runs it first with the same arguments and stops
the commit if it fails, then runs `baton guard`. Uninstalling puts the old hook back as
it was, byte for byte and with its mode.

Where a hook manager or a shared directory runs the hooks (`core.hooksPath`, husky,
lefthook, the pre-commit framework), nothing is installed: such hooks find their work by
their own name, are regenerated, or chain a renamed hook themselves, so a renamed one
could silently stop running or run in a loop. The error says what to add to the
manager's configuration instead.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from baton.errors import BadInput, GitFailed
from baton.files import write_whole
from baton.git import first_line, run_git

HOOK = "pre-commit"
CHAINED = "pre-commit.before-baton"
MARKER = "# baton pre-commit guard"


@dataclass
class GitHookReport:
    hook: Path
    action: str  # installed | updated | unchanged | removed | absent
    chained: Path | None = None  # the earlier hook that keeps running (install) or was put back (uninstall)


def hooks_dir(cwd: Path) -> Path:
    try:
        out = run_git(cwd, "rev-parse", "--path-format=absolute", "--git-path", "hooks", check=False)
    except GitFailed as exc:
        raise BadInput(str(exc)) from None
    if out.returncode != 0:
        raise BadInput(f"{cwd} is not in a git repository: {first_line(out.stderr)}")
    return Path(os.fsdecode(out.stdout.strip()))


def script(executable: str, *, strict: bool) -> str:
    guard = f"{shlex.quote(executable)} guard" + (" --strict" if strict else "")
    return f"""#!/bin/sh
{MARKER}: installed by `baton install git-hook`, removed by `baton uninstall git-hook`.
# Warns when staged files were touched by another active ticket{" and blocks the commit (--strict)" if strict else ""}.
chained="$(dirname "$0")/{CHAINED}"
if [ -x "$chained" ]; then
    "$chained" "$@" || exit $?
fi
if command -v {shlex.quote(executable)} >/dev/null 2>&1; then
    exec {guard}
fi
echo "baton: pre-commit guard skipped: {executable} is not there" >&2
"""


def is_baton_script(path: Path) -> bool:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return any(line.startswith(MARKER) for line in handle.readlines()[:3])
    except FileNotFoundError:
        return False


def managed_by(cwd: Path, hook: Path, *, strict: bool) -> str | None:
    """Who else runs this repository's pre-commit hook and where `baton guard` goes
    instead, or None when Baton's script can take the hook's place."""
    command = "baton guard" + (" --strict" if strict else "")
    hooks_path = _git_config(cwd, "core.hooksPath")
    try:
        head = hook.read_bytes()[:4096].decode("utf-8", "replace")
    except (FileNotFoundError, IsADirectoryError):
        head = ""
    if (hooks_path and ".husky" in Path(hooks_path).parts) or "husky" in head:
        return f"husky runs this repository's hooks: add the line `{command}` to .husky/pre-commit"
    if "lefthook" in head:
        return f"lefthook runs this repository's hooks: add `{command}` as a pre-commit command in lefthook.yml"
    if "pre-commit.com" in head:
        return (f"the pre-commit framework runs this repository's hooks: add a local hook to .pre-commit-config.yaml "
                f"(repo: local, entry: `{command}`, language: system, pass_filenames: false, always_run: true)")
    if hooks_path:
        return f"core.hooksPath is set ({hooks_path}): add `{command}` to the pre-commit hook there"
    return None


def install_git_hook(cwd: Path, executable: str, *, strict: bool) -> GitHookReport:
    directory = hooks_dir(cwd)
    hook, chained = directory / HOOK, directory / CHAINED
    wanted = script(executable, strict=strict)
    if is_baton_script(hook):
        if hook.read_text(encoding="utf-8") == wanted:
            return GitHookReport(hook, "unchanged", chained if chained.exists() else None)
        _write_executable(hook, wanted)
        return GitHookReport(hook, "updated", chained if chained.exists() else None)
    manager = managed_by(cwd, hook, strict=strict)
    if manager is not None:
        raise BadInput(f"{manager}; nothing changed")
    if hook.exists() or hook.is_symlink():
        if chained.exists() or chained.is_symlink():
            raise BadInput(f"both {hook} and {chained} exist; move one away first (nothing changed)")
        os.rename(hook, chained)
    _write_executable(hook, wanted)
    return GitHookReport(hook, "installed", chained if chained.exists() or chained.is_symlink() else None)


def uninstall_git_hook(cwd: Path) -> GitHookReport:
    directory = hooks_dir(cwd)
    hook, chained = directory / HOOK, directory / CHAINED
    if not is_baton_script(hook):
        return GitHookReport(hook, "absent")
    hook.unlink()
    if chained.exists() or chained.is_symlink():
        os.rename(chained, hook)
        return GitHookReport(hook, "removed", hook)
    return GitHookReport(hook, "removed")


def _git_config(cwd: Path, key: str) -> str | None:
    try:
        out = run_git(cwd, "config", "--get", key, check=False)
    except GitFailed as exc:
        raise BadInput(str(exc)) from None
    return (os.fsdecode(out.stdout.strip()) or None) if out.returncode == 0 else None


def _write_executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, text, mode=0o755)
