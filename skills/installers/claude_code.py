"""`baton install claude` and `baton uninstall claude`: Baton's hooks in Claude Code's settings file and its skills
under `.claude/skills/`.

The hook entries follow Claude Code's documented settings schema (https://code.claude.com/docs/en/hooks): `hooks` maps
an event name to matcher groups, each `{"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]}`. Baton adds
one group per event at the end of that event's list and recognises its own handlers by their command, `<baton> hook
<event>` with the PATH fallback and `||` ending of hook_command, whatever path the executable had. The file is read and
written with the json module, laid out as Claude Code itself writes it on each change (two-space JSON: measured in
2.1.332's `updateSettingsForSource`), so the user's entries stay and their layout may not; a copy of the file as it was
goes to the data home first, and an uninstall puts that copy back, byte for byte, while the file is as Baton wrote it
(InstallRecords.settle, shared by every agent's installer). Installing twice changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from baton import clock
from baton.errors import BadInput
from baton.files import write_whole
from baton.skills.core.batons_own import AGENT_SKILLS
from baton.skills.core.binding import Place
from baton.skills.runtime.agents import AGENTS, HOOK_NAMES, Hooks

SCOPES = ("project", "user")

HOOKS = AGENTS["claude"].hooks



def permission_rules() -> list[str]:
    """The allow rules Baton's skills need to run unattended: `Skill(NAME)` for each (Claude Code 2.1 asks before it
    runs a skill otherwise) and the `Bash(baton ...)` patterns of their `allowed-tools`, which pre-approve only within a
    skill that runs."""
    rules = [f"Skill({skill})" for skill in skill_names()]
    for skill in skill_names():
        front = skill_source(skill).decode().split("---\n")[1]
        for rule in re.findall(r"Bash\(baton [a-z-]+ \*\)", front):
            if rule not in rules:
                rules.append(rule)
    return rules


def skill_names() -> list[str]:
    """Baton's agent skills: every `skills/<name>/SKILL.md` it ships (/resume_session, /handoff)."""
    return sorted(path.parent.name for path in AGENT_SKILLS.glob("*/SKILL.md"))


@dataclass
class InstallReport:
    settings: Path
    events: list[str] = field(default_factory=list)  # events whose entries changed
    rules: list[str] = field(default_factory=list)  # permission rules added or removed
    skills: dict[str, str] = field(default_factory=dict)  # skill -> what happened to it
    warnings: list[str] = field(default_factory=list)


def claude_dir(scope: str, place: Place) -> Path:
    """`.claude/` of the worktree (project scope) or the user's Claude Code directory."""
    return place.root / ".claude" if checked_scope(scope) == "project" else agent_home("CLAUDE_CONFIG_DIR", ".claude")


def checked_scope(scope: str) -> str:
    if scope not in SCOPES:
        raise BadInput(f"unknown scope {scope!r}: use project or user")
    return scope


def agent_home(variable: str, name: str) -> Path:
    """An agent's own directory for the user: the variable's, else ~/name."""
    configured = os.environ.get(variable)
    return Path(configured).expanduser() if configured else Path.home() / name


def baton_executable(scope: str) -> str:
    """The executable the hooks run: this install's `baton`. A project's settings are shared through git, so there the
    bare name is used when it resolves to this install."""
    script = Path(sys.prefix) / "bin" / "baton"
    found = shutil.which("baton")
    if not script.exists():
        return found or "baton"
    if scope == "project" and found and Path(found).resolve() == script.resolve():
        return "baton"
    return str(script)


