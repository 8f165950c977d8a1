"""`baton install codex` / `baton uninstall codex`: the MCP server's table in config.toml,
the hooks in hooks.json and their trust, merged into what the user has and given back
byte for byte."""

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from baton.skills.installers.codex import HOOKS, SERVER, list_hooks, passed_variables
from tests.codex_cli import find_codex

CODEX = find_codex()

# config.toml files as people have them: comments, other servers, trust of their projects.
CONFIGS = {
    "comments and other servers": '# my Codex\nmodel = "o3"  # the default\n\n[mcp_servers.docs]\n'
                                  'command = "npx"\nargs = ["-y", "docs-mcp"]\n\n[projects."/home/me/shop"]\n'
                                  'trust_level = "trusted"\n',
    "CRLF line ends": 'model = "o3"\r\n\r\n[mcp_servers.docs]\r\ncommand = "npx"\r\n',
    "no final newline": 'model = "o3"',
    "a blank line at the end": 'model = "o3"\n\n',
    "hooks trusted by the user": '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:00"\n',
    "empty": "",
}
USER_HOOKS = ('{\n  "hooks": {\n    "Stop": [\n      {"hooks": [{"type": "command", "command": "make lint"}]}\n'
              '    ]\n  }\n}\n')


@pytest.fixture
def codex_home(tmp_path, monkeypatch) -> Path:
    """A CODEX_HOME of the test's own, and a PATH without `codex` (its trust is tested apart)."""
    path = tmp_path / "codex-home"
    path.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return path


@pytest.mark.parametrize("layout", CONFIGS)
def test_install_reinstall_uninstall_give_back_the_users_files_byte_for_byte(home, worktrees, cli, codex_home,
                                                                             layout):
    main, _ = worktrees
    config, hooks = codex_home / "config.toml", codex_home / "hooks.json"
    config.write_bytes(CONFIGS[layout].encode())
    hooks.write_text(USER_HOOKS)
    code, out, err = cli(main, "install", "codex", "--scope", "user")
    assert code == 0 and "MCP server added" in out
    assert "no `codex` was found" in err and "baton install codex --scope user" in err, "says how to trust them"
    installed = config.read_bytes()
    data = tomllib.loads(installed.decode())
    server = data["mcp_servers"].pop("baton")
    assert {key: value for key, value in data.items() if value} == tomllib.loads(CONFIGS[layout]), "the rest kept"
    assert all(line in installed.decode() for line in CONFIGS[layout].splitlines()), "with its comments"
    assert os.path.isabs(server["command"]) and server["args"] == ["mcp"] and server["required"] is True
    assert "BATON_HOME" in server["env_vars"] and set(server["env_vars"]) == set(passed_variables())
    assert not {"default_tools_approval_mode", "tools"} & set(server), "the annotations suffice"
    groups = json.loads(hooks.read_text())["hooks"]
    assert groups["Stop"][0]["hooks"][0]["command"] == "make lint" and len(groups["Stop"]) == 2
    assert set(groups) == set(HOOKS)
    assert groups["PreToolUse"][0]["matcher"] == groups["PostToolUse"][0]["matcher"] == "apply_patch"
    hooked = hooks.read_bytes()
    code, out, _ = cli(main, "install", "codex", "--scope", "user")
    assert code == 0 and "MCP server unchanged" in out and "hooks already there" in out
    assert config.read_bytes() == installed and hooks.read_bytes() == hooked, "installing twice changes nothing"
    code, out, _ = cli(main, "uninstall", "codex", "--scope", "user")
    assert code == 0 and "MCP server removed" in out and "backup: " in out
    assert config.read_bytes() == CONFIGS[layout].encode() and hooks.read_text() == USER_HOOKS
    backups = sorted((home / "backups" / "codex").iterdir())
    assert any(b.read_text() == USER_HOOKS for b in backups), "what uninstall changed was kept"


def test_a_fresh_install_creates_what_uninstall_removes(home, worktrees, cli, codex_home):
    main, _ = worktrees
    assert cli(main, "install", "codex")[0] == 0
    assert (main / ".codex" / "config.toml").read_text().startswith("[mcp_servers.baton]\n")
    assert cli(main, "uninstall", "codex")[0] == 0
    assert not (main / ".codex").exists()


