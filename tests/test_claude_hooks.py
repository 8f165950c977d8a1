"""Claude Code's hooks, fed the payloads Claude Code documents (tests/fixtures/claude_hooks)."""

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests.workspace import git, make_repo, two_agents

FIXTURES = Path(__file__).parent / "fixtures" / "claude_hooks"
FILE_FIELDS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}


def payload(name: str, cwd: Path, *, file: Path | None = None, session: str = "abc123") -> dict:
    """A documented example with this test's directory, file and session in it."""
    event = json.loads((FIXTURES / f"{name}.json").read_text())
    event["cwd"], event["session_id"] = str(cwd), session
    if file is not None:
        event["tool_input"][FILE_FIELDS[event["tool_name"]]] = str(file)
        if "filePath" in event["tool_response"]:
            event["tool_response"]["filePath"] = str(file)
    return event


def hook(name: str, event: dict | str, capsys) -> tuple[int, dict | None, str]:
    """Run `baton hook name` in-process, or in lane `on` through the resident (tests/lanes.py):
    (exit status, parsed stdout or None, stderr)."""
    from baton.skills.frontends.hooks import run_hook
    from tests import lanes

    body = event if isinstance(event, str) else json.dumps(event)
    if lanes.current is not None:
        done = lanes.current.run(Path.cwd(), ["hook", name], stdin=body)
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr
    out = io.StringIO()
    code = run_hook(name, io.StringIO(body), out)
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else None, capsys.readouterr().err


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch) -> Path:
    """A runtime directory of this test's own, where the hooks mark what they told."""
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    return path


def session_of(task_id: str):
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        return stores.registry.get(task_id).value
    finally:
        stores.close()


def event_count(task_id: str) -> int:
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        return len(stores.registry.events(task_id).value)
    finally:
        stores.close()


def told(context: dict, event: str) -> str:
    assert context["hookSpecificOutput"]["hookEventName"] == event
    return context["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("fixture, relative", [
    ("post_tool_use_write", "src/new.py"),
    ("post_tool_use_edit", "src/cart.py"),
    ("post_tool_use_multiedit", "src/db.py"),
    ("post_tool_use_notebookedit", "notebooks/explore.ipynb"),
])
def test_each_file_tool_records_the_touch(home, worktrees, cli, capsys, fixture, relative):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    code, out, err = hook("post-tool-use", payload(fixture, main, file=main / relative), capsys)
    assert (code, out, err) == (0, None, "")
    assert relative in [t.path for t in session_of("OMN-1").files.values()]


def test_codexs_patch_tool_records_every_file_its_patch_names(home, worktrees, cli, capsys):
    """Codex 0.171's PostToolUse for apply_patch, as it sent it (tool_input.command: the patch)."""
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")
    cli(main, "bind", "OMN-1")
    event = json.loads((FIXTURES.parent / "codex_hooks" / "post_tool_use_apply_patch.json").read_text())
    event["cwd"] = str(main)
    code, out, err = hook("post-tool-use", event, capsys)
    assert code == 0 and err == ""
    assert "OMN-2" in told(out, "PostToolUse") and "src/db.py" in told(out, "PostToolUse")
    assert sorted(t.path for t in session_of("OMN-1").files.values()) == [
        "src/cart.py", "src/db.py", "src/gone.py", "src/new_name.py", "src/old_name.py"]


