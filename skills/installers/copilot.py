"""`baton install copilot` and `baton uninstall copilot`: Baton's MCP server, hooks and skills
for GitHub Copilot CLI (measured with 1.0.102; docs/agents.md).

User scope (the default): the server in `$COPILOT_HOME/mcp-config.json`, Baton's own hooks
file in `$COPILOT_HOME/hooks/` (run without folder trust), the skills in `skills/` there.
Project scope: `.github/hooks/baton.json` (run only in a trusted folder) and `.github/skills/`.
mcp-config.json is the user's: read and written with json, only `mcpServers.baton` changes,
and a copy of the file goes to the data home (`backups/copilot/`) before each change.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from baton.errors import BadInput
from baton.skills.core.binding import Place
from baton.skills.installers.claude_code import (
    InstallRecords,
    agent_home,
    baton_executable,
    checked_scope,
    hook_command,
    install_skill,
    is_baton_hook,
    json_like,
    read_file,
    read_settings,
    remove_if_empty,
    skill_names,
    uninstall_skill,
    write_file,
)
from baton.skills.runtime.agents import AGENTS

AGENT = AGENTS["copilot"]
SERVER = "baton"
TRUST = ("Copilot runs a repository's hooks only in a folder you trust: it asks the first time it starts there "
         "(`copilot --trust-folder` trusts it for one run)")


@dataclass
class CopilotReport:
    hooks: Path
    config: Path | None  # mcp-config.json; None at project scope
    server: str = "unchanged"  # added, updated, unchanged, removed, absent
    hooks_file: str = "unchanged"  # written, updated, unchanged, removed, absent
    skills: dict[str, str] = field(default_factory=dict)
    backups: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _places(scope: str, place: Place) -> tuple[Path, Path | None, Path]:
    """(the hooks file, mcp-config.json or None, the directory whose skills/ gets the skills)."""
    if checked_scope(scope) == "project":
        return place.root / ".github" / "hooks" / "baton.json", None, place.root / ".github"
    home = agent_home("COPILOT_HOME", ".copilot")
    return home / "hooks" / "baton.json", home / "mcp-config.json", home


def hooks_text(executable: str) -> str:
    hooks = {event: [{"type": "command", "bash": hook_command(executable, hook, agent="copilot"),
                      "timeoutSec": timeout}] for event, (hook, _, timeout) in AGENT.hooks.items()}
    return json.dumps({"version": 1, "hooks": hooks}, indent=2) + "\n"


def _is_ours(entry: object) -> bool:
    return (isinstance(entry, dict) and entry.get("args") == ["mcp"] and isinstance(entry.get("command"), str)
            and os.path.basename(entry["command"]) == "baton")


def install_copilot(scope: str, place: Place, home: Path) -> CopilotReport:
    hooks, config, base = _places(scope, place)
    report = CopilotReport(hooks, config)
    records = InstallRecords(home, "copilot")
    if config is not None:
        text, data, servers = _servers(config)
        if servers.get(SERVER) is not None and not _is_ours(servers[SERVER]):
            raise BadInput(f"{config} already has an mcpServers.{SERVER} entry of its own: remove it, then run "
                           "`baton install copilot` again; nothing changed")
        wanted = {"type": "local", "command": baton_executable("user"), "args": ["mcp"], "tools": ["*"]}
        report.server = "unchanged" if servers.get(SERVER) == wanted else "updated" if SERVER in servers else "added"
        if report.server != "unchanged":
            created = {"mcpServers"} if "mcpServers" not in data else set()
            data.setdefault("mcpServers", servers)[SERVER] = wanted
            records.settle(config, text, json_like(data, text), report.backups,
                           entries=records.created(config) | created)
    wanted_hooks = hooks_text(baton_executable(scope))
    present = read_file(hooks)
    if present != wanted_hooks:
        report.hooks_file = "updated" if present is not None else "written"
        records.keep(hooks, present, report.backups)
        write_file(hooks, wanted_hooks)
    report.skills = {skill: install_skill(base, skill, records, report.warnings) for skill in skill_names()}
    if scope == "project":
        report.notes.append(TRUST)
    if shutil.which("copilot") is None:
        report.warnings.append("no `copilot` on PATH: the files are written, and Copilot reads them when it starts")
    return report


def uninstall_copilot(scope: str, place: Place, home: Path) -> CopilotReport:
    hooks, config, base = _places(scope, place)
    report = CopilotReport(hooks, config, server="absent", hooks_file="absent")
    records = InstallRecords(home, "copilot")
    if config is not None:
        text, data, servers = _servers(config)
        if _is_ours(servers.get(SERVER)):
            report.server = "removed"
            del servers[SERVER]
            if not servers and "mcpServers" in records.created(config):
                del data["mcpServers"]
            records.settle(config, text, json_like(data, text), report.backups, entries=None,
                           gone=not data)
        records.forget(config)
    present = read_file(hooks)
    if present is not None:
        if _baton_events(present) and all(is_baton_hook(c) for listed in _commands(present).values() for c in listed):
            report.hooks_file = "removed"
            records.keep(hooks, present, report.backups)
            hooks.unlink()
        else:
            report.hooks_file = "kept (other content)"
            report.warnings.append(f"{hooks} holds hooks that are not Baton's; left in place")
    report.skills = {skill: uninstall_skill(base, skill, records, report.warnings) for skill in skill_names()}
    for directory in (hooks.parent, base / "skills", *([base] if scope == "project" else [])):
        remove_if_empty(directory)
    return report


def copilot_state(scope: str, place: Place) -> str:
    """What `baton doctor` says of one scope: the server, the hooks' events and the skills there."""
    hooks, config, base = _places(scope, place)
    server = config is not None and _is_ours(_servers(config)[2].get(SERVER))
    events = _baton_events(read_file(hooks) or "{}")
    skills = [skill for skill in skill_names() if (base / "skills" / skill / "SKILL.md").exists()]
    if not server and not events and not skills:
        return "not installed"
    parts = [f"hooks for {len(events)} of {len(AGENT.hooks)} events", f"{len(skills)} of {len(skill_names())} skills"]
    if config is not None:
        parts.insert(0, "MCP server" if server else "no MCP server")
    missing = (config is not None and not server) or len(events) < len(AGENT.hooks) or len(skills) < len(skill_names())
    return "; ".join(parts) + (f": run `baton install copilot --scope {scope}`" if missing else "")


def _servers(config: Path) -> tuple[str | None, dict, dict]:
    """(mcp-config.json's text or None, its object, its mcpServers: a new one if missing)."""
    text, data = read_settings(config)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise BadInput(f"{config}: \"mcpServers\" is not an object; nothing changed")
    return text, data, servers


def _commands(text: str) -> dict[str, list[object]]:
    """A hooks file's commands by event ({} for a file that is not one)."""
    try:
        hooks = json.loads(text).get("hooks")
    except (ValueError, AttributeError):
        return {}
    return {event: [h.get("bash") if isinstance(h, dict) else None for h in handlers]
            for event, handlers in hooks.items() if isinstance(handlers, list)} if isinstance(hooks, dict) else {}


def _baton_events(text: str) -> list[str]:
    return [event for event, commands in _commands(text).items()
            if event in AGENT.hooks and any(map(is_baton_hook, commands))]
