"""Baton as the real Codex CLI runs it: `baton install codex` (which asks Codex for the hooks'
hashes and trusts them), then `codex exec` against a scripted Responses API on loopback
(tests/codex_cli.py), with Codex's default approval settings, and what Codex really sends
the model.

Skipped only when no `codex` can be found (./scripts/test installs it from npm).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.claude_code import real_agent_marks
from tests.codex_cli import ScriptedResponses, events, find_codex, run_codex, write_model_config
from tests.workspace import agent_worktree

CODEX = find_codex()
pytestmark = real_agent_marks(CODEX, "the Codex CLI", "BATON_CODEX")
BATON = Path(sys.prefix) / "bin" / "baton"
BUDGET = 10_000


@pytest.fixture
def codex_home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(path))
    return path


@pytest.fixture
def project(home, tmp_path, monkeypatch, codex_home) -> Path:
    """A worktree bound to OMN-1 with a decision, and another ticket's worktree beside it."""
    worktree = agent_worktree(tmp_path, monkeypatch)
    main = worktree.parent / "shop"
    from baton.skills.frontends.cli import main as baton

    monkeypatch.chdir(main)
    assert baton(["bind", "OMN-2", "--agent", "claude"]) == 0
    assert baton(["touch", "src/db.py"]) == 0
    monkeypatch.chdir(worktree)
    assert baton(["bind", "OMN-1", "--agent", "codex"]) == 0
    assert baton(["decide", "Keep carts in PostgreSQL", "--context", "carts must survive restarts"]) == 0
    return worktree


