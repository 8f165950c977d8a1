"""Baton as the real GitHub Copilot CLI runs it: `baton install copilot` (user scope, which
Copilot reads without folder trust), then `copilot -p` against a scripted chat completions
API on loopback (tests/copilot_cli.py), and what Copilot really sends the model.

Skipped only when no `copilot` can be found (./scripts/test installs it from npm).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.claude_code import real_agent_marks
from tests.copilot_cli import ScriptedChat, find_copilot, run_copilot
from tests.test_real_codex import resumed
from tests.workspace import agent_worktree, git

COPILOT = find_copilot()
pytestmark = real_agent_marks(COPILOT, "Copilot CLI", "BATON_COPILOT")
BATON = Path(sys.prefix) / "bin" / "baton"
NO_BATON_PATH = "/usr/local/bin:/usr/bin:/bin"  # Copilot's PATH in these tests: no `baton` on it
USER_SERVERS = ('{\n  "mcpServers": {\n    "docs": {\n      "type": "local",\n      "command": "docs-mcp",\n'
                '      "args": [],\n      "tools": [\n        "*"\n      ]\n    }\n  }\n}\n')
USER_HOOKS = '{"version": 1, "hooks": {"sessionEnd": [{"type": "command", "bash": "true"}]}}\n'


@pytest.fixture(scope="module")
def user_home(tmp_path_factory) -> Path:
    """One HOME for the module's runs: Copilot unpacks itself there (235 MB) on its first run."""
    return tmp_path_factory.mktemp("copilot-user-home")


@pytest.fixture
def copilot_home(tmp_path, monkeypatch) -> Path:
    """A COPILOT_HOME with a server and a hooks file of the user's own."""
    path = tmp_path / "copilot-home"
    (path / "hooks").mkdir(parents=True)
    (path / "mcp-config.json").write_text(USER_SERVERS)
    (path / "hooks" / "mine.json").write_text(USER_HOOKS)
    monkeypatch.setenv("COPILOT_HOME", str(path))
    return path


@pytest.fixture
def project(home, tmp_path, monkeypatch, copilot_home) -> Path:
    """A worktree bound to OMN-1 with a decision, OMN-2 bound in the repository's other
    worktree, and `baton install copilot` run as a user runs it."""
    worktree = agent_worktree(tmp_path, monkeypatch)
    main = worktree.parent / "shop"
    baton(main, "bind", "OMN-2", "--agent", "claude")
    baton(worktree, "bind", "OMN-1")
    baton(worktree, "decide", "Keep carts in PostgreSQL", "--context", "carts must survive restarts")
    install = baton(worktree, "install", "copilot", path=f"{Path(COPILOT).parent}:/usr/bin:/bin")
    assert install.stderr == "", "with `copilot` on PATH the install says nothing more"
    (worktree / "src").mkdir()  # Copilot's create tool makes no directories
    return worktree


def baton(cwd: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(BATON), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                            env={**os.environ, **({"PATH": path} if path else {})})
    assert result.returncode == 0, result.stderr
    return result