def test_a_new_overlap_is_told_next_to_the_tool_result_once(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")
    cli(main, "bind", "OMN-1")
    code, out, _ = hook("post-tool-use", payload("post_tool_use_edit", main, file=main / "src" / "db.py"), capsys)
    assert code == 0
    text = told(out, "PostToolUse")
    assert "OMN-2" in text and "src/db.py" in text and "Advisory" in text
    code, out, _ = hook("post-tool-use", payload("post_tool_use_write", main, file=main / "src" / "db.py"), capsys)
    assert (code, out) == (0, None), "the overlap was told already"


def test_other_tools_and_unbound_worktrees_record_nothing(home, worktrees, tmp_path, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    assert hook("post-tool-use", payload("post_tool_use_bash", main), capsys) == (0, None, "")
    loose = make_repo(tmp_path / "loose", None)
    assert hook("post-tool-use", payload("post_tool_use_write", loose, file=loose / "a.py"), capsys) == (0, None, "")
    assert hook("session-start", payload("session_start_startup", loose), capsys) == (0, None, "")
    assert hook("user-prompt-submit", payload("user_prompt_submit", loose), capsys) == (0, None, "")
    assert [t.path for t in session_of("OMN-1").files.values()] == []


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]", ""])
def test_bad_input_exits_zero_with_one_line_on_stderr(home, stdin, capsys):
    for name in ("session-start", "post-tool-use", "user-prompt-submit", "stop", "session-end"):
        code, out, err = hook(name, stdin, capsys)
        assert (code, out) == (0, None)
        assert err.startswith(f"baton: hook {name}: ") and err.count("\n") == 1, err


def test_a_broken_binding_exits_zero_with_one_line_and_tells_the_user(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / ".baton" / "active_session.yaml").write_text("task_id: [nonsense\n")
    code, out, err = hook("post-tool-use", payload("post_tool_use_write", main, file=main / "a.py"), capsys)
    assert code == 0 and "binding file" in out["systemMessage"]
    assert err.startswith("baton: hook post-tool-use: binding file") and err.count("\n") == 1


def unusable_home(kind: str, home: Path, monkeypatch) -> None:
    if kind == "data home is a file":
        shutil.rmtree(home)
        home.write_text("not a directory")
    elif kind == "bad baton.toml":
        home.mkdir(parents=True, exist_ok=True)
        (home / "baton.toml").write_text("[stores\n")
    elif kind == "data home others can write":  # refused: another user could have written it
        from tests import lanes

        if lanes.current is not None:
            lanes.current.stop()  # a client rightly speaks to no resident of a refused home
        home.chmod(0o777)
    else:  # the registry refuses every read and write
        (home / "registry.db").write_bytes(b"not a database " * 100)


EVERY_HOOK = [("session-start", "session_start_startup", {}), ("user-prompt-submit", "user_prompt_submit", {}),
              ("post-tool-use", "post_tool_use_write", {"file": "src/a.py"}), ("stop", "stop", {}),
              ("session-end", "session_end", {})]


@pytest.mark.parametrize("kind", ["data home is a file", "bad baton.toml", "registry refuses writes",
                                  "data home others can write"])
def test_when_baton_cannot_record_the_user_is_told_once_per_session(home, worktrees, cli, capsys, monkeypatch, kind):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    unusable_home(kind, home, monkeypatch)
    for session in ("first", "second"):
        messages, errors = [], ""
        for name, fixture, extra in EVERY_HOOK:
            file = main / extra["file"] if "file" in extra else None
            code, out, err = hook(name, payload(fixture, main, file=file, session=session), capsys)
            assert code == 0 and all(line.startswith(f"baton: hook {name}: ") for line in err.splitlines()), err
            errors += err
            if out is not None:
                assert set(out) <= {"systemMessage", "hookSpecificOutput"}, out
                messages += [out["systemMessage"]] if "systemMessage" in out else []
        assert len(messages) == 1 and errors, (session, messages)
        assert messages[0].startswith("Baton is not recording this session: ") and "baton doctor" in messages[0]
    # session-end forgot the mark: the same session, resumed later, is told again
    assert "systemMessage" in hook("session-start", payload("session_start_startup", main, session="first"), capsys)[1]


def test_the_user_is_told_even_where_no_mark_can_be_kept(home, worktrees, cli, capsys, monkeypatch, tmp_path):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    unusable_home("bad baton.toml", home, monkeypatch)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "no-such-dir"))
    for _ in range(2):
        out = hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)[1]
        assert "bad" not in out and "baton.toml" in out["systemMessage"], "told again rather than never"


