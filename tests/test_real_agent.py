"""Baton as the real Claude Code CLI runs it: `baton install claude` in a git worktree,
`claude -p` against a scripted model on loopback (tests/claude_code.py), and what Claude
Code really sends the model and shows the user.

Skipped only when no `claude` can be found (./scripts/test installs it from npm).
"""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.claude_code import (
    MCP_TOOLS_BYTES,
    ScriptedModel,
    find_claude,
    mcp_tools,
    real_agent_marks,
    run_claude,
    size,
    stream_events,
)
from tests.workspace import git, make_repo

CLAUDE = find_claude()
pytestmark = real_agent_marks(CLAUDE, "Claude Code", "BATON_CLAUDE")
BATON = Path(sys.prefix) / "bin" / "baton"
NO_BATON_PATH = "/usr/local/bin:/usr/bin:/bin"  # Claude Code's PATH in these tests: no `baton` on it
TOOLS = 21


@pytest.fixture
def project(home, tmp_path, monkeypatch) -> Path:
    """A worktree of a repository where `baton install claude` ran with `baton` on PATH (so
    the hooks name the bare `baton`, falling back to this install's directory)."""
    main = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    worktree = tmp_path / "shop-agent"
    git(main, "worktree", "add", "-q", str(worktree), "-b", "agent")
    monkeypatch.setenv("PATH", f"{BATON.parent}{os.pathsep}{os.environ['PATH']}")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    from baton.skills.frontends.cli import main as baton

    monkeypatch.chdir(worktree)
    assert baton(["install", "claude"]) == 0
    assert baton(["bind", "OMN-1", "--agent", "claude"]) == 0
    assert baton(["decide", "Keep carts in PostgreSQL", "--context", "carts must survive restarts"]) == 0
    return worktree


def claude(project: Path, prompt: str, model: ScriptedModel, tmp_path: Path, *args: str, env: dict | None = None):
    result = run_claude(CLAUDE, project, prompt, model, home=tmp_path / "claude-home",
                        env={"PATH": NO_BATON_PATH, **(env or {})}, args=args)
    assert result.returncode == 0, result.stderr[-2000:]
    return result, stream_events(result)


