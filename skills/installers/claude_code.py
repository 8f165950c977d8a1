"""`baton install claude` and `baton uninstall claude`: Baton's hooks in Claude Code's
settings file and its skills under `.claude/skills/`.

The hook entries follow Claude Code's documented settings schema
(https://code.claude.com/docs/en/hooks): `hooks` maps an event name to matcher groups,
each `{"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]}`. Baton adds one
group per event at the end of that event's list and recognises its own handlers by their
command, `<baton> hook <event>` with the PATH fallback and `||` ending of hook_command,
whatever path the executable had; nothing else in the
file is touched (baton.skills.installers.json_text edits the text in place), so installing twice changes
nothing and uninstalling gives back the file as it was, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from baton.errors import BadInput
from baton.skills.core.binding import Place
from baton.skills.installers import json_text
from baton.skills.runtime.agents import AGENTS, HOOK_NAMES, Hooks

SCOPES = ("project", "user")

HOOKS = AGENTS["claude"].hooks

SKILL_SOURCES = Path(__file__).resolve().parent.parent / "agent_skills"


def permission_rules() -> list[str]:
    """The allow rules Baton's skills need to run unattended: `Skill(NAME)` for each (Claude
    Code 2.1 asks before it runs a skill otherwise) and the `Bash(baton ...)` patterns of
    their `allowed-tools`, which pre-approve only within a skill that runs."""
    import re

    rules = [f"Skill({skill})" for skill in skill_names()]
    for skill in skill_names():
        front = skill_source(skill).decode().split("---\n")[1]
        for rule in re.findall(r"Bash\(baton [a-z-]+ \*\)", front):
            if rule not in rules:
                rules.append(rule)
    return rules


def skill_names() -> list[str]:
    """Baton's agent skills: every `skills/<name>/SKILL.md` it ships (/resume_session, /handoff)."""
    return sorted(path.parent.name for path in SKILL_SOURCES.glob("*/SKILL.md"))


@dataclass
class InstallReport:
    settings: Path
    events: list[str] = field(default_factory=list)  # events whose entries changed
    rules: list[str] = field(default_factory=list)  # permission rules added or removed
    skills: dict[str, str] = field(default_factory=dict)  # skill -> what happened to it
    warnings: list[str] = field(default_factory=list)


def claude_dir(scope: str, place: Place) -> Path:
    """`.claude/` of the worktree (project scope) or the user's Claude Code directory."""
    if scope not in SCOPES:
        raise BadInput(f"unknown scope {scope!r}: use project or user")
    if scope == "project":
        return place.root / ".claude"
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def baton_executable(scope: str) -> str:
    """The executable the hooks run: this install's `baton`. A project's settings are
    shared through git, so there the bare name is used when it resolves to this install."""
    script = Path(sys.prefix) / "bin" / "baton"
    found = shutil.which("baton")
    if not script.exists():
        return found or "baton"
    if scope == "project" and found and Path(found).resolve() == script.resolve():
        return "baton"
    return str(script)


def hook_command(executable: str, hook: str, agent: str = "claude") -> str:
    """The shell command (Claude Code runs it with /bin/sh) of one hook.

    The bare `baton` falls back to this install's directory, appended to PATH: a clone
    whose PATH has no `baton` still finds the one that installed the hooks. `baton hook`
    always exits 0, so a failure here means Baton did not run at all: the session-start
    command then says so to the user (`systemMessage`), once a session, and the others
    stay quiet, instead of every hook failing with exit status 127."""
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
    """Whether a handler's command is one of Baton's, as hook_command writes it now or did
    before: `[PATH=...] <.../baton> hook <name> [|| true | || echo MESSAGE]`."""
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
    """The hooks-file group that runs Baton's hook for one event of an agent's table
    (HOOKS here, or Codex's): its matcher, command and timeout."""
    hook, matcher, timeout = hooks[event]
    handler = {"type": "command", "command": hook_command(executable, hook, agent=agent), "timeout": timeout}
    return {"matcher": matcher, "hooks": [handler]} if matcher else {"hooks": [handler]}


def rules_file(scope: str, base: Path) -> Path:
    """Where the permission rules go: Claude Code 2.1 does not take a Skill rule from a
    project's shared settings.json (a repository cannot allow its own skills), so for a
    project they go to its settings.local.json (this machine's, not committed)."""
    return base / ("settings.local.json" if scope == "project" else "settings.json")


