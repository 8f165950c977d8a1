"""`baton install codex` and `baton uninstall codex`: Baton's MCP server and hooks for the OpenAI Codex CLI, with the
trust Codex requires before it runs a hook. What is written where, and why, is in docs/agents.md (Codex).

The TOML Baton writes is one block between BLOCK_START and BLOCK_END at the end of `config.toml`: while the block is as
Baton wrote it, the rest of the file is never rewritten, so uninstalling gives it back byte for byte. Codex rewrites the
file itself (`codex mcp add` and `codex mcp remove`, 0.171), so a block that is not whole, or holds what is not Baton's,
is not trusted: Baton's entries are then found by their keys and taken out through tomlkit. Not one tomlkit path for
both: adding and removing a table through tomlkit does not give the file back byte for byte (it adds blank lines, and
writes LF into a CRLF file). A trust entry's hash is not documented, so Baton asks `codex app-server` (`hooks/list`)
for the hashes of the hooks it just wrote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from collections.abc import Collection
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
    checked_scope,
    ensure_group,
    hook_containers,
    hook_group,
    is_baton_hook,
    json_like,
    read_file,
    read_settings,
    remove_baton_handlers,
    write_file,
)
from baton.skills.runtime.agents import AGENTS

HOOKS = AGENTS["codex"].hooks
# hooks.json event name -> the name in a trust key (Codex's snake case).
KEY_EVENTS = {"SessionStart": "session_start", "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use",
              "UserPromptSubmit": "user_prompt_submit", "Stop": "stop", "SessionEnd": "session_end"}
BLOCK_START = "# >>> baton: written by `baton install codex`; `baton uninstall codex` removes it"
BLOCK_END = "# <<< baton"
SERVER = "baton"
SERVER_RECORD = f"mcp_servers.{SERVER}"  # in the install records: Baton wrote its server into that file
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


def server_table(executable: str) -> dict:
    return {"command": executable, "args": ["mcp"], "required": True, "env_vars": passed_variables()}


def install_codex(scope: str, place: Place, home: Path) -> CodexReport:
    """Write the server's table and the hooks, then trust the hooks by the hashes the `codex` on PATH reports for
    them."""
    base = codex_dir(scope, place)
    report = CodexReport(base / "config.toml", base / "hooks.json", codex_home() / "config.toml")
    executable = baton_executable("user")
    records = InstallRecords(home, "codex")

    config_text, _ = _settled(report.config, records)
    block = _Block.of(config_text, report.config)
    servers = _outside(config_text, block).get("mcp_servers")
    if isinstance(servers, dict) and servers.get(SERVER) is not None:
        raise BadInput(f"{report.config} already has an [mcp_servers.{SERVER}] table of its own: remove it, then "
                       "run `baton install codex` again; nothing changed")
    wanted = server_table(executable)
    report.server = "unchanged" if block.server == wanted else "updated" if block.server else "added"
    block.server = wanted
    trust_text, _ = _settled(report.trust_file, records)
    for path, text, tried in ((report.config, config_text, block),
                              (report.trust_file, trust_text, _Block.of(trust_text, report.trust_file))):
        _check(path, text, _Block(tried.span, tried.newline, tried.server, {f"{report.hooks}:stop:0:0": "sha256:"}))

    original, data = read_settings(report.hooks)
    before = hook_containers(data, report.hooks)
    report.events = [event for event in HOOKS
                     if ensure_group(data, report.hooks, event, hook_group(HOOKS, event, executable, agent="codex"))]
    if report.events:
        records.write(report.hooks, json_like(data, original), original, hook_containers(data, report.hooks) - before,
                      into=report.backups)
    hashes = _hashes(scope, place, report, shutil.which("codex"))
    if report.trust_file == report.config:
        _trust_in(block, config_text, report, hashes)
    elif hashes:
        trust = _Block.of(trust_text, report.trust_file)
        _trust_in(trust, trust_text, report, hashes)
        _save_block(report.trust_file, trust_text, trust, records, report)
    _save_block(report.config, config_text, block, records, report)
    return report


def uninstall_codex(scope: str, place: Place, home: Path) -> CodexReport:
    base = codex_dir(scope, place)
    report = CodexReport(base / "config.toml", base / "hooks.json", codex_home() / "config.toml")
    records = InstallRecords(home, "codex")
    hook_keys = set(_baton_hook_keys(report.hooks))  # what Baton's trust entries name, before the hooks go
    original, data = read_settings(report.hooks)
    if original is not None:
        created = records.created(report.hooks) if records.known(report.hooks) else None
        report.events = remove_baton_handlers(data, report.hooks, created=created)
        if report.events:
            records.keep(report.hooks, original, report.backups)
            records.put_back(report.hooks, data, original)
    records.forget(report.hooks)
    config_text, moved = _settled(report.config, records, hook_keys)
    block = _Block.of(config_text, report.config)
    report.server = "removed" if block.server or moved else "absent"
    block.server = None
    if report.config == report.trust_file:
        block.drop_trust(report.hooks)
    _save_block(report.config, config_text, block, records, report)
    if report.trust_file != report.config:
        trust_text, _ = _settled(report.trust_file, records, hook_keys)
        trust = _Block.of(trust_text, report.trust_file)
        trust.drop_trust(report.hooks)
        _save_block(report.trust_file, trust_text, trust, records, report)
    if scope == "project" and base.is_dir() and not any(base.iterdir()):
        base.rmdir()
    return report


def codex_state(scope: str, place: Place) -> str:
    """What `baton doctor` says of one scope: what is installed and what is missing."""
    base = codex_dir(scope, place)
    config, hooks_file = base / "config.toml", base / "hooks.json"
    servers = tomllib.loads(_read_text(config)).get("mcp_servers")
    server = isinstance(servers, dict) and servers.get(SERVER) is not None
    keys = _baton_hook_keys(hooks_file)
    trust_file = codex_home() / "config.toml"
    try:
        hooks = tomllib.loads(_read_text(trust_file)).get("hooks")
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
    keys = []
    events = data.get("hooks", {}) if isinstance(data, dict) else {}
    for event, groups in events.items() if isinstance(events, dict) else ():
        for group_index, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks", []) if isinstance(group, dict) else []
            for handler_index, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(handler, dict) and is_baton_hook(handler.get("command")) and event in KEY_EVENTS:
                    keys.append(f"{hooks_file}:{KEY_EVENTS[event]}:{group_index}:{handler_index}")
    return keys


@dataclass
class _Block:
    """Baton's block in a config.toml: the server's table and the hooks it trusts."""

    span: tuple[int, int] | None  # where the block is in the text, with the newlines before it
    newline: str
    server: dict | None = None
    trust: dict[str, str] = field(default_factory=dict)  # key -> trusted_hash

    @classmethod
    def of(cls, text: str, path: Path) -> _Block:
        newline = "\r\n" if "\r\n" in text else "\n"
        start = text.find(BLOCK_START)
        end = text.find(BLOCK_END, start) if start >= 0 else -1
        if end < 0:
            return cls(None, newline)
        end += len(BLOCK_END)
        if text.startswith(newline, end):
            end += len(newline)
        try:
            inner = tomllib.loads(text[start:end])
        except tomllib.TOMLDecodeError:
            return cls(None, newline)
        if not _batons_only(inner):
            return cls(None, newline)
        lead = start - len(newline) if text[:start].endswith(newline) else start  # the newline the block brought
        block = cls((lead, end), newline, inner.get("mcp_servers", {}).get(SERVER))
        state = inner.get("hooks", {}).get("state", {})
        block.trust = {key: entry["trusted_hash"] for key, entry in state.items() if "trusted_hash" in entry}
        return block

    def drop_trust(self, hooks_file: Path) -> None:
        self.trust = {key: value for key, value in self.trust.items() if not _of_file(key, hooks_file)}

    def render(self) -> str:
        lines = [BLOCK_START]
        if self.server is not None:
            lines.append(f"[mcp_servers.{SERVER}]")
            lines += [f"{key} = {tomlkit.item(value).as_string()}" for key, value in self.server.items()]
        for key, trusted in sorted(self.trust.items()):
            lines += [f"[hooks.state.{json.dumps(key)}]", f"trusted_hash = {json.dumps(trusted)}"]
        lines.append(BLOCK_END)
        return self.newline.join(lines) + self.newline

    @property
    def empty(self) -> bool:
        return self.server is None and not self.trust


def _batons_only(table: dict) -> bool:
    """Whether a block holds nothing but Baton's server and trust entries."""
    servers, hooks = table.get("mcp_servers", {}), table.get("hooks", {})
    return (set(table) <= {"mcp_servers", "hooks"} and isinstance(servers, dict) and set(servers) <= {SERVER}
            and isinstance(hooks, dict) and set(hooks) <= {"state"})