def copilot(project: Path, prompt: str, model: ScriptedChat, copilot_home: Path, user_home: Path,
            env: dict | None = None) -> subprocess.CompletedProcess:
    result = run_copilot(COPILOT, project, prompt, model, copilot_home=copilot_home, home=user_home,
                         env={"PATH": NO_BATON_PATH, **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_installed_by_baton_copilot_records_the_session_and_reaches_batons_tools(project, copilot_home, user_home):
    """One run: Baton's tools in the first request with the session-start context and the
    skills; resume_session through MCP; a `create` recorded as a touch, its overlap with
    OMN-2 told to the model; then install twice changes nothing and uninstall gives back
    the user's files."""
    turns = [{"call": "baton-resume_session", "arguments": {"task_id": "OMN-1"}},
             {"call": "create", "arguments": {"path": str(project / "src" / "cart.py"), "file_text": "CARTS = {}\n"}},
             {"text": "Done."}]
    baton(project.parent / "shop", "touch", "src/cart.py")
    with ScriptedChat(turns) as model:
        copilot(project, "Resume OMN-1 and create the cart module", model, copilot_home, user_home)
    first = model.requests[0]
    tools = {tool["function"]["name"] for tool in first["tools"]}
    assert {"baton-resume_session", "baton-record_decision"} <= tools, sorted(tools)
    context = json.dumps(first["messages"][:3])
    assert "works on OMN-1" in context and "Keep carts in PostgreSQL" in context, "session start reaches the model"
    skills = first["messages"][0]["content"]
    assert all(f"<name>{skill}</name>" in skills for skill in ("resume_session", "handoff", "recover")), \
        "Baton's skills are listed to the model"
    answer = json.loads(model.tool_results(1)[-1])
    assert answer["status"] == "found" and answer["task_id"] == "OMN-1"
    assert [d["text"] for d in answer["session"]["decisions"]] == ["Keep carts in PostgreSQL"]
    after_create = json.dumps(model.requests[2]["messages"][-3:])
    assert "OMN-2" in after_create and "src/cart.py" in after_create, after_create[-2000:]
    assert (project / "src" / "cart.py").exists() and "src/cart.py" in resumed(project)["session"]["files_touched"]

    files = {path: path.read_bytes() for path in copilot_home.rglob("*") if path.is_file()
             and "session-state" not in path.parts and "logs" not in path.parts}
    again = baton(project, "install", "copilot", path=f"{Path(COPILOT).parent}:/usr/bin:/bin")
    assert "MCP server unchanged" in again.stdout and "baton.json: unchanged" in again.stdout
    assert all(path.read_bytes() == data for path, data in files.items()), "installing twice changes nothing"
    baton(project, "uninstall", "copilot")
    assert (copilot_home / "mcp-config.json").read_text() == USER_SERVERS
    assert (copilot_home / "hooks" / "mine.json").read_text() == USER_HOOKS
    assert not (copilot_home / "hooks" / "baton.json").exists() and not (copilot_home / "skills").exists()


def test_an_exclusive_lease_under_deny_stops_the_edit_and_names_the_holder(project, copilot_home, user_home, home):
    """Neither the `edit` nor a `bash` command writing the file runs; a `bash` command
    writing another file does."""
    baton(project.parent / "shop", "claim", "src/db.py", "--exclusive", "--reason", "schema change")
    (home / "baton.toml").write_text('[conflicts]\non_exclusive = "deny"\n')
    target = project / "src" / "db.py"
    target.write_text("DB = 0\n")
    git(project, "add", "src/db.py")
    git(project, "commit", "-qm", "The db module")  # not a change of this turn's
    turns = [{"call": "edit", "arguments": {"path": str(target), "old_str": "0", "new_str": "1"}},
             {"call": "bash", "arguments": {"command": "cd src && sed -i 's/0/2/' db.py && echo ran > ../ran.txt",
                                            "description": "Change the db module"}},
             {"call": "bash", "arguments": {"command": "echo ran > ran.txt", "description": "Note it"}},
             {"text": "Done."}]
    with ScriptedChat(turns) as model:
        copilot(project, "Change the db module", model, copilot_home, user_home)
    assert target.read_text() == "DB = 0\n", "neither the denied edit nor the denied command ran"
    for request, tool in ((1, "edit"), (2, "bash")):
        refused = model.tool_results(request)[request - 1]
        assert refused.startswith("Denied by preToolUse hook"), (tool, refused)
        assert "src/db.py is held exclusively by ticket OMN-2 (agent claude" in refused and "(schema change)" in refused
    assert (project / "ran.txt").read_text() == "ran\n", "a command writing nothing held runs"
    assert "src/db.py" not in resumed(project)["session"]["files_touched"]


def test_a_shared_lease_warns_the_model_and_the_edit_goes_on(project, copilot_home, user_home):
    baton(project.parent / "shop", "claim", "src/db.py", "--reason", "tidying the models")
    target = project / "src" / "db.py"
    turns = [{"call": "create", "arguments": {"path": str(target), "file_text": "DB = 1\n"}},
             {"call": "bash", "arguments": {"command": "echo 'DB = 2' >> src/db.py", "description": "Add a line"}},
             {"text": "Done."}]
    with ScriptedChat(turns) as model:
        copilot(project, "Write the db module", model, copilot_home, user_home)
    assert target.read_text() == "DB = 1\nDB = 2\n", "a shared lease stops neither the edit nor the command"
    after = json.dumps(model.requests[1]["messages"][-3:])
    assert "before this edit" in after and "holds a shared lease on it (src/db.py)" in after, after[-2000:]
    assert "lease reason: tidying the models" in after
    after_bash = json.dumps(model.requests[2]["messages"])
    assert after_bash.count("holds a shared lease on it (src/db.py)") == 2, "the command's warning reached the model"


def test_a_600_file_ticket_reaches_the_model_whole(project, copilot_home, user_home):
    files = [f"src/module_{n:03}/implementation_file.py" for n in range(600)]
    for start in range(0, 600, 200):
        baton(project, "touch", *files[start:start + 200])
    turns = [{"call": "baton-resume_session", "arguments": {"task_id": "OMN-1"}}, {"text": "Done."}]
    with ScriptedChat(turns) as model:
        copilot(project, "Resume OMN-1", model, copilot_home, user_home)
    answer = json.loads(model.tool_results(1)[-1])  # whole JSON: Copilot passes it on as the server gave it
    assert answer["omitted"]["files"]["total"] == 600
    whole = resumed(project)["session"]["files_touched"]
    assert answer["session"]["files_touched"] == whole[answer["omitted"]["files"]["first_shown"]:]