def install(project: Path, model: ScriptedResponses, codex_home: Path) -> str:
    """The model's settings, then `baton install codex --scope user` as a user runs it, with
    `codex` on PATH: its output."""
    write_model_config(codex_home, model)
    result = subprocess.run([str(BATON), "install", "codex", "--scope", "user"], cwd=project, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PATH": f"{Path(CODEX).parent}:/usr/bin:/bin"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return result.stdout


def codex(project: Path, prompt: str, codex_home: Path, *args: str) -> list[dict]:
    result = run_codex(CODEX, project, prompt, codex_home=codex_home, args=args,
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin"})  # no `baton` on Codex's PATH
    assert result.returncode == 0, result.stderr[-3000:]
    return events(result)


def tool_answer(model: ScriptedResponses, request: int) -> str:
    """The text of the MCP tool's answer that request carries last (Codex adds a wall-time line)."""
    output = model.outputs(request)[-1]
    parts = json.loads(output) if output.startswith("[") else [{"text": output.split("Output:\n", 1)[-1]}]
    (text,) = [part["text"] for part in parts if part.get("text", "").startswith("{")]
    return text


def resumed(project: Path) -> dict:
    result = subprocess.run([str(BATON), "resume", "OMN-1", "--json"], cwd=project, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_installed_by_baton_codex_runs_the_hooks_and_the_tools_without_asking(project, codex_home):
    """Default approval settings (`codex exec`: approval never): the annotated tools run; the
    trusted hooks fire; a conflict reaches the model both ways (its edit, checked before and
    recorded after it; the other's)."""
    patch = "*** Begin Patch\n*** Add File: src/db.py\n+DB = 'postgresql'\n*** End Patch\n"
    turns = [{"call": "resume_session", "namespace": "mcp__baton", "arguments": {"task_id": "OMN-1"}},
             {"patch": patch},
             {"call": "record_decision", "namespace": "mcp__baton",
              "arguments": {"text": "Carts live in the db module"}},
             {"call": "resume_session", "namespace": "mcp__baton", "arguments": {"task_id": "bad id!"}},
             {"text": "Done."}]
    with ScriptedResponses(turns) as model:
        out = install(project, model, codex_home)
        assert "6 hooks trusted" in out
        seen = codex(project, "Resume OMN-1 and keep carts in the db module", codex_home, "-s", "workspace-write")
    assert seen[-1]["type"] == "turn.completed"
    first = json.dumps(model.requests[0])
    assert "works on OMN-1" in first and "Keep carts in PostgreSQL" in first, "SessionStart context reaches the model"
    answer = json.loads(tool_answer(model, 1))
    assert answer["status"] == "found" and answer["task_id"] == "OMN-1", "resume_session ran without approval"
    after_patch = json.dumps(model.requests[2])
    assert "OMN-2" in after_patch and "src/db.py" in after_patch, "the edit's overlap reaches the model"
    assert "before this edit" in after_patch and "src/db.py: ticket OMN-2 (agent claude" in after_patch, \
        "Codex sends PreToolUse for apply_patch: the check before the edit reaches the model too"
    assert json.loads(tool_answer(model, 3))["decision"] == "Carts live in the db module", "a write tool ran too"
    bad = json.loads(tool_answer(model, 4))
    assert bad["error"]["type"] == "bad_input", "bad input reaches the model as one structured error"
    assert "MCP tool call requires approval" not in json.dumps(model.requests)
    session = resumed(project)["session"]
    assert "src/db.py" in session["files_touched"], "apply_patch's edit recorded as a touch"
    assert "Carts live in the db module" in [d["text"] for d in session["decisions"]]
    # The other way: OMN-2 edits a file OMN-1 touched; the next prompt tells OMN-1.
    other = subprocess.run([str(BATON), "touch", "src/db.py", "src/cart.py"], cwd=project.parent / "shop",
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stderr
    with ScriptedResponses([{"text": "Noted."}]) as model:
        write_model_config(codex_home, model)
        codex(project, "Anything new?", codex_home)
    assert "OMN-2" in json.dumps(model.requests[0]["input"][-3:]), "the other ticket's overlap reaches the model"


def test_a_600_file_ticket_reaches_the_model_whole_and_the_rest_by_pages(project, codex_home):
    from baton.skills.frontends.cli import main as baton

    files = [f"src/module_{n:03}/implementation_file.py" for n in range(600)]
    for start in range(0, 600, 200):
        assert baton(["touch", *files[start:start + 200]]) == 0
    for n in range(40):
        assert baton(["decide", f"Decision {n}: keep the cart service stateless ({n})",
                      "--context", f"they must survive restarts, reason {n}"]) == 0
    turns = [{"call": "resume_session", "namespace": "mcp__baton", "arguments": {"task_id": "OMN-1"}},
             {"call": "resume_session", "namespace": "mcp__baton",
              "arguments": {"task_id": "OMN-1", "section": "files", "offset": 0}},
             {"text": "Done."}]
    with ScriptedResponses(turns) as model:
        install(project, model, codex_home)
        codex(project, "Resume OMN-1", codex_home)
    text = tool_answer(model, 1)
    assert len(text) <= BUDGET and "truncated" not in text
    answer = json.loads(text)  # whole: Codex cuts only what is longer than about 12 KB
    assert answer["omitted"]["files"]["total"] == 600 and answer["omitted"]["decisions"]["total"] == 41
    whole = resumed(project)["session"]["files_touched"]
    assert answer["session"]["files_touched"] == whole[answer["omitted"]["files"]["first_shown"]:]
    page = json.loads(tool_answer(model, 2))
    assert page["section"] == "files" and page["items"] == whole[:len(page["items"])] and page["next_offset"] > 0


def claim_for_omn2(project: Path, *claim: str) -> None:
    """OMN-2, bound in the repository's other worktree, claims src/db.py as claim says."""
    done = subprocess.run([str(BATON), "claim", "src/db.py", *claim], cwd=project.parent / "shop",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_an_exclusive_lease_under_deny_stops_apply_patch_and_tells_the_model_why(project, codex_home, home):
    """`[conflicts] on_exclusive = "deny"`: Codex takes the PreToolUse hook's deny for
    apply_patch; the patch is not applied, and the tool's output the model reads next is
    Codex's "Command blocked by PreToolUse hook: " and the reason."""
    claim_for_omn2(project, "--exclusive", "--reason", "schema change")
    (home / "baton.toml").write_text('[conflicts]\non_exclusive = "deny"\n')
    patch = "*** Begin Patch\n*** Add File: src/db.py\n+DB = 'postgresql'\n*** End Patch\n"
    with ScriptedResponses([{"patch": patch}, {"text": "Done."}]) as model:
        install(project, model, codex_home)
        seen = codex(project, "Write the db module", codex_home, "-s", "workspace-write")
    assert seen[-1]["type"] == "turn.completed"
    assert not (project / "src" / "db.py").exists(), "the denied patch was not applied"
    (refused,) = model.outputs(1)
    assert refused.startswith("Command blocked by PreToolUse hook: Baton: src/db.py is held exclusively by ticket "
                              "OMN-2 (agent claude, branch main) until "), refused
    assert "(schema change). The edit is refused" in refused
    assert "ask the holder of OMN-2 to release the lease, or wait until it expires" in refused
    assert "src/db.py" not in resumed(project)["session"]["files_touched"], "nothing was recorded as touched"


def test_a_shared_lease_reaches_the_model_and_apply_patch_goes_on(project, codex_home):
    """A shared lease decides nothing: the patch is applied, and the lease and its holder
    reach the model beside its output; the post-edit hook records the touch."""
    claim_for_omn2(project, "--reason", "tidying the models")
    patch = "*** Begin Patch\n*** Add File: src/db.py\n+DB = 'postgresql'\n*** End Patch\n"
    with ScriptedResponses([{"patch": patch}, {"text": "Done."}]) as model:
        install(project, model, codex_home)
        codex(project, "Write the db module", codex_home, "-s", "workspace-write")
    assert (project / "src" / "db.py").exists(), "a shared lease does not stop the patch"
    after_patch = json.dumps(model.requests[1])
    assert "before this edit" in after_patch, after_patch[-3000:]
    assert "src/db.py: ticket OMN-2 (agent claude" in after_patch
    assert "holds a shared lease on it (src/db.py)" in after_patch and "lease reason: tidying the models" in after_patch
    assert "src/db.py" in resumed(project)["session"]["files_touched"], "the post-edit hook recorded the touch"