@pytest.mark.parametrize("content, message", [
    ('[mcp_servers.baton]\ncommand = "baton"\nargs = ["mcp"]\n', "already has an [mcp_servers.baton] table"),
    ("model = \n", "is not valid TOML"),
    ('hooks = "no"\n', "would clash with the file's own"),
])
def test_a_config_baton_cannot_merge_into_is_left_alone(home, worktrees, cli, codex_home, content, message):
    main, _ = worktrees
    (codex_home / "config.toml").write_text(content)
    code, out, err = cli(main, "install", "codex", "--scope", "user")
    assert code == 2 and message in err and "nothing changed" in err and err.count("\n") == 1, err
    assert (codex_home / "config.toml").read_text() == content


def test_doctor_reports_every_agents_install_state(home, worktrees, cli, codex_home, monkeypatch, tmp_path):
    main, _ = worktrees
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    cli(main, "install", "claude")
    cli(main, "install", "codex", "--scope", "user")
    code, out, _ = cli(main, "doctor")
    lines = {line[:16].strip(): line[16:].strip() for line in out.splitlines()}
    assert lines["claude (project)"].startswith("hooks for 6 of 6 events, 3 of 3 skills")
    assert lines["claude (user)"] == "not installed" and lines["codex (project)"] == "not installed"
    assert lines["codex (user)"].startswith("MCP server; hooks for 6 of 6 events; 6 hooks not trusted yet: run "
                                            "`baton install codex --scope user`")


@pytest.mark.skipif(CODEX is None, reason="the Codex CLI is not installed: ./scripts/test installs it with npm, "
                                          "or set BATON_CODEX to a `codex` executable")
@pytest.mark.slow
@pytest.mark.parametrize("scope", ["user", "project"])
def test_the_hooks_are_trusted_by_the_hashes_codex_reports(home, worktrees, cli, codex_home, monkeypatch, scope):
    """Codex's own `hooks/list` after the install: each of Baton's hooks trusted (a project's
    .codex/ only once the user trusts the project, which Baton leaves to the user)."""
    main, _ = worktrees
    monkeypatch.setenv("PATH", f"{Path(CODEX).parent}:/usr/bin:/bin")
    config = codex_home / "config.toml"
    if scope == "project":
        code, out, err = cli(main, "install", "codex")
        assert code == 0 and "only in a project you trust" in err
        config.write_text(f'[projects.{json.dumps(str(main))}]\ntrust_level = "trusted"\n')
    code, out, err = cli(main, "install", "codex", "--scope", scope)
    assert code == 0 and err == "" and "6 hooks trusted" in out
    listed = [hook for hook in list_hooks(CODEX, main) if "baton" in hook["command"]]
    assert len(listed) == len(HOOKS) and {hook["trustStatus"] for hook in listed} == {"trusted"}, listed
    code, out, _ = cli(main, "doctor")
    assert f"codex ({scope})".ljust(16) + " MCP server; hooks for 6 of 6 events" in out
    assert "not trusted" not in out
    cli(main, "uninstall", "codex", "--scope", scope)
    if scope == "user":
        assert not config.exists(), "the install created it"
    else:
        assert config.read_text() == f'[projects.{json.dumps(str(main))}]\ntrust_level = "trusted"\n'
        assert not (main / ".codex").exists()


# What comes back of each layout when the file was changed after the install (a comment put on
# top, no `codex` to trust the hooks): Baton's tables taken out through tomlkit, which keeps the
# line end it gave the file's last line (LF) and the blank line it put before a table after the
# user's. Byte for byte for three of the six layouts.
CHANGED_BACK = {"comments and other servers": CONFIGS["comments and other servers"],
                "CRLF line ends": CONFIGS["CRLF line ends"] + "\n",
                "no final newline": CONFIGS["no final newline"] + "\n",
                "a blank line at the end": CONFIGS["a blank line at the end"],
                "hooks trusted by the user": CONFIGS["hooks trusted by the user"] + "\n",
                "empty": ""}


@pytest.mark.parametrize("layout", CONFIGS)
def test_a_config_changed_since_the_install_keeps_the_change(home, worktrees, cli, codex_home, layout):
    """A file that is no longer as Baton left it (the user or Codex wrote to it) is not put back
    from the copy: Baton's tables are taken out and what changed since stays."""
    main, _ = worktrees
    config = codex_home / "config.toml"
    config.write_bytes(CONFIGS[layout].encode())
    assert cli(main, "install", "codex", "--scope", "user")[0] == 0
    config.write_bytes(b"# edited later\n" + config.read_bytes())
    code, out, err = cli(main, "uninstall", "codex", "--scope", "user")
    assert code == 0 and "MCP server removed" in out, err
    assert config.read_bytes().decode() == "# edited later\n" + CHANGED_BACK[layout]


