"""`baton install codex` and `baton uninstall codex`: Baton's MCP server and hooks for the OpenAI Codex CLI, with the
trust Codex requires before it runs a hook. What is written where, and why, is in docs/agents.md (Codex).

`config.toml` is read and written through tomlkit alone: Baton's tables (`[mcp_servers.baton]`, its
`[hooks.state."<key>"]` entries) are added to and taken out of the parsed document, and the install records say which
are Baton's. An uninstall puts back the copy from before the install, byte for byte, while the file is as Baton last
wrote it (its SHA-256 in the records); once the user or Codex (`codex mcp add`, 0.171, rewrites it) changed it, Baton's
tables are taken out of the document and the rest kept. That way gives back 3 of the 6 layouts of
tests/test_install_codex.py byte for byte (comments and other servers, a file ending in a blank line, an empty one);
the others keep what tomlkit did when adding: a final newline (LF, also after a CRLF file's last line), a blank line
before Baton's table after the user's `[hooks.state]` ones. A comment written after one of Baton's tables is part of
it to tomlkit, so it moves to the end of the file. A trust
entry's hash is not documented, so Baton asks `codex app-server` (`hooks/list`) for the hashes of the hooks it just
wrote.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit

from baton.errors import BadInput
from baton.processes import run_bounded
from baton.pydantic_plugins import as_given
from baton.skills.core.binding import Place
from baton.skills.installers.claude_code import (
    InstallRecords,
    agent_home,
    baton_executable,
    baton_handlers,
    checked_scope,
    ensure_group,
    hook_containers,
    hook_group,
    is_baton_hook,
    json_like,
    read_file,
    read_settings,
    remove_baton_handlers,
)
from baton.skills.runtime.agents import AGENTS

HOOKS = AGENTS["codex"].hooks
# hooks.json event name -> the name in a trust key (Codex's snake case).
KEY_EVENTS = {"SessionStart": "session_start", "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use",
              "UserPromptSubmit": "user_prompt_submit", "Stop": "stop", "SessionEnd": "session_end"}
SERVER = "baton"
SERVER_RECORD = f"mcp_servers.{SERVER}"  # in the install records: Baton wrote its server into that file
# Where an install before tomlkit kept Baton's tables, taken out whole when the file is next read.
OLD_BLOCK = ("# >>> baton: written by `baton install codex`; `baton uninstall codex` removes it", "# <<< baton")
ASK_TIMEOUT = 30.0  # seconds `codex app-server` may take to list the hooks


@dataclass
class CodexReport:
    config: Path  # where the server's table is
    hooks: Path
    trust_file: Path  # the user's config.toml, where trust is kept
    server: str = "unchanged"  # added, updated, unchanged, removed, absent
    events: list[str] = field(default_factory=list)  # events whose hook changed
    trusted: list[str] = field(default_factory=list)  # keys of the hooks trusted now
    untrusted: str | None = None  # what to run so that Codex trusts Baton's hooks
    backups: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def codex_home() -> Path:
    return agent_home("CODEX_HOME", ".codex")


def codex_dir(scope: str, place: Place) -> Path:
    return place.root / ".codex" if checked_scope(scope) == "project" else codex_home()


def passed_variables() -> list[str]:
    """The variables `baton mcp` reads that Codex would otherwise filter out: every BATON_* setting and the XDG
    directories the data home and runtime marks default to."""
    from baton.skills.runtime.settings import SETTINGS

    names = [row.env for row in SETTINGS if row.env]
    return [*dict.fromkeys(names), "XDG_DATA_HOME", "XDG_RUNTIME_DIR"]


def install_codex(scope: str, place: Place, home: Path) -> CodexReport:
    """Write the server's table and the hooks, then trust the hooks by the hashes the `codex` on PATH reports for
    them."""
    base = codex_dir(scope, place)
    report = CodexReport(base / "config.toml", base / "hooks.json", codex_home() / "config.toml")
    executable = baton_executable("user")
    records = InstallRecords(home, "codex")

    config_text, config = _read_toml(report.config)
    servers = config.get("mcp_servers", {})
    ours = SERVER_RECORD in records.created(report.config)
    if not isinstance(servers, dict) or (SERVER in servers and not ours):
        raise BadInput(f"{report.config} already has an [mcp_servers.{SERVER}] table of its own: remove it, then "
                       "run `baton install codex` again; nothing changed")
    wanted = {"command": executable, "args": ["mcp"], "required": True, "env_vars": passed_variables()}
    report.server = "unchanged" if servers.get(SERVER) == wanted else "updated" if SERVER in servers else "added"
    _table(config, "mcp_servers")[SERVER] = wanted
    trust_text, trust = (config_text, config) if report.trust_file == report.config else _read_toml(report.trust_file)

    original, data = read_settings(report.hooks)
    before = hook_containers(data)
    report.events = [event for event in HOOKS
                     if ensure_group(data, report.hooks, event, hook_group(HOOKS, event, executable, agent="codex"))]
    if report.events:
        records.settle(report.hooks, original, json_like(data, original), report.backups,
                       entries=records.created(report.hooks) | (hook_containers(data) - before))
    hashes = _hashes(scope, place, report, shutil.which("codex"))
    trusted = _trust_in(trust, report, hashes, records.created(report.trust_file))
    if report.trust_file != report.config and trusted != records.created(report.trust_file):
        records.settle(report.trust_file, trust_text, tomlkit.dumps(trust), report.backups, entries=trusted or None)
    records.settle(report.config, config_text, tomlkit.dumps(config), report.backups,
                   entries={SERVER_RECORD} | (trusted if report.trust_file == report.config else set()))
    return report


def uninstall_codex(scope: str, place: Place, home: Path) -> CodexReport:
    base = codex_dir(scope, place)
    report = CodexReport(base / "config.toml", base / "hooks.json", codex_home() / "config.toml")
    records = InstallRecords(home, "codex")
    original, data = read_settings(report.hooks)
    if original is not None:
        created = records.created(report.hooks) if records.known(report.hooks) else None
        report.events = remove_baton_handlers(data, report.hooks, created=created)
        if report.events:
            records.settle(report.hooks, original, json_like(data, original), report.backups, entries=None,
                           gone=not data)
    records.forget(report.hooks)
    report.server = "removed" if SERVER_RECORD in records.created(report.config) else "absent"
    for path in dict.fromkeys([report.config, report.trust_file]):
        text, document = _read_toml(path)
        kept = records.created(path) - ({SERVER_RECORD} if path == report.config else set())
        kept = {entry for entry in kept if not _of_file(entry, report.hooks)}
        if kept != records.created(path) or OLD_BLOCK[0] in (text or ""):
            records.settle(path, text, tomlkit.dumps(_without(document, records.created(path) - kept)), report.backups,
                           entries=kept or None)
    if scope == "project" and base.is_dir() and not any(base.iterdir()):
        base.rmdir()
    return report


def codex_state(scope: str, place: Place) -> str:
    """What `baton doctor` says of one scope: what is installed and what is missing."""
    base = codex_dir(scope, place)
    config, hooks_file = base / "config.toml", base / "hooks.json"
    servers = _read_toml(config)[1].get("mcp_servers")
    server = isinstance(servers, dict) and servers.get(SERVER) is not None
    keys = _baton_hook_keys(hooks_file)
    try:
        hooks = _read_toml(codex_home() / "config.toml")[1].get("hooks")
    except BadInput:
        hooks = None
    state = hooks.get("state") if isinstance(hooks, dict) else None
    trusted = {_normal(key) for key in state} if isinstance(state, dict) else set()
    events, untrusted = {key.split(":")[-3] for key in keys}, [key for key in keys if _normal(key) not in trusted]
    if not server and not events:
        return "not installed"
    parts = ["MCP server" if server else "no MCP server", f"hooks for {len(events)} of {len(HOOKS)} events"]
    if untrusted:
        where = " in a project Codex trusts" if scope == "project" else ""
        parts.append(f"{len(untrusted)} hooks not trusted yet: run `baton install codex --scope {scope}` with "
                     f"`codex` on PATH{where}, or trust them in codex's /hooks")
    return "; ".join(parts)


def _normal(key: str) -> str:
    """A trust key with its path resolved, to compare keys however the path was spelled."""
    path, *rest = key.rsplit(":", 3)
    return ":".join([os.path.realpath(path), *rest])


def _baton_hook_keys(hooks_file: Path) -> list[str]:
    """The trust keys (`<path>:<event>:<group>:<handler>`) of Baton's hooks in hooks_file."""
    try:
        data = json.loads(hooks_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    events = data.get("hooks") if isinstance(data, dict) else None
    return [f"{hooks_file}:{KEY_EVENTS[event]}:{group_index}:{handler_index}"
            for event, groups in (events.items() if isinstance(events, dict) else ())
            if event in KEY_EVENTS and isinstance(groups, list)
            for group_index, group in enumerate(groups) if (mine := baton_handlers(group))
            for handler_index, handler in enumerate(group["hooks"]) if handler in mine]


def _of_file(key: str, hooks_file: Path) -> bool:
    """Whether a trust key (`<path>:<event>:<group>:<handler>`) is of a hook in hooks_file, however Codex spelled the
    path (it may resolve links)."""
    return key != SERVER_RECORD and os.path.realpath(key.rsplit(":", 3)[0]) == os.path.realpath(hooks_file)


def _read_toml(path: Path) -> tuple[str | None, tomlkit.TOMLDocument]:
    """config.toml as (its text, None where there is none; its document), refused when Baton's tables cannot go in.
    The marked block of an install before tomlkit (Baton's tables only) is left out of the document."""
    text = read_file(path)
    source = text or ""
    start = source.find(OLD_BLOCK[0])
    end = source.find(OLD_BLOCK[1], start) if start >= 0 else -1
    if end >= 0:
        end += len(OLD_BLOCK[1])
        newline = "\r\n" if "\r\n" in source else "\n"
        lead = start - len(newline) if source[:start].endswith(newline) else start  # the newline the block brought
        source = source[:lead] + source[end + len(newline) if source.startswith(newline, end) else end:]
    try:
        document = tomlkit.parse(source)
    except ValueError as exc:
        raise BadInput(f"{path} is not valid TOML ({exc}); nothing changed") from None
    for keys in (("mcp_servers",), ("hooks", "state")):
        node: object = document
        for key in keys:
            node = node.get(key, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise BadInput(f"{path}: Baton's tables would clash with the file's own (`{'.'.join(keys)}` is not a "
                           "table); nothing changed")
    return text, document


def _table(container: dict, key: str) -> dict:
    return container.setdefault(key, tomlkit.table(is_super_table=True))


def _without(document: tomlkit.TOMLDocument, entries: set[str]) -> tomlkit.TOMLDocument:
    """The document without Baton's entries (its server's table, trust keys) and the tables they leave empty. Comments
    written after one of Baton's tables are part of it to tomlkit: they stay, at the end of the file."""
    notes: list[str] = []  # _read_toml saw that these are tables
    servers, hooks = document.get("mcp_servers", {}), document.get("hooks", {})
    state = hooks.get("state", {})
    trust = sorted(entries - {SERVER_RECORD})
    for table, key in [(servers, SERVER)] * (SERVER_RECORD in entries) + [(state, key) for key in trust]:
        taken = table.pop(key, None)
        notes += [item.as_string().strip().removeprefix("#").strip() for _, item in taken.value.body
                  if isinstance(item, tomlkit.items.Comment)] if isinstance(taken, tomlkit.items.Table) else []
    for parent, key, table in ((document, "mcp_servers", servers), (hooks, "state", state), (document, "hooks", hooks)):
        if key in parent and not table:
            del parent[key]
    for note in notes:
        document.add(tomlkit.comment(note))
    return document


def _hashes(scope: str, place: Place, report: CodexReport, codex: str | None) -> dict[str, str]:
    """The trust key and hash Codex reports for each of Baton's hooks in report.hooks; report.untrusted says what to run
    when Codex cannot be asked or does not list them all."""
    again = f"`baton install codex --scope {scope}`"
    if codex is None:
        report.untrusted = (f"Codex runs a hook only once it is trusted, and no `codex` was found to ask for the hash: "
                            f"run {again} again with `codex` on PATH, or trust Baton's hooks in codex's /hooks")
        return {}
    listed = list_hooks(codex, place.root)
    if isinstance(listed, str):
        report.untrusted = (f"could not ask Codex for the hooks' hashes ({listed}): run {again} again, "
                            "or trust Baton's hooks in codex's /hooks")
        return {}
    ours = {hook["key"]: hook["currentHash"] for hook in listed
            if os.path.realpath(hook.get("sourcePath", "")) == os.path.realpath(report.hooks)
            and is_baton_hook(hook.get("command")) and hook.get("key") and hook.get("currentHash")}
    if len(ours) < len(HOOKS):
        where = (f"Codex reads {report.hooks.parent} only in a project you trust (codex asks the first time it "
                 "starts there)" if scope == "project" else f"Codex listed {len(ours)} of Baton's hooks")
        report.untrusted = f"{where}: then run {again} again to trust Baton's hooks"
    return ours


def _trust_in(trust: tomlkit.TOMLDocument, report: CodexReport, hashes: dict[str, str], created: set[str]) -> set[str]:
    """The trust file's document trusting the hashes given for report.hooks (an entry Baton did not write is the
    user's and stays as it is): what Baton's entries in it are now."""
    _without(trust, {key for key in created if _of_file(key, report.hooks)} - set(hashes))
    mine = {key for key in hashes if key in created or key not in trust.get("hooks", {}).get("state", {})}
    for key in sorted(mine):
        _table(_table(trust, "hooks"), "state")[key] = {"trusted_hash": hashes[key]}
    report.trusted = sorted(hashes)
    return {key for key in created if not _of_file(key, report.hooks)} | mine


def list_hooks(codex: str, cwd: Path) -> list[dict] | str:
    """The hooks Codex sees in cwd (`codex app-server`'s `hooks/list`), or why not."""
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"clientInfo": {"name": "baton", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}}]
    try:
        ran = run_bounded([codex, "app-server"], wait=ASK_TIMEOUT, cwd=cwd, env=as_given(),
                          input=b"".join(json.dumps(m).encode() + b"\n" for m in messages),
                          enough=lambda said: _hooks_answer(said) is not None)
    except OSError as exc:
        return f"{codex}: {exc.strerror or exc}"
    answer = _hooks_answer(ran.stdout)
    if answer is None:
        return f"codex app-server exited ({ran.returncode})" if ran.returncode is not None \
            else f"no answer within {ASK_TIMEOUT:g} s"
    if "error" in answer:
        return str(answer["error"].get("message", answer["error"]))
    return [hook for entry in answer.get("result", {}).get("data", []) for hook in entry.get("hooks", [])]


def _hooks_answer(said: bytes) -> dict | None:
    """The app-server's answer to `hooks/list` among the whole lines it wrote, if there."""
    for line in said.split(b"\n")[:-1]:
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and answer.get("id") == 2:
            return answer
    return None