def test_a_store_down_behind_a_server_is_no_trouble_to_tell(home, worktrees, cli, capsys, monkeypatch):
    """A registry server that is down keeps writes locally: recording goes on."""
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    monkeypatch.setenv("BATON_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "0.5")
    for name, fixture, extra in EVERY_HOOK:
        file = main / extra["file"] if "file" in extra else None
        code, out, err = hook(name, payload(fixture, main, file=file), capsys)
        assert code == 0 and (out is None or "systemMessage" not in out), (name, out, err)


def test_a_fresh_process_exits_zero_on_garbage(home, tmp_path):
    result = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "hook", "stop"], input="{",
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.startswith("baton: hook stop: JSONDecodeError") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("fixture", ["session_start_startup", "session_start_resume"])
def test_session_start_gives_the_bound_ticket_context(home, worktrees, cli, capsys, fixture):
    main = two_agents(worktrees, cli)
    cli(main, "update", "--next", "write the cart migration", "--failed", "sqlite migration")
    code, out, err = hook("session-start", payload(fixture, main), capsys)
    text = told(out, "SessionStart")
    assert code == 0 and err == ""
    assert text.startswith("## Baton: this worktree works on OMN-1\n")
    for expected in ("Next action: write the cart migration", "OMN-2 also touching src/db.py",
                     "sqlite migration", "Keep carts in PostgreSQL", "- src/db.py", "`baton resume OMN-1`"):
        assert expected in text, expected
    assert len(text) < 10_000


def test_session_start_context_is_cut_under_10000_characters_oldest_first(home, worktrees, cli, capsys):
    from baton import clock
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of, resolve_task
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.update import UpdateRequest, update

    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    place = place_of(main, WorktreeLocator())
    stores = Stores(Settings.from_env(), projection=apply_events)
    start = clock.now() - timedelta(hours=2)
    try:
        task = resolve_task(None, place)
        for i in range(80):
            asked = UpdateRequest(failed=(f"failure {i:02d} " + "x" * 200,), done=(f"step {i:02d}",))
            update(stores, task, place, asked, at=start + timedelta(seconds=i))
        update(stores, task, place, UpdateRequest(next_action="the next thing"), at=start + timedelta(seconds=100))
    finally:
        stores.close()
    text = told(hook("session-start", payload("session_start_startup", main), capsys)[1], "SessionStart")
    assert len(text) < 10_000
    assert "Next action: the next thing" in text and "failure 79" in text, "the newest lines stay"
    assert "failure 00" not in text and "step 00" not in text, "the oldest lines go first"
    assert "lines left out to stay under" in text and text.endswith("prints everything.")


def test_prompt_submit_tells_each_signal_once_per_session(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/db.py")
    assert told(hook("session-start", payload("session_start_startup", main, session="s1"), capsys)[1], "SessionStart")
    assert hook("user-prompt-submit", payload("user_prompt_submit", main, session="s1"), capsys) == (0, None, "")
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")
    code, out, _ = hook("user-prompt-submit", payload("user_prompt_submit", main, session="s1"), capsys)
    text = told(out, "UserPromptSubmit")
    assert code == 0 and "conflict_detected from OMN-2" in text and "src/db.py" in text
    assert hook("user-prompt-submit", payload("user_prompt_submit", main, session="s1"), capsys)[1] is None
    start = told(hook("session-start", payload("session_start_resume", main, session="s2"), capsys)[1], "SessionStart")
    assert "OMN-2 also touching src/db.py" in start
    assert hook("user-prompt-submit", payload("user_prompt_submit", main, session="s2"), capsys)[1] is None, \
        "session s2 heard it at its start"


def test_prompt_submit_tells_a_completed_dependency(home, worktrees, cli, capsys):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "update", "--depends-on", "OMN-3")
    cli(second, "bind", "OMN-3")
    assert hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)[1] is None
    cli(second, "end", "OMN-3")
    text = told(hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)[1], "UserPromptSubmit")
    assert "ticket_completed from OMN-3" in text