def _settled(path: Path, records: InstallRecords, hook_keys: Collection[str] = ()) -> tuple[str, bool]:
    """(the file's text, whether Baton's server was taken out of it): as it is when Baton's block is whole; else, where
    the file held Baton's block or Baton installed the server into it (the records), without Baton's server table, the
    trust entries of hook_keys and the marker lines, wherever Codex moved them, edited through tomlkit."""
    text = _read_text(path)
    block = _Block.of(text, path)
    marked = BLOCK_START in text or BLOCK_END in text
    if block.span is not None or not (marked or SERVER_RECORD in records.created(path)):
        return text, False
    document = tomlkit.parse(text)
    servers = document.get("mcp_servers")
    moved = isinstance(servers, dict) and SERVER in servers
    if isinstance(servers, dict) and moved:
        del servers[SERVER]
        if not servers:
            del document["mcp_servers"]
    hooks = document.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if isinstance(hooks, dict) and isinstance(state, dict):
        for key in [key for key in state if key in hook_keys]:
            del state[key]
        if not state:
            del hooks["state"]
        if not hooks:
            del document["hooks"]
    markers = rf"^[ \t]*(?:{re.escape(BLOCK_START)}|{re.escape(BLOCK_END)})[ \t]*(?:\r?\n|$)"
    return re.sub(markers, "", tomlkit.dumps(document), flags=re.MULTILINE), moved