def install_claude(scope: str, place: Place, home: Path) -> InstallReport:
    """Add Baton's hook groups, permission rules and skills; `home` (the data home) keeps
    which containers and rules the install created, so that uninstalling removes those and
    keeps the user's own."""
    base = claude_dir(scope, place)
    settings = base / "settings.json"
    report = InstallReport(settings)
    executable = baton_executable(scope)
    records = InstallRecords(home)
    for path in dict.fromkeys((settings, rules_file(scope, base))):
        original = read_settings(path)
        text = original if original is not None else json_text.new_document({})
        before = hook_containers(text, path)
        if path == settings:
            for event in HOOKS:
                text, changed = ensure_group(text, path, event, hook_group(HOOKS, event, executable))
                if changed:
                    report.events.append(event)
        added: list[str] = []
        if path == rules_file(scope, base):
            text, added = _ensure_rules(text, path, permission_rules())
            report.rules += added
        if text != original:
            created = records.created(path) | (hook_containers(text, path) - before)
            present = set(_allowed(parse_settings(text, path)))
            kept = [rule for rule in records.rules(path) if rule in present and rule not in added]
            records.save(path, created, created_file=original is None or records.created_file(path),
                         rules=kept + added)
            write_file(path, text)
    for skill in skill_names():
        report.skills[skill] = install_skill(base, skill, records, report.warnings)
    return report


def uninstall_claude(scope: str, place: Place, home: Path) -> InstallReport:
    base = claude_dir(scope, place)
    settings = base / "settings.json"
    report = InstallReport(settings)
    records = InstallRecords(home)
    for path in dict.fromkeys((settings, rules_file(scope, base))):
        original = read_settings(path)
        if original is None:
            records.forget(path)
            continue
        created = records.created(path) if records.known(path) else None
        text, removed_rules = _remove_rules(original, path, records.rules(path),
                                            created=created if created is not None else set())
        report.rules += removed_rules
        while path == settings and (removed := remove_one_baton_handler(text, path, created=created)) is not None:
            event, text = removed
            if event not in report.events:
                report.events.append(event)
        if text != original:
            root = parse_settings(text, path)
            if not root.members and not path.is_symlink() and (records.created_file(path)
                                                               or not records.known(path)):
                path.unlink()
            else:
                write_file(path, text)
        records.forget(path)
    for skill in skill_names():
        report.skills[skill] = uninstall_skill(base, skill, records, report.warnings)
    remove_if_empty(base / "skills")
    if scope == "project":
        remove_if_empty(base)
    return report


