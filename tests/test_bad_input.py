"""Bad input: one-line error, non-zero exit, nothing stored before is lost."""

import hashlib
import json
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from tests.workspace import run_process


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def bound(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/a.py")
    cli(main, "decide", "Use Postgres")
    return main


def stored(cli, main):
    return json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]


@pytest.mark.parametrize("args", [
    ["bind", "bad id"], ["bind", "x" * 65], ["resume", "OMN/1"], ["touch", "--task", "a b", "f.py"],
    ["decide", "   "], ["update"], ["update", "--next", " "], ["update", "--depends-on", "OMN-1"],
    ["resume", "OMN-1", "--list"], ["signals", "--since", "yesterday"], ["recall", ""],
    ["decide", "x" * 4001], ["decide", "ok", "--context", "x" * 4001], ["update", "--done", "x" * 4001],
    ["bind", ".."], ["bind", "."], ["bind", "-"], ["bind", "--", "-x"], ["bind", ":"], ["resume", "-"],
    ["touch", "--task", "..", "f.py"], ["update", "--depends-on", "-"], ["bind", ".hidden"],
    ["decide", "use \x1b[31mred"], ["decide", "ok", "--context", "bell\x07"], ["update", "--next", "\x9bC1"],
    ["touch", "a\x7f.py"], ["recall", "x\x0c"],
])
def test_bad_arguments_exit_2_with_one_line(bound, cli, args):
    before = stored(cli, bound)
    code, out, err = cli(bound, *args)
    assert code == 2
    assert err.startswith("baton: error: ") and err.count("\n") == 1
    assert stored(cli, bound)["files_touched"] == before["files_touched"]
    assert stored(cli, bound)["decisions"] == before["decisions"]


def test_a_ticket_an_earlier_version_took_stays_readable(home, worktrees, cli, monkeypatch, capsys):
    """`.old` was a ticket id before ids were kept from passing for paths: stored, it is
    listed and its writes are kept; named again, it is refused."""
    from baton.ids import _STORED_TASK_ID
    from baton.skills.frontends.cli import main as baton

    main, _ = worktrees
    monkeypatch.chdir(main)
    with monkeypatch.context() as earlier:
        earlier.setattr("baton.ids._TASK_ID", _STORED_TASK_ID)
        assert baton(["bind", ".old"]) == 0 and baton(["decide", "kept from before"]) == 0
    capsys.readouterr()
    code, out, _ = cli(main, "list")
    assert code == 0 and ".old" in out
    code, _, err = cli(main, "resume", ".old")
    assert code == 2 and "invalid task id '.old'" in err


@pytest.mark.in_process  # no process can be given an argument holding a NUL
def test_nul_in_a_path(bound, cli):
    code, _, err = cli(bound, "touch", "a\x00b.py")
    assert code == 2 and "NUL" in err


def test_non_utf8_path_from_the_command_line(bound):
    result = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "touch", b"caf\xe9.py"], cwd=bound,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "not valid UTF-8" in result.stderr


def test_ten_thousand_paths_in_one_call(bound, cli):
    code, _, err = cli(bound, "touch", *[f"f{i}.py" for i in range(10_000)])
    assert code == 2 and "too many paths" in err
    assert stored(cli, bound)["files_touched"] == ["src/a.py"]