def test_stop_records_files_changed_outside_the_edit_tools(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / "build.sh").write_text("echo built\n")  # as a Bash command would
    assert hook("stop", payload("stop", main), capsys) == (0, None, "")
    assert "build.sh" in [t.path for t in session_of("OMN-1").files.values()]
    events, before = event_count("OMN-1"), session_of("OMN-1")
    assert hook("stop", payload("stop", main), capsys) == (0, None, "")
    after = session_of("OMN-1")
    assert event_count("OMN-1") == events + 1, "nothing changed since the last stop: only the activity is recorded"
    assert after.files == before.files and after.last_activity > before.last_activity
    git(main, "add", "build.sh")
    git(main, "commit", "-q", "-m", "build")
    (main / "build.sh").unlink()
    assert hook("stop", payload("stop", main), capsys) == (0, None, "")
    assert event_count("OMN-1") == events + 3, "the deletion is a change, recorded as a touch and a checkpoint"
    assert session_of("OMN-1").files["github.com/acme/shop:build.sh"].last_at > after.last_activity


def test_session_end_records_and_forgets_the_agent_session(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    hook("session-start", payload("session_start_startup", main), capsys)
    (main / "notes.md").write_text("x\n")
    assert hook("session-end", payload("session_end", main), capsys) == (0, None, "")
    assert "notes.md" in [t.path for t in session_of("OMN-1").files.values()]
    with sqlite3.connect(home / "agent-sessions.db") as db:
        assert db.execute("SELECT count(*) FROM heard WHERE agent_session = 'abc123'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM swept WHERE agent_session = 'abc123'").fetchone() == (0,)


@pytest.mark.parametrize("configured, writes_at", [("never", None), ("session-end", "session-end"), ("stop", "stop")])
def test_a_handoff_is_written_when_the_configuration_asks(home, worktrees, cli, capsys, monkeypatch, configured,
                                                          writes_at):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "update", "--next", "write the migration")
    if configured != "never":
        (home / "baton.toml").write_text(f'[hooks]\nhandoff = "{configured}"\n')
    latest = main / "docs" / "handoffs" / "LATEST.md"
    assert hook("stop", payload("stop", main), capsys)[0] == 0
    assert latest.exists() == (writes_at == "stop")
    assert hook("session-end", payload("session_end", main), capsys)[0] == 0
    assert latest.exists() == (writes_at is not None)
    if writes_at:
        assert "OMN-1" in latest.read_text() and "write the migration" in latest.read_text()
        start = told(hook("session-start", payload("session_start_resume", main), capsys)[1], "SessionStart")
        assert "Handoff: docs/handoffs/LATEST.md. Its live-state claims were not re-verified" in start
    monkeypatch.setenv("BATON_HOOK_HANDOFF", "sometimes")
    code, _, err = hook("stop", payload("stop", main), capsys)
    assert code == 0 and "BATON_HOOK_HANDOFF or [hooks] handoff must be one of never, stop, session-end" in err


def test_stop_delivers_writes_kept_for_a_server(home, worktrees, cli, capsys, postgres_url, monkeypatch):
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "deliver")  # the bind, kept like every write with a server configured
    assert hook("post-tool-use", payload("post_tool_use_write", main, file=main / "src" / "a.py"), capsys)[0] == 0
    assert (home / "pending-writes.db").exists()
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        assert stores.pending.waiting() == 1, "the hook only kept its touch"
        assert hook("stop", payload("stop", main), capsys) == (0, None, "")
        assert "src/a.py" in [t.path for t in stores.registry.get("OMN-1").value.files.values()]
        # What waits now is the stop's own record of the turn, kept for the background delivery.
        assert [json.loads(e.body)["type"] for e in stores.pending.entries()] == ["activity_recorded"]
    finally:
        stores.close()