def resumed(project: Path) -> dict:
    import subprocess

    result = subprocess.run([str(BATON), "resume", "OMN-1", "--json"], cwd=project, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def hook_outputs(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("type") == "system" and e.get("subtype") == "hook_response"]


def shown_to_user(events: list[dict]) -> list[str]:
    """The systemMessage texts of every hook, as Claude Code parsed them from its output."""
    shown = []
    for event in hook_outputs(events):
        for line in event.get("stdout", "").splitlines():
            if line.startswith("{") and "systemMessage" in json.loads(line):
                shown.append(json.loads(line)["systemMessage"])
    shown += [e["content"].split(" says: ", 1)[1] for e in events
              if e.get("subtype") == "informational" and " says: " in e.get("content", "")]
    return shown


def test_the_hooks_fire_and_the_session_start_context_reaches_the_model(project, tmp_path):
    """With no `baton` on Claude Code's PATH: the hooks find the installing Baton."""
    written = project / "src" / "cart.py"
    turns = [{"tool": "Write", "input": {"file_path": str(written), "content": "CARTS = {}\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Create src/cart.py", model, tmp_path, "--permission-mode", "acceptEdits")
    assert events[-1]["result"] == "Done." and written.exists()
    first = json.dumps(model.agent_requests[0])
    assert "works on OMN-1" in first and "Keep carts in PostgreSQL" in first, "SessionStart context reaches the model"
    ran = {e["hook_event"]: e["exit_code"] for e in hook_outputs(events)}
    assert ran.get("SessionStart") == 0 and all(code == 0 for code in ran.values()), ran
    session = resumed(project)["session"]
    assert "src/cart.py" in session["files_touched"], "PostToolUse recorded the touch"
    assert session["agent"] == "claude" and shown_to_user(events) == []


def test_conflicts_reach_the_model_both_ways(project, tmp_path):
    """Its own edit of a file another active ticket touched (PostToolUse: Claude Code 2.1
    sends the hook's context after the tool result, as a message of its own), and the other
    ticket's edit of a file it touched (the next prompt)."""
    import subprocess

    other = project.parent / "shop"
    for command in (["bind", "OMN-2"], ["touch", "src/db.py"]):
        assert subprocess.run([str(BATON), *command], cwd=other, capture_output=True, timeout=60).returncode == 0
    turns = [{"tool": "Write", "input": {"file_path": str(project / "src" / "db.py"), "content": "DB = 1\n"}},
             {"tool": "Write", "input": {"file_path": str(project / "src" / "cart.py"), "content": "CARTS = {}\n"}},
             {"text": "Done."}]
    with ScriptedModel(turns) as model:
        claude(project, "Write the db module", model, tmp_path, "--permission-mode", "acceptEdits")
    after_edit = json.dumps(model.agent_requests[1]["messages"][-3:])
    assert "OMN-2" in after_edit and "src/db.py" in after_edit, after_edit[-1500:]
    assert subprocess.run([str(BATON), "touch", "src/cart.py"], cwd=other, capture_output=True,
                          timeout=60).returncode == 0
    with ScriptedModel([{"text": "Noted."}]) as model:
        claude(project, "Anything new?", model, tmp_path)
    told = json.dumps(model.agent_requests[0]["messages"])
    assert "OMN-2" in told and "src/cart.py" in told, "the other ticket's overlap reaches the model"


def test_the_check_before_an_edit_reaches_the_model_with_the_edit(project, tmp_path):
    """PreToolUse: another ticket's touch of the file decides nothing (the edit goes on under
    the permission mode) and its holder, files and next action reach the model in the
    request that follows the tool call, beside the edit's result."""
    import subprocess

    other = project.parent / "shop"
    for command in (["bind", "OMN-2", "--agent", "codex"], ["touch", "src/db.py"],
                    ["update", "--next", "split the db module"]):
        assert subprocess.run([str(BATON), *command], cwd=other, capture_output=True, timeout=60).returncode == 0
    written = project / "src" / "db.py"
    turns = [{"tool": "Write", "input": {"file_path": str(written), "content": "DB = 1\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        claude(project, "Write the db module", model, tmp_path, "--permission-mode", "acceptEdits")
    assert written.exists(), "an overlap does not stop the edit"
    after_call = json.dumps(model.agent_requests[1]["messages"][-3:])
    assert "before this edit" in after_call and "src/db.py: ticket OMN-2 (agent codex" in after_call, \
        after_call[-2000:]
    assert "their next action: split the db module" in after_call


def lease_held_by_omn2(project: Path, *claim: str) -> None:
    """OMN-2, bound in the repository's other worktree, claims src/db.py as claim says."""
    import subprocess

    other = project.parent / "shop"
    for command in (["bind", "OMN-2", "--agent", "codex"], ["claim", "src/db.py", *claim]):
        done = subprocess.run([str(BATON), *command], cwd=other, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def test_an_exclusive_lease_under_deny_refuses_the_edit_and_tells_the_model_why(project, tmp_path):
    """PreToolUse `deny` (on_exclusive = "deny"): Claude Code never runs the Write, even
    under acceptEdits, and the reason (holder, ticket, how to get the lease released) is
    the tool's result in the request that follows the call."""
    lease_held_by_omn2(project, "--exclusive", "--reason", "schema change")
    written = project / "src" / "db.py"
    turns = [{"tool": "Write", "input": {"file_path": str(written), "content": "DB = 1\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Write the db module", model, tmp_path, "--permission-mode", "acceptEdits",
                                env={"BATON_ON_EXCLUSIVE": "deny"})
    assert not written.exists(), "the denied edit never happened"
    after_call = json.dumps(model.agent_requests[1]["messages"][-2:])
    assert "src/db.py is held exclusively by ticket OMN-2 (agent codex" in after_call, after_call[-2000:]
    assert "(schema change)" in after_call and "The edit is refused" in after_call
    assert "ask the holder of OMN-2 to release the lease, or wait until it expires" in after_call
    assert "src/db.py" not in resumed(project)["session"]["files_touched"], "nothing was recorded as touched"


def test_an_exclusive_lease_under_ask_names_the_holder_and_a_run_without_a_prompt_does_not_edit(project, tmp_path):
    """PreToolUse `ask` (the default) in `claude -p`, where no one can answer a prompt: the
    Write does not happen, even under acceptEdits; the run lists it among its permission
    denials, and the permission decision's reason (the prompt's question, naming the
    holder) is the tool's result the model reads."""
    lease_held_by_omn2(project, "--exclusive", "--reason", "schema change")
    written = project / "src" / "db.py"
    turns = [{"tool": "Write", "input": {"file_path": str(written), "content": "DB = 1\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Write the db module", model, tmp_path, "--permission-mode", "acceptEdits")
    assert not written.exists(), "no edit without the user's approval"
    assert [(d["tool_name"], d["tool_input"]["file_path"]) for d in events[-1]["permission_denials"]] == [
        ("Write", str(written))]
    (refused,) = [block for block in model.agent_requests[1]["messages"][-1]["content"]
                  if block.get("type") == "tool_result"]
    assert refused["is_error"], refused
    assert "src/db.py is held exclusively by ticket OMN-2 (agent codex, branch main)" in refused["content"]
    assert "(schema change). Edit it anyway? The holder of OMN-2 may be changing it now." in refused["content"]


def test_a_shared_lease_warns_the_model_and_the_edit_goes_on(project, tmp_path):
    """A shared lease decides nothing: the Write happens, and the lease and its holder
    reach the model in the request that follows the call, beside the edit's result."""
    lease_held_by_omn2(project, "--reason", "tidying the models")
    written = project / "src" / "db.py"
    turns = [{"tool": "Write", "input": {"file_path": str(written), "content": "DB = 1\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Write the db module", model, tmp_path, "--permission-mode", "acceptEdits")
    assert written.exists(), "a shared lease does not stop the edit"
    after_call = json.dumps(model.agent_requests[1]["messages"][-3:])
    assert "before this edit" in after_call, after_call[-2000:]
    assert "src/db.py: ticket OMN-2 (agent codex" in after_call
    assert "holds a shared lease on it (src/db.py)" in after_call
    assert "lease reason: tidying the models" in after_call
    assert events[-1]["permission_denials"] == []


@pytest.mark.parametrize("broken", ["bad baton.toml", "unusable data home"])
def test_claude_code_shows_once_that_baton_cannot_record(project, tmp_path, home, broken):
    if broken == "bad baton.toml":
        (home / "baton.toml").write_text("[stores\n")
        env = {}
    else:
        (tmp_path / "a-file").write_text("")
        env = {"BATON_HOME": str(tmp_path / "a-file" / "home")}
    turns = [{"tool": "Write", "input": {"file_path": str(project / "a.py"), "content": "A = 1\n"}}, {"text": "Done."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Create a.py", model, tmp_path, "--permission-mode", "acceptEdits", env=env)
    assert events[-1]["result"] == "Done.", "the agent works on"
    shown = shown_to_user(events)
    assert len(shown) == 1 and shown[0].startswith("Baton is not recording this session: "), shown
    assert "baton.toml" in shown[0] or "a-file" in shown[0]
    assert all(e["exit_code"] == 0 for e in hook_outputs(events))


def test_where_baton_cannot_run_at_all_session_start_says_so_once(project, tmp_path):
    settings = project / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace(str(BATON.parent), str(tmp_path / "removed-venv" / "bin")))
    with ScriptedModel([{"text": "Done."}]) as model:
        result, events = claude(project, "Hello", model, tmp_path)
    shown = shown_to_user(events)
    assert len(shown) == 1 and "Baton cannot run its hooks" in shown[0], shown
    assert all(e["exit_code"] == 0 for e in hook_outputs(events)), "no hook fails with 127"


def test_the_resume_skill_runs_its_command_without_asking(project, tmp_path):
    turns = [{"tool": "Bash", "input": {"command": "baton resume OMN-1", "description": "Resume OMN-1"}},
             {"text": "Resumed."}]
    path = {"PATH": f"{NO_BATON_PATH}:{BATON.parent}"}  # the Bash tool runs `baton` itself
    with ScriptedModel(turns) as model:
        result, events = claude(project, "/resume_session OMN-1", model, tmp_path, env=path)
    answer = events[-1]
    assert answer["permission_denials"] == [], "allowed-tools pre-approves `baton resume`"
    tool_result = json.dumps(model.agent_requests[1]["messages"][-1])
    assert "Resuming OMN-1" in tool_result and "Keep carts in PostgreSQL" in tool_result
    with ScriptedModel(turns) as model:  # the install's rule allows it outside the skill too
        result, events = claude(project, "Resume OMN-1", model, tmp_path, env=path)
    assert events[-1]["permission_denials"] == []
    with ScriptedModel([{"tool": "Bash", "input": {"command": "baton gc", "description": "gc"}},
                        {"text": "Done."}]) as model:  # a command no skill runs still asks
        result, events = claude(project, "Clean up", model, tmp_path, env=path)
    assert [d["tool_input"]["command"] for d in events[-1]["permission_denials"]] == ["baton gc"]


@pytest.mark.parametrize("skill, loaded", [("handoff", "A handoff is what the next session"),
                                           ("recover", "baton recover --verbose")])
def test_the_skill_tool_runs_batons_skills_without_asking(project, tmp_path, skill, loaded):
    """Claude Code 2.1 asks before the Skill tool runs a skill unless a rule allows it: the
    install adds Skill(NAME) for each of Baton's skills."""
    turns = [{"tool": "Skill", "input": {"skill": skill}}, {"text": "Loaded."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, f"Run the {skill} skill", model, tmp_path)
    assert events[-1]["permission_denials"] == [], "no prompt for the skill"
    after = json.dumps(model.agent_requests[1]["messages"][-2:])
    assert loaded in after, "the skill's text reached the model"
    assert "Execute skill" not in after


def test_the_model_finds_batons_tools_by_a_keyword_search(project, tmp_path):
    """Tool search on (Claude Code's default): the model sees only the tools' names and loads
    Baton's by keywords matched against their names and descriptions, not by exact name."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"baton": {"command": str(BATON), "args": ["mcp"]}}}))
    turns = [{"tool": "ToolSearch", "input": {"query": "handoff next action conflicts"}},
             {"tool": "mcp__baton__resume_session", "input": {"task_id": "OMN-1"}},
             {"text": "Resumed."}]
    with ScriptedModel(turns) as model:
        result, events = claude(project, "Pick up ticket OMN-1 where the last session left it", model, tmp_path,
                                "--mcp-config", str(config), "--allowedTools", "mcp__baton__resume_session")
    first = model.agent_requests[0]
    assert not mcp_tools(first), "deferred: no MCP schema goes out before a search"
    found = json.dumps(model.agent_requests[1]["messages"][-2:])
    assert "mcp__baton__resume_session" in found, "the keyword query found Baton's resume tool"
    answered = json.dumps(model.agent_requests[2]["messages"][-2:])
    assert '\\"status\\": \\"found\\"' in answered or "Keep carts in PostgreSQL" in answered, answered[-2000:]
    assert events[-1]["permission_denials"] == []


def test_a_600_file_ticket_reaches_the_model_whole(project, tmp_path):
    from baton.skills.frontends.cli import main as baton

    files = [f"src/module_{n:03}/implementation_file.py" for n in range(600)]
    for start in range(0, 600, 200):
        assert baton(["touch", *files[start:start + 200]]) == 0
    for n in range(40):
        assert baton(["decide", f"Decision {n}: keep the cart service stateless ({n})"]) == 0
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"baton": {"command": str(BATON), "args": ["mcp"]}}}))
    turns = [{"tool": "ToolSearch", "input": {"query": "select:mcp__baton__resume_session"}},
             {"tool": "mcp__baton__resume_session", "input": {"task_id": "OMN-1"}}, {"text": "Resumed."}]
    with ScriptedModel(turns) as model:
        claude(project, "Resume OMN-1", model, tmp_path, "--mcp-config", str(config),
               "--allowedTools", "mcp__baton__resume_session")
    (result,) = [block for message in model.agent_requests[2]["messages"] for block in message["content"]
                 if isinstance(block, dict) and block.get("type") == "tool_result"
                 and block.get("tool_use_id") == "toolu_scripted_2"]
    text = result["content"] if isinstance(result["content"], str) else result["content"][0]["text"]
    assert len(text) <= 10_000
    answer = json.loads(text)
    assert answer["omitted"]["files"]["total"] == 600 and answer["session"]["next_action"] is None


def test_the_mcp_server_costs_only_its_tools_and_stops_at_the_first_signal(project, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"baton": {"command": str(BATON), "args": ["mcp"]}}}))
    debug = tmp_path / "claude-debug.log"
    with ScriptedModel([{"text": "Done."}]) as model:
        # Tool search off: every tool schema goes out with every request, as without it.
        result, events = claude(project, "Hello", model, tmp_path, "--mcp-config", str(config),
                                "--debug-file", str(debug), env={"ENABLE_TOOL_SEARCH": "false"})
    tools = mcp_tools(model.agent_requests[0])
    assert sorted(t["name"] for t in tools) == sorted(f"mcp__baton__{name}" for name in _tool_names())
    # Only Baton's own tools go out (no resource tools for an unserved capability), their
    # schemas short: the 21 tools, described for tool search, measured 8,551 bytes.
    assert size(tools) < MCP_TOOLS_BYTES, f"{size(tools)} bytes of MCP tools per request"
    log = debug.read_text()
    assert re.search(r'MCP server "baton": Sending SIGINT', log), "Claude Code stopped the server by SIGINT"
    assert "SIGTERM" not in log, [line for line in log.splitlines() if "SIGTERM" in line]


def _tool_names() -> list[str]:
    from baton.skills.frontends.cli import COMMANDS
    from baton.skills.frontends.mcp_server import catalogue

    served = catalogue(COMMANDS)[1]
    assert len(served) == TOOLS
    return list(served)