def test_a_corrupt_registry_file_is_reported_and_left_untouched(bound, home):
    for name in ("registry.db-wal", "registry.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "registry.db").write_bytes(b"this is not a database" * 100)
    before = digest(home / "registry.db")
    result = run_process(bound, "touch", "src/b.py")
    assert result.returncode == 3 and "session registry unavailable" in result.stderr
    assert result.stderr.count("\n") == 1
    result = run_process(bound, "resume", "OMN-1")
    assert result.returncode == 3
    assert (result.stdout.startswith("Session registry unavailable: ")
            and "Binding task_id locally only." in result.stdout)
    assert digest(home / "registry.db") == before


def test_an_unreadable_data_file(bound, home):
    """A data file that cannot be opened at all (here: a directory in its place)."""
    (home / "graph.db-wal").unlink(missing_ok=True)
    (home / "graph.db-shm").unlink(missing_ok=True)
    (home / "graph.db").unlink()
    (home / "graph.db").mkdir()
    result = run_process(bound, "touch", "src/b.py")
    assert result.returncode == 0 and "conflict graph unavailable" in result.stderr
    resumed = json.loads(run_process(bound, "resume", "OMN-1", "--json").stdout)
    assert resumed["stores"]["graph"].startswith("unavailable: ")
    assert "src/b.py" in resumed["session"]["files_touched"], "the registry still took the touch"


def test_a_garbled_binding_file(bound, cli):
    (bound / ".baton" / "active_session.yaml").write_text("task_id: [unclosed\n")
    code, _, err = cli(bound, "touch", "x.py")
    assert code == 2 and "binding file" in err
    assert cli(bound, "bind", "OMN-1")[0] == 0, "bind rewrites a garbled binding"


def test_bad_settings(bound, cli, monkeypatch):
    monkeypatch.setenv("BATON_STALE_AFTER", "soon")
    code, _, err = cli(bound, "list")
    assert code == 2 and "BATON_STALE_AFTER" in err


def test_a_reader_that_goes_away_is_no_error(bound):
    """`baton list | head -1`: the pipe closes early; no traceback, the status of a closed pipe."""
    reader = subprocess.Popen([sys.executable, "-m", "baton.skills.frontends.cli", "list"], cwd=bound,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader.stdout.close()  # nobody reads: the first write hits a closed pipe
    _, err = reader.communicate(timeout=60)
    assert reader.returncode == 141 and "Traceback" not in err, err


def application_id(path):
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA application_id").fetchone()[0]


@pytest.mark.parametrize("content", ["empty", "foreign", "text"])
def test_a_file_that_is_not_batons_is_unavailable_and_left_untouched(bound, home, content):
    """An empty registry.db, another application's SQLite database or any other file is
    reported unavailable, never reset, migrated or written to."""
    for name in ("registry.db", "registry.db-wal", "registry.db-shm"):
        (home / name).unlink(missing_ok=True)
    path = home / "registry.db"
    if content == "empty":
        path.write_bytes(b"")
    elif content == "foreign":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE notes (body TEXT)")
            conn.execute("INSERT INTO notes VALUES ('mine')")
            conn.commit()
    else:
        path.write_text("shopping list\n")
    before = digest(path)
    for args in (["resume", "OMN-1"], ["list"], ["touch", "src/b.py"], ["decide", "x"]):
        result = run_process(bound, *args)
        assert result.returncode == 3, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
    resumed = run_process(bound, "resume", "OMN-1")
    assert resumed.stdout.startswith("Session registry unavailable: ")
    assert {"empty": "empty file (0 bytes)", "foreign": "without Baton's tables",
            "text": "file is not a database"}[content] in resumed.stdout
    assert digest(path) == before
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("registry.db")) == ["registry.db"]


def test_another_applications_mark_is_refused(bound, home):
    for name in ("registry.db", "registry.db-wal", "registry.db-shm"):
        (home / name).unlink(missing_ok=True)
    with closing(sqlite3.connect(home / "registry.db")) as conn:
        conn.execute("PRAGMA application_id = 1")  # with Baton's tables, still someone else's
        conn.execute("CREATE TABLE events (event_id TEXT)")
        conn.execute("CREATE TABLE sessions (task_id TEXT)")
        conn.execute("PRAGMA user_version = 1")
    result = run_process(bound, "resume", "OMN-1")
    assert result.returncode == 3 and "not a Baton database (application_id 0x1)" in result.stdout


def test_a_file_of_an_earlier_baton_is_recognised_and_marked(bound, home):
    """Files written before Baton marked them carry no application_id: Baton's tables at
    their user_version say whose they are."""
    from baton.sqlite import APPLICATION_ID

    run_process(bound, "list")  # every connection closed: the WAL is folded into the file
    path = home / "registry.db"
    assert application_id(path) == APPLICATION_ID
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA application_id = 0")
    result = run_process(bound, "resume", "OMN-1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["session"]["decisions"][0]["text"] == "Use Postgres"
    assert application_id(path) == APPLICATION_ID


def test_a_new_file_appears_complete_and_marked(home, worktrees, cli):
    """A store file is made under a temporary name and linked when complete: no 0-byte
    file is ever seen by another process, and none is left behind."""
    from baton.sqlite import APPLICATION_ID

    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    for name in ("registry.db", "graph.db", "signals.db"):
        assert application_id(home / name) == APPLICATION_ID, name
    assert not [p.name for p in home.iterdir() if ".new-" in p.name]


@pytest.mark.parametrize("name, value", [
    ("BATON_STORE_TIMEOUT", "inf"), ("BATON_STORE_TIMEOUT", "nan"), ("BATON_STORE_TIMEOUT", "1e308"),
    ("BATON_STORE_TIMEOUT", "-1"), ("BATON_STALE_AFTER", "99999999999d"), ("BATON_STALE_AFTER", "infh"),
    ("BATON_STALE_AFTER", "nan"), ("BATON_RECALL_MIN_SCORE", "nan"), ("BATON_RECALL_MIN_SCORE", "2"),
    ("BATON_PROBE_TIMEOUT", "inf"), ("BATON_PROBE_BUDGET", "nan"), ("BATON_COMMAND_BUDGET", "0"),
    ("BATON_COMMAND_BUDGET", "inf"), ("BATON_RECALL_HORIZON", "soon"),
])
def test_a_setting_out_of_range_is_one_line_and_exit_2(bound, name, value):
    for args in (["list"], ["resume", "OMN-1"], ["touch", "src/c.py"]):
        result = run_process(bound, *args, env={name: value})
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith(f"baton: error: {name}") and result.stderr.count("\n") == 1, result.stderr


def test_a_config_file_that_is_not_utf8(bound, home):
    (home / "baton.toml").write_bytes(b"[stores]\n# caf\xe9\n")
    result = run_process(bound, "list")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "baton.toml: not UTF-8 text" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["a file", "under a file", "a link loop"])
def test_an_unusable_data_home_is_registry_unavailable(bound, tmp_path, kind):
    """Not a bad setting: nothing Baton keeps can be read (exit 3), and the resume says so
    as it says so for any registry that does not answer."""
    unusable = tmp_path / "unusable"
    if kind == "a file":
        unusable.write_text("not a directory\n")
    elif kind == "under a file":
        (tmp_path / "plain").write_text("not a directory\n")
        unusable = tmp_path / "plain" / "baton"
    else:
        unusable.symlink_to(unusable)
    env = {"BATON_HOME": str(unusable)}
    result = run_process(bound, "resume", "OMN-1", env=env)
    assert result.returncode == 3, result.stderr
    assert result.stdout.startswith("Session registry unavailable: ") and "Traceback" not in result.stderr
    answer = json.loads(run_process(bound, "resume", "OMN-1", "--json", env=env).stdout)
    assert answer["status"] == "unavailable" and answer["stores"]["graph"] == "not queried"
    for args in (["bind", "OMN-1"], ["touch", "src/b.py"], ["decide", "x"], ["update", "--next", "y"], ["list"],
                 ["signals"], ["recall", "x"], ["index"], ["handoff"], ["end", "OMN-1"]):
        result = run_process(bound, *args, env=env)
        assert result.returncode == 3, (args, result.stdout, result.stderr)
        assert result.stderr.startswith("baton: ") and result.stderr.count("\n") == 1, (args, result.stderr)
    doctor = run_process(bound, "doctor", env=env)
    assert doctor.returncode == 3 and doctor.stderr == "" and "registry         unavailable: " in doctor.stdout
    if kind != "a link loop":
        assert "is not a directory" in run_process(bound, "list", env=env).stderr
