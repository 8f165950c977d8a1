"""`baton install claude` / `baton uninstall claude`: merge into settings.json, idempotent,
and an exact round trip for files that already had hooks of their own."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from baton.skills.installers.claude_code import HOOKS, is_baton_hook, permission_rules, skill_names, skill_source

# Settings files as people have them: other hooks, permissions, env, their own layout.
HOOKED_SETTINGS = {
    "two-space, other hooks on the same events": """{
  "permissions": {
    "allow": ["Bash(npm run lint)", "Bash(npm test:*)"],
    "deny": ["Read(./.env)"]
  },
  "env": {"GREETING": "grüß dich \\u00e9"},
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Edit|Write",
        "hooks": [
          {"type": "command", "command": "npx prettier --write \\"$CLAUDE_PROJECT_DIR\\"", "timeout": 30}
        ]
      }
    ],
    "SessionStart": [
      {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
    ],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send Claude"}]}]
  }
}
""",
    "four-space with CRLF line ends": '{\r\n    "model": "opus",\r\n    "hooks": {\r\n        "Stop": [\r\n'
                                      '            {\r\n                "hooks": '
                                      '[{"type": "command", "command": "make lint"}]\r\n'
                                      '            }\r\n        ]\r\n    }\r\n}',
    "tabs, no final newline": '{\n\t"hooks": {\n\t\t"PreToolUse": [\n\t\t\t{"matcher": "Bash", "hooks": '
                              '[{"type": "command", "command": "./guard.sh"}]}\n\t\t]\n\t}\n}',
    "one line": '{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"./log-prompt"}]}]},'
                '"model":"sonnet"}\n',
    "empty event list and empty hooks table": '{\n  "hooks": {\n    "Stop": []\n  },\n'
                                              '  "statusLine": {"type": "command", "command": "x"}\n}\n',
    "empty hooks table": '{\n  "hooks": {}\n}\n',
    "empty object": "{}",
}


def settings_of(root: Path) -> Path:
    return root / ".claude" / "settings.json"


@pytest.mark.parametrize("layout", HOOKED_SETTINGS)
def test_install_then_uninstall_gives_back_the_file_byte_for_byte(home, worktrees, cli, layout):
    main, _ = worktrees
    original = HOOKED_SETTINGS[layout].encode()
    settings_of(main).parent.mkdir()
    settings_of(main).write_bytes(original)
    code, out, err = cli(main, "install", "claude")
    assert (code, err) == (0, "")
    installed = settings_of(main).read_bytes()
    merged = json.loads(installed)
    before = json.loads(original)
    for event, groups in before.get("hooks", {}).items():
        assert merged["hooks"][event][:len(groups)] == groups, "the user's own groups stay, in order, first"
    for key in before:
        if key != "hooks":
            assert merged[key] == before[key]
    local = settings_of(main).with_name("settings.local.json")
    assert json.loads(local.read_text()) == {"permissions": {"allow": permission_rules()}}
    assert cli(main, "install", "claude")[0] == 0
    assert settings_of(main).read_bytes() == installed, "installing twice changes nothing"
    assert cli(main, "uninstall", "claude")[0] == 0
    assert settings_of(main).read_bytes() == original and not local.exists()


@pytest.mark.parametrize("scope", ["project", "user"])
def test_the_rules_the_user_had_stay_on_uninstall_and_only_batons_go(home, worktrees, cli, tmp_path, monkeypatch,
                                                                     scope):
    """A rule the user wrote, even one Baton would add, is the user's: uninstall keeps it.
    A project's rules go to settings.local.json: Claude Code takes no Skill rule from the
    shared settings.json."""
    main, _ = worktrees
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    rules = main / ".claude" / "settings.local.json" if scope == "project" else tmp_path / "claude-config" / \
        "settings.json"
    rules.parent.mkdir()
    original = ('{\n  "permissions": {\n    "allow": ["Skill(handoff)", "Bash(make *)"],\n'
                '    "ask": ["Bash(baton restore *)"]\n  }\n}\n')
    rules.write_text(original)
    code, out, err = cli(main, "install", "claude", "--scope", scope)
    assert (code, err) == (0, "") and "permission rules added: Skill(recover), Skill(resume_session)" in out
    allow = json.loads(rules.read_text())["permissions"]["allow"]
    assert allow == ["Skill(handoff)", "Bash(make *)", *(r for r in permission_rules() if r != "Skill(handoff)")]
    if scope == "project":
        assert "permissions" not in json.loads(settings_of(main).read_text())
    installed = rules.read_bytes()
    code, out, _ = cli(main, "install", "claude", "--scope", scope)
    assert "permission rules there" in out and rules.read_bytes() == installed
    code, out, _ = cli(main, "uninstall", "claude", "--scope", scope)
    assert "Skill(handoff)" not in out.split("permission rules removed: ")[1]
    assert rules.read_text() == original


def test_every_skill_and_the_baton_commands_it_runs_are_allowed():
    rules = permission_rules()
    assert {f"Skill({skill})" for skill in skill_names()} == {"Skill(resume_session)", "Skill(handoff)",
                                                              "Skill(recover)"} <= set(rules)
    for skill in skill_names():
        front = skill_source(skill).decode().split("---\n")[1]
        (line,) = [entry for entry in front.splitlines() if entry.startswith("allowed-tools: ")]
        granted = re.findall(r"\w+\([^)]*\)", line)
        assert granted and set(granted) <= set(rules), skill
    assert all(rule.startswith("Skill(") or re.fullmatch(r"Bash\(baton [a-z-]+ \*\)", rule) for rule in rules), \
        "narrow rules only: Baton's skills and its own commands"


def test_the_entries_follow_the_documented_schema(home, worktrees, cli):
    main, _ = worktrees
    code, out, _ = cli(main, "install", "claude")
    assert code == 0
    assert "hooks added for SessionStart, PreToolUse, PostToolUse, UserPromptSubmit, Stop, SessionEnd" in out
    hooks = json.loads(settings_of(main).read_text())["hooks"]
    assert list(hooks) == list(HOOKS)
    for event, groups in hooks.items():
        (group,) = groups
        (handler,) = group["hooks"]
        assert handler["type"] == "command" and isinstance(handler["timeout"], int)
        assert is_baton_hook(handler["command"]) and f"baton hook {HOOKS[event][0]} || " in handler["command"]
        assert group.get("matcher") == HOOKS[event][1]
    assert hooks["PostToolUse"][0]["matcher"] == "Edit|MultiEdit|Write|NotebookEdit"


def installed_commands(root: Path) -> dict[str, str]:
    hooks = json.loads(settings_of(root).read_text())["hooks"]
    return {HOOKS[event][0]: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}


def run_as_claude_code(command: str, event: dict, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
    """Run a hook command as Claude Code does (/bin/sh -c, the payload on stdin), with a PATH
    that has no `baton` on it."""
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(event), capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": path})


@pytest.fixture
def baton_on_path(monkeypatch):
    """`baton` on PATH resolves to this install, as for a developer who installs the hooks."""
    monkeypatch.setenv("PATH", f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ['PATH']}")


def test_project_hooks_find_the_installing_baton_off_path(home, worktrees, cli, baton_on_path):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    assert cli(main, "install", "claude")[0] == 0
    commands = installed_commands(main)
    assert commands["stop"].startswith('PATH="$PATH":') and " baton hook stop" in commands["stop"]
    started = run_as_claude_code(commands["session-start"], {"session_id": "s", "cwd": str(main)})
    assert (started.returncode == 0
            and "works on OMN-1" in json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"])
    edited = {"session_id": "s", "cwd": str(main), "tool_name": "Write",
              "tool_input": {"file_path": str(main / "a.py")}}
    assert run_as_claude_code(commands["post-tool-use"], edited).returncode == 0
    code, out, _ = cli(main, "resume", "OMN-1", "--json")
    assert json.loads(out)["session"]["files_touched"] == ["a.py"]


@pytest.mark.parametrize("scope", ["project", "user"])
def test_where_baton_cannot_run_session_start_says_so_once_and_the_rest_stay_quiet(
        home, worktrees, cli, baton_on_path, tmp_path, monkeypatch, scope):
    main, _ = worktrees
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    assert cli(main, "install", "claude", "--scope", scope)[0] == 0
    root = main if scope == "project" else tmp_path / "claude-config"
    settings = root / ".claude" / "settings.json" if scope == "project" else root / "settings.json"
    gone = str(tmp_path / "removed-venv" / "bin")
    settings.write_text(settings.read_text().replace(str(Path(sys.prefix) / "bin"), gone))
    hooks = json.loads(settings.read_text())["hooks"]
    for event, groups in hooks.items():
        result = run_as_claude_code(groups[0]["hooks"][0]["command"], {"session_id": "s", "cwd": str(main)})
        assert result.returncode == 0, (event, result.stderr)
        if event == "SessionStart":
            message = json.loads(result.stdout)["systemMessage"]
            assert "Baton cannot run its hooks" in message and gone in message and "nothing is recorded" in message
        else:
            assert result.stdout == "", event
    assert cli(main, "install", "claude", "--scope", scope)[0] == 0
    assert len(json.loads(settings.read_text())["hooks"]["Stop"]) == 1, "recognised as Baton's and replaced"
    assert cli(main, "uninstall", "claude", "--scope", scope)[0] == 0
    assert not settings.exists()


@pytest.mark.parametrize("command", ["baton hook stop", "/opt/baton/bin/baton hook stop",
                                     'PATH="$PATH":/opt/baton/bin baton hook stop || true',
                                     "'/my venv/bin/baton' hook session-start || echo '{\"systemMessage\": \"x\"}'"])
def test_every_form_of_batons_command_is_recognised(command):
    assert is_baton_hook(command)


@pytest.mark.parametrize("command", ["baton hook stop && rm -rf ~", "make lint || true", "baton hook nothing",
                                     "PATH=/x baton guard"])
def test_other_commands_are_not_batons(command):
    assert not is_baton_hook(command)


def test_a_fresh_install_creates_what_uninstall_removes(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "install", "claude")
    assert {"resume_session", "handoff"} <= set(skill_names())
    for skill in skill_names():
        assert (main / ".claude" / "skills" / skill / "SKILL.md").read_bytes() == skill_source(skill)
    code, out, _ = cli(main, "install", "claude")
    assert ("hooks already there" in out and "skill /resume_session: unchanged" in out
            and "skill /handoff: unchanged" in out)
    code, out, _ = cli(main, "uninstall", "claude")
    assert code == 0 and "skill /resume_session: removed" in out and "skill /handoff: removed" in out
    assert not (main / ".claude").exists()


def test_a_stale_entry_is_replaced_not_doubled(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "install", "claude")
    path = settings_of(main)
    path.write_text(path.read_text().replace(json.dumps(json.loads(path.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]),
                                             '"/old/venv/bin/baton hook stop"'))
    assert cli(main, "install", "claude")[0] == 0
    stops = json.loads(path.read_text())["hooks"]["Stop"]
    assert len(stops) == 1 and stops[0]["hooks"][0]["command"] != "/old/venv/bin/baton hook stop"


def test_uninstall_takes_only_batons_handler_from_a_shared_group(home, worktrees, cli):
    main, _ = worktrees
    settings_of(main).parent.mkdir()
    shared = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make lint"},
                                            {"type": "command", "command": "/usr/local/bin/baton hook stop"}]}]}}
    settings_of(main).write_text(json.dumps(shared, indent=2))
    assert cli(main, "uninstall", "claude")[0] == 0
    assert json.loads(settings_of(main).read_text()) == {"hooks": {"Stop": [{"hooks": [{"type": "command",
                                                                                        "command": "make lint"}]}]}}


def test_a_settings_file_changed_since_the_install_keeps_the_change_and_loses_batons_entries(home, worktrees, cli):
    """While the file is as Baton wrote it, uninstall gives back the copy byte for byte; once Claude Code changed it,
    Baton's entries are taken out through the parser, and a lost copy never empties the file."""
    main, _ = worktrees
    original = HOOKED_SETTINGS["tabs, no final newline"]
    settings_of(main).parent.mkdir()
    settings_of(main).write_text(original)
    assert cli(main, "install", "claude")[0] == 0
    changed = json.loads(settings_of(main).read_text()) | {"model": "opus"}
    settings_of(main).write_text(json.dumps(changed, indent=2) + "\n")
    assert cli(main, "uninstall", "claude")[0] == 0
    assert json.loads(settings_of(main).read_text()) == json.loads(original) | {"model": "opus"}
    settings_of(main).write_text(original)
    assert cli(main, "install", "claude")[0] == 0
    for copy in (home / "backups" / "claude").iterdir():
        copy.unlink()
    assert cli(main, "uninstall", "claude")[0] == 0
    assert json.loads(settings_of(main).read_text()) == json.loads(original)

