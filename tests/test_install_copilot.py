"""`baton install copilot` / `baton uninstall copilot` without Copilot: the server in
mcp-config.json beside the user's own, Baton's hooks file, the skills, the backups and what
`baton doctor` says; and `baton hook` answering Copilot's payloads (its fields, its answers)."""

import json
import os
from pathlib import Path

import pytest

from baton.skills.installers.claude_code import is_baton_hook, skill_names, skill_source
from baton.skills.runtime.agents import AGENTS
from tests.test_claude_hooks import hook, runtime_dir  # noqa: F401 -- its marks of what was told

# As Copilot writes it: two-space JSON.
USER_CONFIG = ('{\n  "mcpServers": {\n    "docs": {\n      "type": "local",\n      "command": "npx",\n'
               '      "args": [\n        "-y",\n        "docs-mcp"\n      ],\n      "tools": [\n        "*"\n'
               '      ]\n    }\n  },\n  "theme": "dark"\n}\n')


@pytest.fixture
def copilot_home(tmp_path, monkeypatch) -> Path:
    """A COPILOT_HOME of the test's own, and a PATH without `copilot`."""
    path = tmp_path / "copilot-home"
    path.mkdir()
    monkeypatch.setenv("COPILOT_HOME", str(path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return path


def test_user_scope_adds_the_server_hooks_and_skills_and_gives_the_users_files_back(home, worktrees, cli,
                                                                                    copilot_home):
    main, _ = worktrees
    config = copilot_home / "mcp-config.json"
    config.write_text(USER_CONFIG)
    code, out, err = cli(main, "install", "copilot")
    assert code == 0 and "MCP server added" in out and "baton.json: written" in out
    assert err.count("no `copilot` on PATH") == 1 and err.count("\n") == 1, "said once"
    data = json.loads(config.read_text())
    assert data["theme"] == "dark" and list(data["mcpServers"]) == ["docs", "baton"]
    server = data["mcpServers"]["baton"]
    assert os.path.isabs(server["command"]) and server["args"] == ["mcp"] and server["type"] == "local"
    hooks = json.loads((copilot_home / "hooks" / "baton.json").read_text())
    assert hooks["version"] == 1 and list(hooks["hooks"]) == list(AGENTS["copilot"].hooks)
    for event, (handler,) in hooks["hooks"].items():
        assert handler["type"] == "command" and is_baton_hook(handler["bash"])
        assert f"hook {AGENTS['copilot'].hooks[event][0]}" in handler["bash"]
    for skill in skill_names():
        assert (copilot_home / "skills" / skill / "SKILL.md").read_bytes() == skill_source(skill)
    assert not (main / ".github").exists()
    installed = {path: path.read_bytes() for path in copilot_home.rglob("*") if path.is_file()}
    code, out, _ = cli(main, "install", "copilot")
    assert "MCP server unchanged" in out and "baton.json: unchanged" in out and "backup" not in out
    assert {path: path.read_bytes() for path in copilot_home.rglob("*") if path.is_file()} == installed
    code, out, _ = cli(main, "doctor")
    assert "copilot (user)   MCP server; hooks for 6 of 6 events; 3 of 3 skills\n" in out
    code, out, _ = cli(main, "uninstall", "copilot")
    assert code == 0 and "MCP server removed" in out and "baton.json: removed" in out
    assert [path.name for path in copilot_home.rglob("*")] == ["mcp-config.json"]
    assert config.read_text() == USER_CONFIG
    backups = list((home / "backups" / "copilot").iterdir())
    assert any(backup.read_text() == USER_CONFIG for backup in backups), "what the install changed was kept"


def test_a_fresh_user_install_creates_what_uninstall_removes(home, worktrees, cli, copilot_home):
    main, _ = worktrees
    assert cli(main, "install", "copilot", "--scope", "user")[0] == 0
    assert json.loads((copilot_home / "mcp-config.json").read_text())["mcpServers"]["baton"]["args"] == ["mcp"]
    assert cli(main, "uninstall", "copilot", "--scope", "user")[0] == 0
    assert list(copilot_home.iterdir()) == []


def test_project_scope_writes_the_repositorys_hooks_and_skills_and_says_trust_is_needed(home, worktrees, cli,
                                                                                      copilot_home):
    main, _ = worktrees
    code, out, err = cli(main, "install", "copilot", "--scope", "project")
    assert code == 0 and "only in a folder you trust" in out and "MCP server" not in out
    hooks = json.loads((main / ".github" / "hooks" / "baton.json").read_text())
    assert set(hooks["hooks"]) == set(AGENTS["copilot"].hooks)
    assert (main / ".github" / "skills" / "resume_session" / "SKILL.md").exists()
    assert list(copilot_home.iterdir()) == [], "nothing of the user's"
    code, out, _ = cli(main, "doctor")
    assert "copilot (project) hooks for 6 of 6 events; 3 of 3 skills\n" in out
    assert cli(main, "uninstall", "copilot", "--scope", "project")[0] == 0
    assert not (main / ".github").exists()


@pytest.mark.parametrize("content, message", [
    ('{"mcpServers": {"baton": {"command": "node", "args": ["server.js"]}}}', "already has an mcpServers.baton"),
    ('{"mcpServers": [', "is not valid JSON"),
    ('{"mcpServers": []}', '"mcpServers" is not an object'),
    ("[]", "does not hold a JSON object"),
])
def test_a_config_baton_cannot_merge_into_is_left_alone(home, worktrees, cli, copilot_home, content, message):
    main, _ = worktrees
    (copilot_home / "mcp-config.json").write_text(content)
    code, _, err = cli(main, "install", "copilot")
    assert code == 2 and message in err and "nothing changed" in err, err
    assert (copilot_home / "mcp-config.json").read_text() == content and not (copilot_home / "hooks").exists()


def copilot_payload(cwd: Path, **fields) -> dict:
    """A Copilot hook payload as 1.0.102 sends it: camel case, epoch milliseconds."""
    return {"sessionId": "5f0c2b1e-0d6a-4a39-9a3e-2b7d4c1e9f00", "timestamp": 1796574584165, "cwd": str(cwd),
            **fields}


def test_copilots_payloads_are_read_and_answered_in_its_fields(home, worktrees, cli, capsys):
    main, other = worktrees
    cli(other, "bind", "OMN-2")
    cli(other, "claim", "src/db.py", "--exclusive", "--reason", "schema change")
    cli(main, "bind", "OMN-1")
    code, answer, _ = hook("session-start", copilot_payload(main, source="new", initialPrompt="hi"), capsys)
    assert code == 0 and list(answer) == ["additionalContext"] and "works on OMN-1" in answer["additionalContext"]
    create = copilot_payload(main, toolName="create", toolArgs={"path": str(main / "src" / "db.py"), "file_text": ""})
    code, answer, _ = hook("pre-tool-use", create, capsys)
    assert answer["permissionDecision"] == "ask" and "hookSpecificOutput" not in answer
    assert "held exclusively by ticket OMN-2" in answer["permissionDecisionReason"]
    for tool in ("view", "bash", "baton-list_leases"):  # the tool hooks see every tool: quiet on all but edits
        other_tool = copilot_payload(main, toolName=tool, toolArgs={"path": str(main / "src" / "db.py")})
        assert hook("pre-tool-use", other_tool, capsys)[1] is None
    edit = copilot_payload(main, toolName="edit", toolArgs={"path": str(main / "src" / "cart.py"), "old_str": "a"},
                           toolResult={"resultType": "success", "textResultForLlm": "edited"})
    assert hook("post-tool-use", edit, capsys)[0] == 0
    outside = copilot_payload(main, toolName="create", toolArgs={"path": "/etc/elsewhere.py", "file_text": ""})
    assert hook("post-tool-use", outside, capsys)[0] == 0
    cli(other, "touch", "src/cart.py")
    code, answer, _ = hook("user-prompt-submit", copilot_payload(main, prompt="go on"), capsys)
    assert list(answer) == ["additionalContext"] and "OMN-2" in answer["additionalContext"], answer
    stop = copilot_payload(main, transcriptPath=str(main / "events.jsonl"), stopReason="end_turn")
    assert hook("stop", stop, capsys)[0] == 0
    code, out, _ = cli(main, "resume", "OMN-1", "--json")
    assert json.loads(out)["session"]["files_touched"] == ["src/cart.py"], "paths kept inside the repository"


def test_copilots_bash_is_checked_for_the_files_its_command_would_write(home, worktrees, cli, capsys, monkeypatch):
    """The `bash` tool's command, read for the files it writes, gets the check an `edit` gets:
    an exclusive lease denies (as on_exclusive says) with the holder named, a shared lease
    allows with the warning, a command writing nothing held (or unreadable) is silent."""
    main, other = worktrees
    cli(other, "bind", "OMN-2")
    cli(other, "claim", "src/db.py", "--exclusive", "--reason", "schema change")
    cli(other, "claim", "docs/*.md", "--reason", "rewording")
    cli(main, "bind", "OMN-1")
    monkeypatch.setenv("BATON_ON_EXCLUSIVE", "deny")

    def bash(command: str, cwd: Path = main) -> dict | None:
        payload = copilot_payload(main, toolName="bash", toolArgs={"command": command, "description": "run"})
        code, answer, err = hook("pre-tool-use", {**payload, "cwd": str(cwd)}, capsys)
        assert code == 0 and "Traceback" not in err, err
        return answer

    for command in ("cd src && sed -i 's/0/1/' db.py", "echo 1 > src/db.py", "ls | tee -a src/db.py",
                    f"git checkout -- {main}/src/db.py", "mv src/db.py src/old.py", "rm -f ../shop/src/db.py"):
        answer = bash(command)
        assert answer is not None and answer["permissionDecision"] == "deny", (command, answer)
        assert "src/db.py is held exclusively by ticket OMN-2" in answer["permissionDecisionReason"]
        assert "(schema change)" in answer["permissionDecisionReason"] and "hookSpecificOutput" not in answer
    assert bash("rm db.py", cwd=main / "src")["permissionDecision"] == "deny", "relative to the tool's cwd"
    shared = bash("echo more >> docs/guide.md")
    assert "permissionDecision" not in shared and "holds a shared lease on it (docs/*.md)" in \
        shared["additionalContext"]
    for quiet in ("cat src/db.py", "echo '>' src/db.py", "echo $(cat x) > src/db.py", "cat <<EOF > src/db.py\nx\nEOF",
                  "rm /tmp/elsewhere ../../db.py", "echo 'unbalanced > src/db.py", "echo > src/cart.py"):
        assert bash(quiet) is None, quiet
    code, out, _ = cli(main, "resume", "OMN-1", "--json")
    assert json.loads(out)["session"]["files_touched"] == [], "the check records nothing"