def hook_command(executable: str, hook: str, agent: str = "claude") -> str:
    """The shell command (Claude Code runs it with /bin/sh) of one hook.

    The bare `baton` falls back to this install's directory, appended to PATH: a clone whose PATH has no `baton` still
    finds the one that installed the hooks. `baton hook` always exits 0, so a failure here means Baton did not run at
    all: the session-start command then says so to the user (`systemMessage`), once a session, and the others stay
    quiet, instead of every hook failing with exit status 127."""
    if executable == "baton":
        fallback = Path(sys.prefix) / "bin"
        command = f'PATH="$PATH":{shlex.quote(str(fallback))} baton hook {hook}'
        missing = f"no `baton` on PATH and none in {fallback}"
    else:
        command = f"{shlex.quote(executable)} hook {hook}"
        missing = f"{executable} does not run"
    if hook != "session-start":
        return f"{command} || true"
    told = {"systemMessage": f"Baton cannot run its hooks ({missing}): nothing is recorded for this session. "
                             f"Install Baton, then run `baton install {agent}` again."}
    return f"{command} || echo {shlex.quote(json.dumps(told))}"


def is_baton_hook(command: object) -> bool:
    """Whether a handler's command is one of Baton's, as hook_command writes it now or did before: `[PATH=...]
    <.../baton> hook <name> [|| true | || echo MESSAGE]`."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words and words[0].startswith("PATH="):
        words = words[1:]
    if words[3:] == ["||", "true"] or (len(words) == 6 and words[3:5] == ["||", "echo"]):
        words = words[:3]
    return len(words) == 3 and os.path.basename(words[0]) == "baton" and words[1] == "hook" and words[2] in HOOK_NAMES


def hook_group(hooks: Hooks, event: str, executable: str,
               agent: str = "claude") -> dict:
    """The hooks-file group that runs Baton's hook for one event of an agent's table (HOOKS here, or Codex's): its
    matcher, command and timeout."""
    hook, matcher, timeout = hooks[event]
    handler = {"type": "command", "command": hook_command(executable, hook, agent=agent), "timeout": timeout}
    return {"matcher": matcher, "hooks": [handler]} if matcher else {"hooks": [handler]}


def rules_file(scope: str, base: Path) -> Path:
    """Where the permission rules go: Claude Code 2.1 does not take a Skill rule from a project's shared settings.json
    (a repository cannot allow its own skills), so for a project they go to its settings.local.json (this machine's, not
    committed)."""
    return base / ("settings.local.json" if scope == "project" else "settings.json")


def install_claude(scope: str, place: Place, home: Path) -> InstallReport:
    """Add Baton's hook groups, permission rules and skills; `home` (the data home) keeps which containers and rules the
    install created, so that uninstalling removes those and keeps the user's own, and a copy of each file as it was
    before."""
    base = claude_dir(scope, place)
    report = InstallReport(base / "settings.json")
    executable = baton_executable(scope)
    records = InstallRecords(home)
    for path in dict.fromkeys((report.settings, rules_file(scope, base))):
        original, data = read_settings(path)
        before = hook_containers(data)
        if path == report.settings:
            report.events += [event for event in HOOKS
                              if ensure_group(data, path, event, hook_group(HOOKS, event, executable))]
        added = _ensure_rules(data, path, permission_rules()) if path == rules_file(scope, base) else []
        report.rules += added
        if data != read_settings(path)[1]:
            kept = [rule for rule in records.rules(path) if rule in _allow(data, path) and rule not in added]
            records.settle(path, original, json_like(data, original), None, rules=kept + added,
                           entries=records.created(path) | (hook_containers(data) - before))
    report.skills = {skill: install_skill(base, skill, records, report.warnings) for skill in skill_names()}
    return report


def uninstall_claude(scope: str, place: Place, home: Path) -> InstallReport:
    base = claude_dir(scope, place)
    report = InstallReport(base / "settings.json")
    records = InstallRecords(home)
    for path in dict.fromkeys((report.settings, rules_file(scope, base))):
        original, data = read_settings(path)
        if original is None:
            records.forget(path)
            continue
        created = records.created(path) if records.known(path) else None
        report.rules += _remove_rules(data, path, records.rules(path), created=created or set())
        if path == report.settings:
            report.events += remove_baton_handlers(data, path, created=created)
        changed = data != read_settings(path)[1]
        records.settle(path, original, json_like(data, original) if changed else original, None, entries=None,
                       gone=changed and not data)
    report.skills = {skill: uninstall_skill(base, skill, records, report.warnings) for skill in skill_names()}
    remove_if_empty(base / "skills")
    if scope == "project":
        remove_if_empty(base)
    return report


def claude_state(scope: str, place: Place) -> str:
    """What `baton doctor` says of one scope: Baton's hooks, skills and permission rules there."""
    base = claude_dir(scope, place)
    hooks = read_settings(base / "settings.json")[1].get("hooks")
    events = [event for event, groups in hooks.items() if isinstance(groups, list)
              and any(map(baton_handlers, groups))] if isinstance(hooks, dict) else []
    skills = [skill for skill in skill_names() if (base / "skills" / skill / "SKILL.md").exists()]
    allowed = _allow(read_settings(rules_file(scope, base))[1], base)
    rules = [rule for rule in permission_rules() if rule in allowed]
    if not events and not skills and not rules:
        return "not installed"
    line = (f"hooks for {len(events)} of {len(HOOKS)} events, {len(skills)} of {len(skill_names())} skills, "
            f"{len(rules)} of {len(permission_rules())} permission rules")
    missing = len(events) < len(HOOKS) or len(skills) < len(skill_names()) or len(rules) < len(permission_rules())
    return line + (f": run `baton install claude --scope {scope}`" if missing else "")


class InstallRecords:
    """`<agent>-installs.json` in the data home: per settings file, the containers (`hooks`, `hooks.<Event>`,
    `permissions`, `permissions.allow`) and whether the file itself were created by `baton install <agent>`, and the
    permission rules it added; per skill file, the SHA-256 of what it wrote (so that a skill file still as Baton wrote
    it is replaced by a newer Baton's, and removed, while a user's edit is kept). Copies of the files an install
    changes go to `backups/<agent>/` beside it."""

    def __init__(self, home: Path, agent: str = "claude") -> None:
        self.path = home / f"{agent}-installs.json"
        self.backups = home / "backups" / agent

    def _all(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot read {self.path}: {exc}") from None
        return data if isinstance(data, dict) else {}

    def known(self, settings: Path) -> bool:
        return str(settings) in self._all()

    def _entry(self, settings: Path) -> dict:
        return self._all().get(str(settings), {})

    def created(self, settings: Path) -> set[str]:
        return set(self._entry(settings).get("created", []))

    def rules(self, settings: Path) -> list[str]:
        """The permission rules the install added (not those the user had), in order."""
        return list(self._entry(settings).get("rules", []))

    def keep(self, path: Path, text: str | None, into: list[Path] | None = None) -> str | None:
        """A copy of text (the file as it is now, None: there is none) in the backups, listed in into; its path."""
        if text is None:
            return None
        self.backups.mkdir(parents=True, exist_ok=True)
        stamp = clock.now().strftime("%Y%m%dT%H%M%S%fZ")
        copy = self.backups / f"{stamp}-{re.sub(r'[^A-Za-z0-9._-]+', '_', str(path).strip('/'))}"
        write_file(copy, text)
        if into is not None:
            into.append(copy)
        return str(copy)

    def settle(self, path: Path, text: str | None, new: str, into: list[Path] | None, *, entries: set[str] | None,
               rules: Sequence[str] = (), gone: bool = False) -> None:
        """Write new over path (text: what it holds now) and record Baton's entries in it (the containers or tables
        it created, the permission rules it added). With entries None (nothing of Baton's left), a file still as
        Baton last wrote it goes back to the copy from before the install, byte for byte; one changed since keeps
        new, Baton's entries taken out through the parser. A file the install created goes once nothing is left of
        it (gone: the parser left an empty object; then also one no record speaks of), unless a symbolic link
        (settings kept with dotfiles) stands there. A copy of the file goes to the backups (listed in into) at each
        change."""
        entry, known = self._entry(path), self.known(path)
        # original: the copy of the file from before the install first changed it; written: the SHA-256 of what the
        # install last wrote there (the file is as the install left it while it matches).
        created_file, copy = text is None or bool(entry.get("created_file")), entry.get("original")
        if entries is None and text is not None and entry.get("written") == digest(text.encode()):
            # The copy from before the install ("": the install created the file); a lost copy leaves new.
            before = read_file(Path(copy)) if copy else "" if created_file else None
            new = new if before is None else before
        if new == (text or "") and entries == self.created(path):
            return
        if new != (text or ""):
            kept = self.keep(path, text, into)
            copy = copy or kept
        if entries is None:
            self.forget(path)
        else:
            data = self._all()
            data[str(path)] = {"created": sorted(entries), "created_file": created_file, "rules": list(rules),
                               "original": copy, "written": digest(new.encode())}
            write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        if entries is None and (gone or not new) and (created_file or (gone and not known)) and not path.is_symlink():
            path.unlink(missing_ok=True)
        elif new != (text or ""):
            write_file(path, new)

    def forget(self, path: Path) -> None:
        data = self._all()
        if data.pop(str(path), None) is not None:
            write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def skilldigest(self, target: Path) -> str | None:
        entry = self._all().get(str(target))
        return entry.get("sha256") if isinstance(entry, dict) else None

    def save_skill(self, target: Path, digest: str) -> None:
        data = self._all()
        if data.get(str(target)) != {"sha256": digest}:
            data[str(target)] = {"sha256": digest}
            write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def hook_containers(data: dict) -> set[str]:
    """`hooks`, `hooks.<Event>`, `permissions` and `permissions.allow` where they exist."""
    found = set()
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        found |= {"hooks", *(f"hooks.{event}" for event in hooks)}
    permissions = data.get("permissions")
    if isinstance(permissions, dict):
        found |= {"permissions", *(["permissions.allow"] if "allow" in permissions else [])}
    return found


def _allow(data: dict, path: Path) -> list:
    """`permissions.allow` ([] where missing); BadInput when it or `permissions` is of another type."""
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise BadInput(f"{path}: \"permissions\" is not an object; nothing changed")
    allow = permissions.get("allow", [])
    if not isinstance(allow, list):
        raise BadInput(f"{path}: permissions.allow is not a list; nothing changed")
    return allow


def _ensure_rules(data: dict, path: Path, rules: list[str]) -> list[str]:
    """Each rule in `permissions.allow` (appended where missing): the rules added."""
    missing = [rule for rule in rules if rule not in _allow(data, path)]
    if missing:
        data.setdefault("permissions", {}).setdefault("allow", []).extend(missing)
    return missing


def _remove_rules(data: dict, path: Path, rules: list[str], *, created: set[str]) -> list[str]:
    """Remove the rules the install added (the last of each, last added first), and `permissions.allow` or `permissions`
    when the install created it and it is left empty."""
    allow = _allow(data, path)
    removed = []
    for rule in reversed(rules):
        if rule in allow:
            del allow[len(allow) - 1 - allow[::-1].index(rule)]
            removed.append(rule)
    permissions = data.get("permissions")
    if permissions is not None:
        if not allow and "allow" in permissions and "permissions.allow" in created:
            del permissions["allow"]
        if not permissions and "permissions" in created:
            del data["permissions"]
    return removed


def ensure_group(data: dict, path: Path, event: str, group: dict) -> bool:
    """Exactly one Baton group for event, equal to group: appended if missing, replaced if it differs (another
    executable path, matcher or timeout). Whether anything changed."""
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInput(f"{path}: \"hooks\" is not an object; nothing changed")
    groups = hooks.get(event, [])
    if not isinstance(groups, list):
        raise BadInput(f"{path}: hooks.{event} is not a list; nothing changed")
    if [g for g in groups if baton_handlers(g)] == [group]:
        return False
    data["hooks"] = hooks
    hooks[event] = [*_without_baton(groups), group]
    return True


def remove_baton_handlers(data: dict, path: Path, *, created: set[str] | None) -> list[str]:
    """Remove Baton's handlers, and each group left empty; an event list or the `hooks` table left empty goes too if the
    install created it (`created`; None: any). The events that had one."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    events = []
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            raise BadInput(f"{path}: hooks.{event} is not a list; nothing changed")
        if any(baton_handlers(group) for group in groups):
            events.append(event)
            hooks[event] = _without_baton(groups)
            if not hooks[event] and (created is None or f"hooks.{event}" in created):
                del hooks[event]
    if events and not hooks and (created is None or "hooks" in created):
        del data["hooks"]
    return events


def _without_baton(groups: list) -> list:
    """The groups without Baton's handlers; a group left with none goes."""
    kept = []
    for group in groups:
        mine = baton_handlers(group)
        rest = [h for h in group["hooks"] if h not in mine] if mine else None
        if not mine:
            kept.append(group)
        elif rest:
            kept.append({**group, "hooks": rest})
    return kept


def baton_handlers(group: object) -> list[dict]:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return [h for h in handlers if isinstance(h, dict) and h.get("type") == "command"
            and is_baton_hook(h.get("command"))] if isinstance(handlers, list) else []


def read_settings(path: Path) -> tuple[str | None, dict]:
    """An agent's JSON settings file: (its text or None where there is none, its object)."""
    text = read_file(path)
    if text is None:
        return None, {}
    try:
        data = json.loads(text, parse_constant=_not_json, object_pairs_hook=_unique)
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON ({exc}); nothing changed") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} does not hold a JSON object; nothing changed")
    return text, data


def _unique(pairs: list[tuple[str, object]]) -> dict:
    """An object whose keys are unique: of a key given twice, json keeps the last and so would lose what the first
    held."""
    data = dict(pairs)
    if len(data) < len(pairs):
        repeated = next(key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1)
        raise ValueError(f"the key {json.dumps(repeated)} is given twice")
    return data


def _not_json(word: str) -> NoReturn:
    """NaN and Infinity: Python's json reads them, JSON (and Claude Code) does not."""
    raise ValueError(f"{word} is not JSON")


def json_like(data: dict, original: str | None) -> str:
    """data as JSON laid out as the agents write their settings (JSON.stringify with two spaces: Claude Code 2.1
    rewrites the whole file so on each change of its own, Copilot its mcp-config.json), keeping the original's line ends
    and final newline."""
    newline = "\r\n" if original is not None and "\r\n" in original else "\n"
    text = json.dumps(data, indent=2, ensure_ascii=False).replace("\n", newline)
    return text + (newline if original is None or original.endswith("\n") else "")



def read_file(path: Path) -> str | None:
    """An agent's UTF-8 settings file as text, None where there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8; nothing changed") from None


def write_file(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its permissions; a symbolic link (settings kept with dotfiles) stays a link
    and its target is replaced."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, text, mode=path.stat().st_mode & 0o7777 if path.exists() else None)


def skill_source(skill: str) -> bytes:
    return (AGENT_SKILLS / skill / "SKILL.md").read_bytes()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_skill(base: Path, skill: str, records: InstallRecords, warnings: list[str]) -> str:
    target = base / "skills" / skill / "SKILL.md"
    wanted = skill_source(skill)
    action = "installed"
    if target.exists():
        present = target.read_bytes()
        if present == wanted:
            records.save_skill(target, digest(wanted))
            return "unchanged"
        if digest(present) != records.skilldigest(target):
            warnings.append(f"{target} exists with other content; left as it is "
                            "(remove it and install again to replace it)")
            return "kept (other content)"
        action = "updated"  # as an earlier Baton wrote it
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(wanted)
    records.save_skill(target, digest(wanted))
    return action


def uninstall_skill(base: Path, skill: str, records: InstallRecords, warnings: list[str]) -> str:
    target = base / "skills" / skill / "SKILL.md"
    if not target.exists():
        records.forget(target)
        return "absent"
    present = target.read_bytes()
    if present != skill_source(skill) and digest(present) != records.skilldigest(target):
        warnings.append(f"{target} differs from Baton's skill; left in place")
        return "kept (other content)"
    target.unlink()
    records.forget(target)
    remove_if_empty(target.parent)
    return "removed"


def remove_if_empty(directory: Path) -> None:
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