def test_user_scope_goes_to_the_claude_config_directory(home, worktrees, cli, tmp_path, monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    (tmp_path / "claude-config").mkdir()
    user_settings = tmp_path / "claude-config" / "settings.json"
    user_settings.write_text('{\n  "theme": "dark"\n}\n')
    assert cli(main, "install", "claude", "--scope", "user")[0] == 0
    assert not (main / ".claude").exists()
    data = json.loads(user_settings.read_text())
    assert data["theme"] == "dark" and data["hooks"]["SessionStart"][0]["hooks"][0]["command"].startswith("/")
    assert (tmp_path / "claude-config" / "skills" / "resume_session" / "SKILL.md").exists()
    assert cli(main, "uninstall", "claude", "--scope", "user")[0] == 0
    assert user_settings.read_text() == '{\n  "theme": "dark"\n}\n'
    assert (tmp_path / "claude-config").is_dir(), "the user's directory stays"


@pytest.mark.parametrize("content, message", [
    ('{"hooks": [', "is not valid JSON"),
    ('["a"]', "does not hold a JSON object"),
    ('{"hooks": []}', '"hooks" is not an object'),
    ('{"hooks": {"Stop": {}}}', "hooks.Stop is not a list"),
    ('{"model": NaN}', "is not valid JSON (NaN is not JSON)"),
    ('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "baton hook stop", "timeout": Infinity}]}]}}',
     "is not valid JSON (Infinity is not JSON)"),
])
def test_a_settings_file_baton_cannot_read_is_left_alone(home, worktrees, cli, content, message):
    main, _ = worktrees
    settings_of(main).parent.mkdir()
    settings_of(main).write_text(content)
    # uninstall finds nothing of Baton's in a "hooks" that is not an object, and says so
    for command in ("install",) if message == '"hooks" is not an object' else ("install", "uninstall"):
        code, _, err = cli(main, command, "claude")
        assert code == 2 and message in err and "nothing changed" in err and err.count("\n") == 1, err
        assert settings_of(main).read_text() == content
    assert not (main / ".claude" / "skills").exists()


def test_a_skill_of_the_users_with_the_same_name_is_kept(home, worktrees, cli):
    main, _ = worktrees
    own = main / ".claude" / "skills" / "resume_session" / "SKILL.md"
    own.parent.mkdir(parents=True)
    own.write_text("---\nname: resume_session\ndescription: mine\n---\n")
    code, out, err = cli(main, "install", "claude")
    assert code == 0 and "exists with other content; left as it is" in err
    code, out, err = cli(main, "uninstall", "claude")
    assert code == 0 and "differs from Baton's skill; left in place" in err
    assert own.read_text().endswith("description: mine\n---\n")


def test_misplaced_options_are_refused(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "install", "claude", "--strict")[0] == 2
    assert cli(main, "install", "git-hook", "--scope", "user")[0] == 2
    assert not (main / ".claude").exists()


def test_a_duplicated_event_key_never_loses_the_users_hook(home, worktrees, cli):
    """JSON keeps the last of a key given twice: such a file is refused, never rewritten."""
    main, _ = worktrees
    settings_of(main).parent.mkdir()
    mine = '{"hooks": [{"type": "command", "command": "./my-lint"}]}'
    batons = '{"hooks": [{"type": "command", "command": "baton hook stop"}]}'
    for text in (f'{{"model": "x", "hooks": {{"Stop": [{mine}], "Stop": [{batons}]}}}}',
                 f'{{"hooks": {{"Stop": [{batons}], "Stop": [{mine}]}}}}'):
        settings_of(main).write_text(text)
        for command in ("install", "uninstall"):
            code, _, err = cli(main, command, "claude")
            assert code == 2 and 'the key "Stop" is given twice' in err and "nothing changed" in err, err
            assert settings_of(main).read_text() == text


def test_a_symlinked_settings_file_stays_a_link_and_its_target_is_edited(home, worktrees, cli, tmp_path):
    main, _ = worktrees
    target = tmp_path / "dotfiles" / "claude-settings.json"
    target.parent.mkdir()
    original = '{\n  "model": "opus"\n}\n'
    target.write_text(original)
    target.chmod(0o600)
    settings_of(main).parent.mkdir()
    settings_of(main).symlink_to(target)
    assert cli(main, "install", "claude")[0] == 0
    assert settings_of(main).is_symlink() and settings_of(main).resolve() == target
    assert "hooks" in json.loads(target.read_text()) and target.stat().st_mode & 0o777 == 0o600
    assert cli(main, "uninstall", "claude")[0] == 0
    assert settings_of(main).is_symlink() and target.read_text() == original
    target.write_text('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "baton hook stop"}]}]}}')
    assert cli(main, "uninstall", "claude")[0] == 0
    assert settings_of(main).is_symlink() and json.loads(target.read_text()) == {}, "the link is not dropped"


def install_as_an_older_baton(cli, main: Path) -> None:
    """Install as an earlier Baton would have: other SKILL.md files."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("baton.skills.installers.claude_code.skill_source",
                      lambda skill: f"---\nname: {skill}\n---\nold\n".encode())
        assert cli(main, "install", "claude")[0] == 0
    assert (main / ".claude" / "skills" / "handoff" / "SKILL.md").read_bytes().endswith(b"old\n")


@pytest.mark.in_process  # the older Baton is the test process's, patched
def test_an_upgraded_baton_replaces_its_skills_and_removes_them(home, worktrees, cli):
    main, _ = worktrees
    install_as_an_older_baton(cli, main)
    code, out, err = cli(main, "install", "claude")
    assert (code, err) == (0, "") and "skill /resume_session: updated" in out and "skill /handoff: updated" in out
    for skill in skill_names():
        assert (main / ".claude" / "skills" / skill / "SKILL.md").read_bytes() == skill_source(skill)
    assert cli(main, "uninstall", "claude")[0] == 0
    install_as_an_older_baton(cli, main)
    code, out, err = cli(main, "uninstall", "claude")
    assert (code, err) == (0, "") and "skill /resume_session: removed" in out
    assert not (main / ".claude").exists()


def test_a_baton_skill_the_user_edited_is_kept(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "install", "claude")
    edited = main / ".claude" / "skills" / "handoff" / "SKILL.md"
    edited.write_bytes(edited.read_bytes() + b"\nAlways run make check first.\n")
    code, out, err = cli(main, "install", "claude")
    assert "skill /handoff: kept (other content)" in out and "left as it is" in err
    code, out, err = cli(main, "uninstall", "claude")
    assert "skill /handoff: kept (other content)" in out and edited.read_bytes().endswith(b"make check first.\n")


def test_each_skill_pre_approves_the_baton_commands_it_runs():
    """Claude Code asks before every Bash command a skill runs unless its `allowed-tools`
    (space-separated permission rules) pre-approves it."""
    import re

    from baton.skills.frontends.cli import _parser

    commands = set(_parser()._subparsers._group_actions[0].choices)
    for skill in skill_names():
        text = skill_source(skill).decode()
        front = text.split("---\n")[1]
        (line,) = [entry for entry in front.splitlines() if entry.startswith("allowed-tools: ")]
        allowed = re.findall(r"Bash\(baton ([a-z-]+) \*\)", line)
        assert line == "allowed-tools: " + " ".join(f"Bash(baton {command} *)" for command in allowed), line
        granted = set(allowed)
        assert granted <= commands, skill
        blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
        run = {line.split()[1] for block in blocks for line in block.splitlines() if line.startswith("baton ")}
        assert run and run <= granted, (skill, run - granted)