def test_what_codex_or_the_user_wrote_after_batons_tables_stays(home, worktrees, cli, codex_home):
    """tomlkit counts the lines after a table as part of it: a comment written after Baton's
    tables stays (moved to the end of the file), and so do the tables after it."""
    main, _ = worktrees
    config = codex_home / "config.toml"
    config.write_text(CONFIGS["comments and other servers"])
    assert cli(main, "install", "codex", "--scope", "user")[0] == 0
    config.write_text(config.read_text() + '\n# added later\n[mcp_servers.extra]\ncommand = "/bin/echo"\n')
    assert cli(main, "uninstall", "codex", "--scope", "user")[0] == 0
    left = config.read_text()
    assert left.startswith(CONFIGS["comments and other servers"]) and "# added later\n" in left and "baton" not in left
    data = tomllib.loads(CONFIGS["comments and other servers"])
    data["mcp_servers"]["extra"] = {"command": "/bin/echo"}
    assert tomllib.loads(left) == data


@pytest.mark.skipif(CODEX is None, reason="the Codex CLI is not installed: ./scripts/test installs it with npm, "
                                          "or set BATON_CODEX to a `codex` executable")
@pytest.mark.slow
def test_uninstall_after_codex_rewrote_the_config(home, worktrees, cli, codex_home, monkeypatch):
    """The real `codex mcp add` and `codex mcp remove` after the install: the uninstall takes
    out all of Baton's and nothing of the user's."""
    main, _ = worktrees
    monkeypatch.setenv("PATH", f"{Path(CODEX).parent}:/usr/bin:/bin")
    config = codex_home / "config.toml"
    config.write_text(CONFIGS["comments and other servers"])
    assert cli(main, "install", "codex", "--scope", "user")[0] == 0
    for words in (["add", "extra", "--", "/bin/echo", "x"], ["add", "more", "--", "/bin/echo", "y"],
                  ["remove", "more"]):
        ran = subprocess.run([CODEX, "mcp", *words], capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0, ran.stderr
    code, out, _ = cli(main, "uninstall", "codex", "--scope", "user")
    assert code == 0 and "MCP server removed" in out
    data = tomllib.loads(config.read_text())
    assert SERVER not in data["mcp_servers"] and "hooks" not in data and "# my Codex" in config.read_text()
    assert data["mcp_servers"]["extra"]["args"] == ["x"] and data["mcp_servers"]["docs"]["command"] == "npx"


@pytest.mark.parametrize("layout", ["comments and other servers", "CRLF line ends"])
def test_the_marked_block_of_an_older_install_goes_whole(home, worktrees, cli, codex_home, layout):
    """Installs before tomlkit kept Baton's tables in a marked block at the end: an uninstall
    takes the block out whole (its trust entries with it, which no record names), and an
    install writes Baton's tables afresh in place of it."""
    main, _ = worktrees
    config, text = codex_home / "config.toml", CONFIGS[layout]
    newline = "\r\n" if "\r\n" in text else "\n"
    block = newline.join(["# >>> baton: written by `baton install codex`; `baton uninstall codex` removes it",
                          "[mcp_servers.baton]", 'command = "/old/baton"', 'args = ["mcp"]',
                          '[hooks.state."/old/hooks.json:stop:0:0"]', 'trusted_hash = "sha256:11"', "# <<< baton", ""])
    config.write_bytes((text + newline + block).encode())
    code, out, err = cli(main, "uninstall", "codex", "--scope", "user")
    assert code == 0, err
    assert config.read_bytes() == text.encode(), "the block gone, the user's file byte for byte"
    config.write_bytes((text + newline + block).encode())
    code, out, err = cli(main, "install", "codex", "--scope", "user")
    assert code == 0 and "MCP server added" in out, err
    installed = config.read_text()
    assert ">>> baton" not in installed and "/old/" not in installed
    assert tomllib.loads(installed)["mcp_servers"]["baton"]["args"] == ["mcp"]