def _of_file(key: str, hooks_file: Path) -> bool:
    """Whether a trust key (`<path>:<event>:<group>:<handler>`) is of a hook in hooks_file, however Codex spelled the
    path (it may resolve links)."""
    path = key.rsplit(":", 3)[0]
    return path == str(hooks_file) or os.path.realpath(path) == os.path.realpath(hooks_file)


def _with_block(text: str, block: _Block) -> str:
    """The text with Baton's block as given: in place of the old one, appended at the end, or gone (with the newline it
    brought) when empty."""
    rest, at = (text, len(text)) if block.span is None else (text[:block.span[0]] + text[block.span[1]:],
                                                             block.span[0])
    if block.empty:
        return rest
    head, tail = rest[:at], rest[at:]
    # One newline before the block: a blank line after a file that ends with one, else the end of its last line;
    # removing the block removes that newline with it.
    return head + (block.newline if head else "") + block.render() + tail


def _outside(text: str, block: _Block) -> dict:
    rest = text if block.span is None else text[:block.span[0]] + text[block.span[1]:]
    try:
        return tomllib.loads(rest)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"cannot read the TOML around Baton's block ({exc}); nothing changed") from None


def _check(path: Path, text: str, block: _Block) -> None:
    """BadInput, before anything is written, when the block would not fit in the file."""
    try:
        tomllib.loads(_with_block(text, block))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: Baton's tables would clash with the file's own ({exc}); nothing changed") from None


def _save_block(path: Path, text: str, block: _Block, records: InstallRecords, report: CodexReport) -> None:
    """Write the text (the file's, _settled) with the block; a file the install created (the data home's records, which
    also say that Baton's server is Baton's) goes when nothing is left in it."""
    new = _with_block(text, block)
    was = read_file(path)
    if new == (was or ""):
        return
    records.keep(path, was, report.backups)
    if was is None or block.server is not None:
        records.save(path, {SERVER_RECORD} if block.server is not None else set(),
                     created_file=was is None or records.created_file(path), rules=[])
    if not new and not path.is_symlink() and records.created_file(path):
        path.unlink()
        records.forget(path)
        return
    write_file(path, new)
    if block.empty:
        records.forget(path)  # a server table written by hand later is the user's own


def _read_text(path: Path) -> str:
    text = read_file(path) or ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML ({exc}); nothing changed") from None
    return text


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


def _trust_in(block: _Block, text: str, report: CodexReport, hashes: dict[str, str]) -> None:
    """Baton's block trusting exactly the hashes given for report.hooks (an entry the file has outside the block is the
    user's and stays there)."""
    hooks = _outside(text, block).get("hooks")
    outside = hooks.get("state", {}) if isinstance(hooks, dict) else {}
    block.drop_trust(report.hooks)
    block.trust.update({key: value for key, value in hashes.items() if key not in outside})
    report.trusted = sorted(hashes)


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