def claude_state(scope: str, place: Place) -> str:
    """What `baton doctor` says of one scope: Baton's hooks, skills and permission rules there."""
    base = claude_dir(scope, place)
    try:
        data = json.loads((base / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) else {}
    hooks: dict = data["hooks"] if isinstance(data.get("hooks"), dict) else {}
    events = [event for event, groups in hooks.items() if isinstance(groups, list)
              and any(isinstance(g, dict) and isinstance(g.get("hooks"), list)
                      and any(isinstance(h, dict) and is_baton_hook(h.get("command")) for h in g["hooks"])
                      for g in groups)]
    skills = [skill for skill in skill_names() if (base / "skills" / skill / "SKILL.md").exists()]
    try:
        local = json.loads(rules_file(scope, base).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        local = {}
    local = local if isinstance(local, dict) else {}
    permissions: dict = local["permissions"] if isinstance(local.get("permissions"), dict) else {}
    allowed: list = permissions["allow"] if isinstance(permissions.get("allow"), list) else []
    rules = [rule for rule in permission_rules() if rule in allowed]
    if not events and not skills and not rules:
        return "not installed"
    line = (f"hooks for {len(events)} of {len(HOOKS)} events, {len(skills)} of {len(skill_names())} skills, "
            f"{len(rules)} of {len(permission_rules())} permission rules")
    missing = len(events) < len(HOOKS) or len(skills) < len(skill_names()) or len(rules) < len(permission_rules())
    return line + (f": run `baton install claude --scope {scope}`" if missing else "")


class InstallRecords:
    """`claude-installs.json` in the data home: per settings file, the containers (`hooks`,
    `hooks.<Event>`, `permissions`, `permissions.allow`) and whether the file itself were
    created by `baton install claude`, and the permission rules it added;
    per skill file, the SHA-256 of what it wrote (so that a skill file still as Baton
    wrote it is replaced by a newer Baton's, and removed, while a user's edit is kept)."""

    def __init__(self, home: Path, name: str = "claude-installs.json") -> None:
        self.path = home / name

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

    def created(self, settings: Path) -> set[str]:
        return set(self._all().get(str(settings), {}).get("created", []))

    def created_file(self, settings: Path) -> bool:
        return bool(self._all().get(str(settings), {}).get("created_file"))

    def rules(self, settings: Path) -> list[str]:
        """The permission rules the install added (not those the user had), in order."""
        return list(self._all().get(str(settings), {}).get("rules", []))

    def save(self, settings: Path, created: set[str], *, created_file: bool, rules: list[str]) -> None:
        data = self._all()
        data[str(settings)] = {"created": sorted(created), "created_file": created_file, "rules": rules}
        write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def forget(self, path: Path) -> None:
        """Drop the record of a settings file or of a skill file."""
        data = self._all()
        if data.pop(str(path), None) is not None:
            write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def skill_digest(self, target: Path) -> str | None:
        entry = self._all().get(str(target))
        return entry.get("sha256") if isinstance(entry, dict) else None

    def save_skill(self, target: Path, digest: str) -> None:
        data = self._all()
        if data.get(str(target)) != {"sha256": digest}:
            data[str(target)] = {"sha256": digest}
            write_file(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def hook_containers(text: str, path: Path) -> set[str]:
    """`hooks`, `hooks.<Event>`, `permissions` and `permissions.allow` where they exist."""
    root = parse_settings(text, path)
    found = set()
    hooks = root.member("hooks")
    if hooks is not None and hooks.value.is_object:
        found |= {"hooks", *(f"hooks.{m.key}" for m in hooks.value.members)}
    permissions = root.member("permissions")
    if permissions is not None and permissions.value.is_object:
        found.add("permissions")
        if permissions.value.member("allow") is not None:
            found.add("permissions.allow")
    return found


def _allow_list(root: json_text.Node, path: Path) -> tuple[json_text.Node | None, json_text.Node | None]:
    """(the `permissions` object, its `allow` list), each None where missing; BadInput when
    either is of another type."""
    permissions = root.member("permissions")
    if permissions is None:
        return None, None
    if not permissions.value.is_object:
        raise BadInput(f"{path}: \"permissions\" is not an object; nothing changed")
    allow = permissions.value.member("allow")
    if allow is not None and not allow.value.is_array:
        raise BadInput(f"{path}: permissions.allow is not a list; nothing changed")
    return permissions.value, allow.value if allow is not None else None


def _allowed(root: json_text.Node) -> list:
    permissions = root.member("permissions")
    allow = permissions.value.member("allow") if permissions is not None and permissions.value.is_object else None
    return allow.value.value if allow is not None and allow.value.is_array else []


def _ensure_rules(text: str, path: Path, rules: list[str]) -> tuple[str, list[str]]:
    """The text with each rule in `permissions.allow` (appended where missing), and the
    rules added."""
    root = parse_settings(text, path)
    _allow_list(root, path)
    missing = [rule for rule in rules if rule not in _allowed(root)]
    if not missing:
        return text, []
    style = json_text.Style.of(text, root)
    permissions, allow = _allow_list(root, path)
    if permissions is None:
        return json_text.append_member(text, root, "permissions", {"allow": missing}, style), missing
    if allow is None:
        return json_text.append_member(text, permissions, "allow", missing, style), missing
    for rule in missing:
        listed = _allow_list(parse_settings(text, path), path)[1]
        assert listed is not None  # found above, and appending keeps it
        text = json_text.append_item(text, listed, rule, style)
    return text, missing


def _remove_rules(text: str, path: Path, rules: list[str], *, created: set[str]) -> tuple[str, list[str]]:
    """The text without the rules the install added (the last of each, last added first),
    and `permissions.allow` or `permissions` gone when the install created it and it is
    left empty."""
    removed = []
    for rule in reversed(rules):
        permissions, allow = _allow_list(parse_settings(text, path), path)
        if allow is None:
            break
        indexes = [i for i, item in enumerate(allow.items) if item.value == rule]
        if indexes:
            text = json_text.remove(text, allow, indexes[-1])
            removed.append(rule)
    root = parse_settings(text, path)
    permissions, allow = _allow_list(root, path)
    allow_member = permissions.member("allow") if permissions is not None else None
    if permissions is not None and allow_member is not None and allow is not None and not allow.items \
            and "permissions.allow" in created:
        text = json_text.remove(text, permissions, permissions.members.index(allow_member))
        root = parse_settings(text, path)
        permissions, _ = _allow_list(root, path)
    member = root.member("permissions")
    if permissions is not None and member is not None and not permissions.members and "permissions" in created:
        text = json_text.remove(text, root, root.members.index(member))
    return text, removed


def ensure_group(text: str, path: Path, event: str, group: dict) -> tuple[str, bool]:
    """The text with exactly one Baton group for event, equal to group; appended if missing,
    replaced if it differs (another executable path, matcher or timeout)."""
    root = parse_settings(text, path)
    groups = _event_groups(root, path, event)
    ours = [g for g in groups.items if _baton_handlers(g)] if groups else []
    if len(ours) == 1 and ours[0].value == group:
        return text, False
    while (removed := remove_one_baton_handler(text, path, events=(event,), created=set())) is not None:
        text = removed[1]
    root = parse_settings(text, path)
    style = json_text.Style.of(text, root)
    hooks = root.member("hooks")
    if hooks is None:
        return json_text.append_member(text, root, "hooks", {event: [group]}, style), True
    listed = hooks.value.member(event)
    if listed is None:
        return json_text.append_member(text, hooks.value, event, [group], style), True
    return json_text.append_item(text, listed.value, group, style), True


def remove_one_baton_handler(text: str, path: Path, events: tuple[str, ...] | None = None, *,
                              created: set[str] | None = None) -> tuple[str, str] | None:
    """Remove one Baton handler, and its group when it is left empty; an event list or the
    `hooks` table left empty goes too if the install created it (`created`; None: any).
    Returns (event, new text), or None when there is no Baton handler."""
    root = parse_settings(text, path)
    hooks = root.member("hooks")
    if hooks is None:
        return None
    for event_index, event in enumerate(hooks.value.members):
        if events is not None and event.key not in events:
            continue
        if not event.value.is_array:
            raise BadInput(f"{path}: hooks.{event.key} is not a list; nothing changed")
        groups = event.value  # this member's list: a key may be duplicated (the last one counts)
        for group_index, group in enumerate(groups.items):
            handlers = _handler_list(group)
            if handlers is None:
                continue
            for handler_index in _baton_handlers(group):
                if len(handlers.items) > 1:
                    return event.key, json_text.remove(text, handlers, handler_index)
                if len(groups.items) > 1 or not _ours(f"hooks.{event.key}", created):
                    return event.key, json_text.remove(text, groups, group_index)
                if len(hooks.value.members) > 1 or not _ours("hooks", created):
                    return event.key, json_text.remove(text, hooks.value, event_index)
                return event.key, json_text.remove(text, root, root.members.index(hooks))
    return None


def _ours(container: str, created: set[str] | None) -> bool:
    return created is None or container in created


def _event_groups(root: json_text.Node, path: Path, event: str) -> json_text.Node | None:
    hooks = root.member("hooks")
    if hooks is None:
        return None
    if not hooks.value.is_object:
        raise BadInput(f"{path}: \"hooks\" is not an object; nothing changed")
    groups = hooks.value.member(event)
    if groups is None:
        return None
    if not groups.value.is_array:
        raise BadInput(f"{path}: hooks.{event} is not a list; nothing changed")
    return groups.value


def _handler_list(group: json_text.Node) -> json_text.Node | None:
    """The group's `hooks` list, None when it has none."""
    handlers = group.member("hooks") if group.is_object else None
    return handlers.value if handlers is not None and handlers.value.is_array else None


def _baton_handlers(group: json_text.Node) -> list[int]:
    handlers = _handler_list(group)
    if handlers is None:
        return []
    return [i for i, h in enumerate(handlers.value)
            if isinstance(h, dict) and h.get("type") == "command" and is_baton_hook(h.get("command"))]


def read_settings(path: Path) -> str | None:
    text = read_file(path)
    if text is not None:
        parse_settings(text, path)
    return text


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


def parse_settings(text: str, path: Path) -> json_text.Node:
    try:
        root = json_text.parse(text)
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON ({exc}); nothing changed") from None
    if not root.is_object:
        raise BadInput(f"{path} does not hold a JSON object; nothing changed")
    return root


def write_file(path: Path, text: str) -> None:
    """Replace the file atomically, keeping its permissions; a symbolic link (settings kept
    with dotfiles) stays a link and its target is replaced."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".settings-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def skill_source(skill: str) -> bytes:
    return (SKILL_SOURCES / skill / "SKILL.md").read_bytes()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_skill(base: Path, skill: str, records: InstallRecords, warnings: list[str]) -> str:
    target = base / "skills" / skill / "SKILL.md"
    wanted = skill_source(skill)
    action = "installed"
    if target.exists():
        present = target.read_bytes()
        if present == wanted:
            records.save_skill(target, _digest(wanted))
            return "unchanged"
        if _digest(present) != records.skill_digest(target):
            warnings.append(f"{target} exists with other content; left as it is "
                            "(remove it and install again to replace it)")
            return "kept (other content)"
        action = "updated"  # as an earlier Baton wrote it
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(wanted)
    records.save_skill(target, _digest(wanted))
    return action


def uninstall_skill(base: Path, skill: str, records: InstallRecords, warnings: list[str]) -> str:
    target = base / "skills" / skill / "SKILL.md"
    if not target.exists():
        records.forget(target)
        return "absent"
    present = target.read_bytes()
    if present != skill_source(skill) and _digest(present) != records.skill_digest(target):
        warnings.append(f"{target} differs from Baton's skill; left in place")
        return "kept (other content)"
    target.unlink()
    records.forget(target)
    remove_if_empty(target.parent)
    return "removed"


def remove_if_empty(directory: Path) -> None:
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