PROBE = """
import sys
from baton.skills.frontends.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("pydantic", "numpy", "torch", "qdrant_client", "tokenizers",
                           "confluent_kafka", "neo4j", "psycopg", "mcp") if m in sys.modules)
print("HEAVY", ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def test_post_tool_use_and_a_quiet_prompt_import_nothing_heavy(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/a.py")
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/a.py")  # the overlap exists and was signalled: the hook's edit adds nothing new
    runs = [("post-tool-use", payload("post_tool_use_edit", main, file=main / "src" / "b.py")),
            ("post-tool-use", payload("post_tool_use_edit", main, file=main / "src" / "a.py")),
            ("user-prompt-submit", payload("user_prompt_submit", main)),
            ("user-prompt-submit", payload("user_prompt_submit", main))]
    seen = []
    for name, event in runs:
        result = subprocess.run([sys.executable, "-c", PROBE, "hook", name], input=json.dumps(event), cwd=main,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0
        seen.append(result.stderr.splitlines()[-1])
    assert seen[:2] == ["HEAVY ", "HEAVY "], "the post-tool-use hook stays off pydantic and every store client"
    assert seen[3] == "HEAVY ", "a prompt with nothing new since the last one decodes no signal"


def test_the_installed_commands_run_as_claude_code_runs_them(home, worktrees, cli):
    main = two_agents(worktrees, cli)
    cli(main, "install", "claude")
    settings = json.loads((main / ".claude" / "settings.json").read_text())
    commands = {event: groups[0]["hooks"][0]["command"] for event, groups in settings["hooks"].items()}

    def run(event: str, body: dict) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", commands[event]], input=json.dumps(body), cwd=main, capture_output=True,
                              text=True, timeout=60)

    start = run("SessionStart", payload("session_start_startup", main))
    assert start.returncode == 0 and "OMN-2 also touching src/db.py" in told(json.loads(start.stdout), "SessionStart")
    edit = run("PostToolUse", payload("post_tool_use_write", main, file=main / "src" / "cart.py"))
    assert (edit.returncode, edit.stdout, edit.stderr) == (0, "", "")
    for event, fixture in (("UserPromptSubmit", "user_prompt_submit"), ("Stop", "stop"), ("SessionEnd", "session_end")):
        result = run(event, payload(fixture, main))
        assert (result.returncode, result.stderr) == (0, ""), event
    assert "src/cart.py" in [t.path for t in session_of("OMN-1").files.values()]


def test_the_first_prompt_tells_a_conflict_that_came_before_the_agents_next_edit(home, worktrees, cli, capsys):
    # Claude Code starts unbound; /resume_session binds; no session start ever heard for it.
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    hook("post-tool-use", payload("post_tool_use_write", main, file=main / "shared.py"), capsys)
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "shared.py")
    hook("post-tool-use", payload("post_tool_use_write", main, file=main / "mine.py"), capsys)
    code, out, _ = hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)
    text = told(out, "UserPromptSubmit")
    assert code == 0 and "conflict_detected from OMN-2" in text and "shared.py" in text


def test_the_end_of_turn_sweep_leaves_batons_own_files_out(home, worktrees, cli, capsys):
    main, second = worktrees
    for worktree, task in ((main, "OMN-1"), (second, "OMN-2")):
        cli(worktree, "bind", task)
        cli(worktree, "install", "claude")
        cli(worktree, "handoff")
        (worktree / f"{task}.py").write_text("x\n")
        assert hook("stop", payload("stop", worktree), capsys) == (0, None, "")
        assert [t.path for t in session_of(task).files.values()] == [f"{task}.py"]
    assert "conflict_detected" not in cli(main, "signals", "--task", "OMN-1")[1]


def test_an_ascii_only_stdout_gets_the_overlap_as_json_escapes(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "naïve.py")
    cli(main, "bind", "OMN-1")
    event = payload("post_tool_use_write", main, file=main / "naïve.py")
    result = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "hook", "post-tool-use"],
                            input=json.dumps(event), capture_output=True, text=True, cwd=main, timeout=60,
                            env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert (result.returncode, result.stderr) == (0, "")
    assert "naïve.py" in told(json.loads(result.stdout), "PostToolUse")


class ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_an_overlap_that_could_not_be_written_is_not_marked_told(home, worktrees, cli, capsys):
    from baton.skills.frontends.hooks import run_hook

    main, second = worktrees
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/db.py")
    cli(main, "bind", "OMN-1")
    event = payload("post_tool_use_edit", main, file=main / "src" / "db.py")
    assert run_hook("post-tool-use", io.StringIO(json.dumps(event)), ClosedPipe()) == 0
    err = capsys.readouterr().err
    assert err.startswith("baton: hook post-tool-use: BrokenPipeError") and err.count("\n") == 1
    text = told(hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)[1], "UserPromptSubmit")
    assert "conflict_detected" in text and "src/db.py" in text, "the agent still hears of it at its next prompt"


def test_session_start_names_only_a_handoff_of_the_bound_ticket(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-2")
    assert cli(main, "handoff")[0] == 0
    cli(main, "bind", "OMN-1")
    start = told(hook("session-start", payload("session_start_startup", main), capsys)[1], "SessionStart")
    assert "Handoff:" not in start, "LATEST.md is OMN-2's"
    assert cli(main, "handoff")[0] == 0
    cli(main, "bind", "OMN-2")
    assert cli(main, "handoff")[0] == 0
    cli(main, "bind", "OMN-1")
    start = told(hook("session-start", payload("session_start_resume", main), capsys)[1], "SessionStart")
    ours = [p.name for p in (main / "docs" / "handoffs").glob("*-OMN-1.md")]
    assert len(ours) == 1 and f"Handoff: docs/handoffs/{ours[0]}." in start


def test_each_wrap_up_step_runs_when_an_earlier_one_fails(home, worktrees, cli, capsys, monkeypatch, tmp_path):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    hook("session-start", payload("session_start_startup", main), capsys)
    (home / "baton.toml").write_text('[hooks]\nhandoff = "session-end"\n')
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    code, out, err = hook("session-end", payload("session_end", main), capsys)
    assert code == 0 and out["systemMessage"].startswith("Baton is not recording this session: recording changed files")
    assert "git status: cannot run git" in err, err
    assert "Traceback" not in err and all(line.startswith("baton: ") for line in err.splitlines())
    assert "OMN-1" in (main / "docs" / "handoffs" / "LATEST.md").read_text(), "the handoff is still written"
    with sqlite3.connect(home / "agent-sessions.db") as db:
        assert db.execute("SELECT count(*) FROM heard WHERE agent_session = 'abc123'").fetchone() == (0,), \
            "the agent session is still forgotten"


@pytest.mark.in_process  # the hook's limit is lowered in the test's own process
def test_files_beyond_one_sweep_are_recorded_at_the_next(home, worktrees, cli, capsys, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    monkeypatch.setattr("baton.skills.services.end_of_turn.MAX_SWEEP", 2)
    for name in ("a.py", "b.py", "c.py"):
        (main / name).write_text("x\n")
    assert hook("stop", payload("stop", main), capsys) == (0, None, "")
    assert len(session_of("OMN-1").files) == 2
    assert hook("stop", payload("stop", main), capsys) == (0, None, "")
    assert sorted(t.path for t in session_of("OMN-1").files.values()) == ["a.py", "b.py", "c.py"]


def test_the_stop_hook_leaves_no_trace_in_an_unbound_worktree(home, tmp_path, capsys):
    loose = make_repo(tmp_path / "loose", None)
    (loose / "a.py").write_text("x\n")
    for name, fixture in (("stop", "stop"), ("session-end", "session_end")):
        assert hook(name, payload(fixture, loose), capsys) == (0, None, "")
    assert not (home / "agent-sessions.db").exists()


@pytest.mark.in_process  # the hook's limit is lowered in the test's own process
def test_signals_cut_from_the_session_start_context_are_told_at_the_next_prompt(home, worktrees, cli, capsys,
                                                                                 monkeypatch):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "update", *[arg for n in range(2, 8) for arg in ("--depends-on", f"OMN-{n}")])
    for n in range(2, 8):
        cli(second, "bind", f"OMN-{n}")
        cli(second, "end", f"OMN-{n}")  # ticket_completed signals: OMN-1 depends on them
    monkeypatch.setattr("baton.skills.frontends.briefing.MAX_CONTEXT", 750)
    start = told(hook("session-start", payload("session_start_startup", main), capsys)[1], "SessionStart")
    shown = {n for n in range(2, 8) if f"ticket_completed from OMN-{n}" in start}
    assert 0 < len(shown) < 6 and "lines left out" in start
    text = told(hook("user-prompt-submit", payload("user_prompt_submit", main), capsys)[1], "UserPromptSubmit")
    told_now = {n for n in range(2, 8) if f"ticket_completed from OMN-{n}" in text}
    assert told_now == set(range(2, 8)) - shown


@pytest.mark.parametrize("args", [["hook", "--", "stop"], ["hook", "stop", "--"]])
def test_the_hook_command_through_the_parser_runs_the_hook(home, tmp_path, args):
    result = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", *args], input="{", capture_output=True,
                            text=True, cwd=tmp_path, timeout=60)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.startswith("baton: hook stop: JSONDecodeError") and result.stderr.count("\n") == 1


def test_the_told_mark_lives_in_a_private_directory_of_the_user(monkeypatch, tmp_path):
    import tempfile

    from baton.skills.runtime.agent_sessions import forget_trouble, trouble_first_told

    monkeypatch.delenv("XDG_RUNTIME_DIR")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert trouble_first_told("session/../1") and not trouble_first_told("session/../1")
    (directory,) = (tmp_path / "tmp").iterdir()
    assert directory.name == f"baton-{os.getuid()}" and directory.stat().st_mode & 0o777 == 0o700
    assert [p.name.startswith("cannot-record-") for p in directory.iterdir()] == [True]
    forget_trouble("session/../1")
    assert trouble_first_told("session/../1"), "told again after the session ended"
    directory.chmod(0o777)  # another user could have planted marks: trust none, tell every time
    assert trouble_first_told("session/../1") and trouble_first_told("session/../1")


def test_a_prompt_with_news_pays_no_pydantic(home, worktrees, cli, capsys):
    """The prompt hook has 200 ms: it reads signals and the ticket's scope in their stored form."""
    from tests.test_hot_path import PROBE

    main = two_agents(worktrees, cli)
    cli(main, "touch", "src/cart.py")  # a touch not yet projected: its file is in scope all the same
    result = subprocess.run([sys.executable, "-c", PROBE, "hook", "user-prompt-submit"], cwd=main, capture_output=True,
                            text=True, input=json.dumps(payload("user_prompt_submit", main)), timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    said, heavy = result.stdout.splitlines()
    assert "conflict_detected from OMN-2" in told(json.loads(said), "UserPromptSubmit")
    assert heavy == "HEAVY "


def test_a_path_holding_a_control_character_is_left_out_with_one_line(home, worktrees, cli, capsys):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    for name in ("a\x1b[2J.py", "b\x00.py", "c\x85.py"):
        code, out, err = hook("post-tool-use", payload("post_tool_use_write", main, file=main / name), capsys)
        assert code == 0 and out is None, out
        assert "holds a control character" in err and err.count("\n") == 1, err
    code, out, err = hook("post-tool-use", payload("post_tool_use_write", main, file=main / "ok.py"), capsys)
    assert code == 0 and not err, err
    assert [t.path for t in session_of("OMN-1").files.values()] == ["ok.py"]
