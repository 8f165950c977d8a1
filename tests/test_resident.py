"""The resident process (baton.skills.frontends.resident) answers as a fresh `baton` would,
and a command never depends on it: absent, stale, stopped or refused, the command runs itself."""

import _socket
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from tests.test_claude_hooks import payload
from tests.timing import wait_for
from tests.workspace import ROOT, make_repo

BATON = Path(sys.executable).with_name("baton")
# A client that only asks the resident: exit 99 (and nothing run) when it did not answer. It
# waits up to 10 s to be accepted (a shared machine can be slower than the 50 ms a command
# waits), except where the test is the bound itself (WEDGED_CLIENT).
WEDGED_CLIENT = """
import sys
from baton.skills.runtime import resident_client
code = resident_client.forwarded(["baton", *sys.argv[1:]])
sys.exit(99 if code is None else code)
"""
CLIENT = WEDGED_CLIENT.replace("code =", "resident_client.CONNECT_WAIT = 10.0\ncode =")
NOT_FORWARDED = 99



def private_baton(into: Path) -> Path:
    """A copy of Baton's packages laid out as installed, for PYTHONPATH (found before the
    editable install): a test that changes a source file changes its own copy, and residents
    serving tests beside it, which watch the shared sources, stay."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, source in mapping.items():
        shutil.copytree(ROOT / source, into.joinpath(*package.split(".")),
                        ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return into


def processes_of(home: Path, word: bytes = b"resident") -> list[int]:
    """The resident processes (and their children) serving home, found in /proc; word: what
    else their command line holds."""
    marker = f"BATON_HOME={home}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if word in cmdline and marker in environ and state != "Z":
            found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


@pytest.fixture
def home(monkeypatch):
    """A data home with a short path (a socket's path holds 107 bytes), the resident on."""
    top = Path(tempfile.mkdtemp(prefix="bres-"))
    path = top / "home"
    monkeypatch.setenv("BATON_HOME", str(path))
    for name in ("BATON_TASK_ID", "BATON_SESSION_ID", "BATON_DATABASE_URL", "BATON_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "2")
    monkeypatch.setenv("BATON_BACKGROUND_DELIVERY", "off")
    monkeypatch.setenv("BATON_BACKGROUND_INDEXING", "off")
    monkeypatch.setenv("BATON_RESIDENT", "on")
    yield path
    for pid in processes_of(path):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not processes_of(path), 30, "exit of every resident process")
    shutil.rmtree(top, ignore_errors=True)


def start_resident(home: Path, **env: str) -> subprocess.Popen:
    process = subprocess.Popen([str(BATON), "resident"], env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (home / "resident.sock").exists() or process.poll() is not None, 120, "resident socket")
    assert process.poll() is None, process.communicate()
    return process


@pytest.fixture
def resident(home):
    process = start_resident(home)
    yield process
    process.terminate()
    assert process.wait(30) == 0
    assert not (home / "resident.sock").exists()


def through_resident(cwd: Path, *args: str, stdin: str | None = None, **env: str) -> tuple[int, str, str]:
    result = subprocess.run([sys.executable, "-c", CLIENT, *args], cwd=cwd, input=stdin, capture_output=True,
                            text=True, env={**os.environ, **env}, timeout=120)
    assert result.returncode != NOT_FORWARDED, f"the resident did not answer `baton {' '.join(args)}`"
    return result.returncode, result.stdout, result.stderr


def direct(cwd: Path, *args: str, stdin: str | None = None, **env: str) -> tuple[int, str, str]:
    result = subprocess.run([str(BATON), *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                            env={**os.environ, "BATON_RESIDENT": "off", **env}, timeout=120)
    return result.returncode, result.stdout, result.stderr


def normalised(text: str, root: Path, home: Path) -> str:
    """Output with what differs between two runs of the same commands replaced: the
    repository and data home, ids and times."""
    text = text.replace(str(root), "ROOT").replace(str(home), "HOME")
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{8,64}\b", "ID", text)
    return re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|\+00:00| UTC)?", "TIME", text)


SCENARIO = [
    ("bind", "OMN-2"),
    ("decide", "Store payment intents in PostgreSQL so they survive restarts"),
    ("bind", "OMN-1"),
    ("touch", "src/cart.py", "src/db.py"),
    ("decide", "Keep carts in PostgreSQL", "--context", "carts must survive restarts"),
    ("update", "--phase", "implementing", "--next", "write the migration"),
    ("index",),  # the model and the index kept by the resident, checked against the store
    ("resume", "OMN-1", "--json"),
    ("resume", "OMN-1"),
    ("list",),
    ("list", "--json"),
    ("touch",),  # bad input: exit 2
    ("bind", "not a ticket!"),  # bad input: exit 2
    ("nonsense",),  # argparse: exit 2
]


def test_the_resident_answers_as_a_fresh_process(home, resident, tmp_path):
    """The same outputs and exit statuses for the same commands, direct and through the
    resident, on two data homes; and a store that does not answer is exit 3 in both."""
    direct_home = tmp_path / "direct-home"
    repos = {"direct": make_repo(tmp_path / "direct" / "shop", "git@github.com:acme/shop.git"),
             "resident": make_repo(tmp_path / "resident" / "shop", "git@github.com:acme/shop.git")}
    for args in SCENARIO:
        got = through_resident(repos["resident"], *args)
        expected = direct(repos["direct"], *args, BATON_HOME=str(direct_home))
        assert got[0] == expected[0], (args, got, expected)
        for ours, theirs in zip(got[1:], expected[1:], strict=True):
            assert normalised(ours, repos["resident"], home) == normalised(theirs, repos["direct"], direct_home), args
    assert [through_resident(repos["resident"], *args)[0] for args in SCENARIO[-3:]] == [2, 2, 2]
    resumed = json.loads(through_resident(repos["resident"], "resume", "OMN-1", "--json")[1])
    assert [d["task_id"] for d in resumed["related_decisions"]] == ["OMN-2"] and resumed["stores"]["recall"] == "ok"
    down = {"BATON_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    got = through_resident(repos["resident"], "resume", "OMN-1", "--json", **down)
    expected = direct(repos["direct"], "resume", "OMN-1", "--json", BATON_HOME=str(direct_home), **down)
    assert got[0] == expected[0] == 3, (got, expected)
    assert json.loads(got[1])["status"] == json.loads(expected[1])["status"] == "unavailable"
    assert normalised(got[2], repos["resident"], home) == normalised(expected[2], repos["direct"], direct_home)


def test_a_hook_reads_its_payload_from_the_clients_standard_input(home, resident, worktrees):
    main, second = worktrees
    assert direct(second, "bind", "OMN-2")[0] == 0
    assert direct(second, "touch", "src/db.py")[0] == 0
    assert direct(main, "bind", "OMN-1")[0] == 0
    event = json.dumps(payload("post_tool_use_edit", main, file=main / "src" / "db.py"))
    code, out, err = through_resident(main, "hook", "post-tool-use", stdin=event)
    assert (code, err) == (0, "")
    told = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "OMN-2" in told and "src/db.py" in told
    resumed = json.loads(through_resident(main, "resume", "OMN-1", "--json")[1])
    assert "src/db.py" in resumed["session"]["files_touched"]


def test_a_killed_client_ends_its_command(home, resident, worktrees):
    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    # The hook waits for its payload on standard input, which this test holds open.
    client = subprocess.Popen([sys.executable, "-c", CLIENT, "hook", "post-tool-use"], cwd=main,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    (child,) = wait_for(lambda: children_of(resident.pid), 30, "the command's process")
    client.kill()
    client.wait()
    wait_for(lambda: child not in children_of(resident.pid), 10, "the end of the command's process")
    client.stdin.close()
    assert resident.poll() is None, "the resident serves on"
    assert through_resident(main, "resume", "OMN-1", "--json")[0] == 0


def test_a_stale_resident_refuses_and_the_command_runs_itself(home, worktrees, monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("PYTHONPATH", str(private_baton(home.parent / "site")))
    resident = start_resident(home)
    assert through_resident(main, "bind", "OMN-1")[0] == 0
    source = home.parent / "site" / "baton" / "skills" / "services" / "migrate.py"
    before = source.stat()
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    result = subprocess.run([sys.executable, "-c", CLIENT, "touch", "src/a.py"], cwd=main, capture_output=True)
    assert result.returncode == NOT_FORWARDED, "a resident whose sources changed must not answer"
    assert resident.wait(30) == 0, "and it leaves"
    assert direct(main, "touch", "src/a.py")[0] == 0
    assert "src/a.py" in json.loads(direct(main, "resume", "OMN-1", "--json")[1])["session"]["files_touched"]


def test_a_stopped_resident_costs_one_bounded_wait_and_runs_nothing(home, resident, worktrees):
    main, _ = worktrees
    assert through_resident(main, "bind", "OMN-1")[0] == 0
    os.kill(resident.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-c", WEDGED_CLIENT, "touch", "src/wedged.py"], cwd=main,
                                capture_output=True, timeout=60)
        waited = time.monotonic() - started
        assert result.returncode == NOT_FORWARDED
        plain = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        floor = time.monotonic() - plain
        # The interpreter's start plus the connect wait (50 ms), with room for a busy machine.
        assert waited < floor + 0.05 + 1.0, (waited, floor)
        assert direct(main, "touch", "src/direct.py")[0] == 0
    finally:
        os.kill(resident.pid, signal.SIGCONT)
    # The request it received while stopped was given up by its client: it must not run.
    files = json.loads(through_resident(main, "resume", "OMN-1", "--json")[1])["session"]["files_touched"]
    assert "src/direct.py" in files and "src/wedged.py" not in files


def test_only_the_user_reaches_the_socket(home, resident):
    from baton.skills.runtime.resident_client import peer_uid

    assert (home / "resident.sock").stat().st_mode & 0o777 == 0o600
    assert home.stat().st_mode & 0o777 == 0o700
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        assert peer_uid(ours) == os.getuid()
    if os.geteuid() != 0:
        pytest.skip("another uid needs root to test: the mode and the peer check are tested above")
    # Let another user reach the socket, so that only the peer check stands in the way.
    os.chmod(home.parent, 0o711)
    os.chmod(home, 0o711)
    os.chmod(home / "resident.sock", 0o666)
    pid = os.fork()
    if pid == 0:  # the other user: a client as far as the resident lets it go
        code = 1
        try:
            from baton.skills.runtime import resident_client

            os.setgid(65534)
            os.setuid(65534)
            os.chdir("/")
            sys.stdin, sys.stdout, sys.stderr = (open(os.devnull, mode) for mode in "rww")  # noqa: SIM115
            request = resident_client._request(["baton", "list"])  # sent without the client's own peer check
            with socket.socket(socket.AF_UNIX) as conn:  # the mode lets it connect
                conn.settimeout(10.0)
                conn.connect(str(home / "resident.sock"))
                conn.sendall(len(request).to_bytes(4, "big") + request)
                code = 0 if conn.recv(1) == b"" else 2
        except ConnectionError:
            code = 0  # refused: closed before or while the request was sent
        except BaseException:  # noqa: BLE001 -- any other failure is the test's
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the resident must close another user's connection unanswered"
    assert resident.poll() is None


def test_the_resident_leaves_when_idle(home, worktrees):
    main, _ = worktrees
    process = start_resident(home, BATON_RESIDENT_IDLE="1")
    assert through_resident(main, "bind", "OMN-1")[0] == 0
    assert process.wait(30) == 0
    assert not (home / "resident.sock").exists()
    assert direct(main, "resume", "OMN-1", "--json")[0] == 0


def test_a_command_that_found_none_starts_one_and_only_one(home, worktrees):
    main, _ = worktrees
    first = subprocess.run([str(BATON), "bind", "OMN-1"], cwd=main, capture_output=True, text=True, timeout=120)
    # It started one and did not wait for it: the preload, at the lowest priority, takes seconds.
    assert processes_of(home) and not (home / "resident.sock").exists()
    second = subprocess.run([str(BATON), "touch", "src/a.py"], cwd=main, capture_output=True, text=True, timeout=120)
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    wait_for(lambda: (home / "resident.sock").exists(), 120, "a resident started on demand")
    assert len(processes_of(home)) == 1
    assert through_resident(main, "touch", "src/b.py")[0] == 0
    off = subprocess.run([str(BATON), "touch", "src/c.py"], cwd=main, capture_output=True, text=True,
                         env={**os.environ, "BATON_RESIDENT": "off"}, timeout=120)
    assert off.returncode == 0 and len(processes_of(home)) == 1


def test_a_resident_that_died_is_replaced_by_the_next_command(home, worktrees):
    main, _ = worktrees
    assert subprocess.run([str(BATON), "bind", "OMN-1"], cwd=main, capture_output=True, timeout=120).returncode == 0
    wait_for(lambda: (home / "resident.sock").exists(), 120, "a resident started on demand")
    assert through_resident(main, "touch", "src/a.py")[0] == 0
    (pid,) = processes_of(home)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not processes_of(home), 30, "the end of the resident")
    # Seconds after the last start: the command runs itself and starts a new resident.
    again = subprocess.run([str(BATON), "touch", "src/b.py"], cwd=main, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    wait_for(lambda: [p for p in processes_of(home) if p != pid], 120, "a new resident")
    # Until it listens, the socket is the dead one's: a client is refused and runs nothing.
    wait_for(lambda: subprocess.run([sys.executable, "-c", CLIENT, "touch", "src/c.py"], cwd=main,
                                    capture_output=True, timeout=120).returncode != NOT_FORWARDED,
             120, "the new resident serving")
    assert len(processes_of(home)) == 1


def test_starts_that_keep_failing_back_off(home, worktrees, tmp_path):
    """A resident that dies before it listens is started again by a later command after
    RETRY_FIRST seconds, then after twice that: not by every command, nor a minute later."""
    main, _ = worktrees
    starts = tmp_path / "starts"
    site = tmp_path / "site"
    site.mkdir()
    # Every resident this test's commands start dies at once, noting the record its starter
    # wrote in resident.lock (handed to it as descriptor 3): the start's time, failures before it.
    (site / "sitecustomize.py").write_text(
        "import os\n"
        "if b'baton.skills.frontends.resident' in open('/proc/self/cmdline', 'rb').read().split(b'\\0'):\n"
        f"    open({str(starts)!r}, 'a').write(os.pread(3, 64, 0).decode() + '\\n')\n"
        "    os._exit(1)\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    assert direct(main, "bind", "OMN-1")[0] == 0
    commands = 0

    def started() -> list[float]:
        nonlocal commands
        commands += 1
        result = subprocess.run([str(BATON), "touch", f"src/{commands}.py"], cwd=main, capture_output=True,
                                text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        return starts.read_text().splitlines() if starts.exists() else []

    wait_for(lambda: len(started()) >= 3, 60, "a start again after each backoff")
    from baton.skills.runtime.spawn import retry_wait

    records = [line.split() for line in starts.read_text().splitlines()[:3]]
    (first, _), (second, once), (third, twice) = [(float(at), int(failed)) for at, failed in records]
    assert (once, twice) == (1, 2)
    assert second - first >= retry_wait(1) and third - second >= retry_wait(2), records



def test_long_running_commands_keep_their_own_process(home, resident, worktrees):
    from baton.skills.runtime.resident_client import NOT_FORWARDED as kept

    assert {"serve", "projector", "resident"} <= kept
    main, _ = worktrees
    result = subprocess.run([sys.executable, "-c", CLIENT, "projector", "--once"], cwd=main, capture_output=True)
    assert result.returncode == NOT_FORWARDED


def test_the_resident_serves_an_mcp_session_and_stops_it_when_the_client_goes(home, resident, worktrees):
    """`baton mcp` is forwarded: a child of the resident, with the tools built already,
    answers the session on the client's own streams, to its end."""
    main, _ = worktrees
    killed = subprocess.Popen([sys.executable, "-c", CLIENT, "mcp"], cwd=main, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    wait_for(lambda: len(children_of(resident.pid)) == 1, 30, "the session's child")
    killed.kill()  # as an agent that is killed: the session's child goes with its client
    killed.wait(30)
    wait_for(lambda: not children_of(resident.pid), 30, "the killed client's child to end")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, "mcp"], cwd=main, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write(b"".join(json.dumps(message).encode() + b"\n" for message in messages))
    client.stdin.flush()
    answers = [json.loads(client.stdout.readline()) for _ in range(2)]
    assert answers[0]["result"]["serverInfo"]["name"] == "baton"
    assert "resume_session" in {tool["name"] for tool in answers[1]["result"]["tools"]}
    (child,) = children_of(resident.pid)
    client.stdin.close()
    assert client.wait(30) == 0, client.stderr.read() if client.stderr else ""
    wait_for(lambda: not children_of(resident.pid), 30, "the session's child to end with its input")
    assert child not in children_of(resident.pid)


@pytest.mark.parametrize("name", ["handshake", "modern"])
def test_a_child_of_the_resident_answers_mcp_as_a_fresh_server_does(home, resident, tmp_path, name):
    from tests.test_mcp_wire import conversation, expected

    assert conversation(name, tmp_path, (sys.executable, "-c", CLIENT)) == expected(name)


def test_the_client_reads_the_variables_of_the_settings_rows():
    """The client reads BATON_HOME and BATON_RESIDENT itself (it runs before anything is
    imported): the same variables, and the same data home, as the settings."""
    from baton.skills.runtime import resident_client
    from baton.skills.runtime.settings import SETTINGS, Settings

    rows = {row.name: row.env for row in SETTINGS}
    source = Path(resident_client.__file__).read_text(encoding="utf-8")
    assert rows["home"] == "BATON_HOME" and rows["resident"] == "BATON_RESIDENT"
    assert set(re.findall(r"\"(BATON_[A-Z_]+)\"", source)) == {"BATON_HOME", "BATON_RESIDENT"}
    for environ in ({"BATON_HOME": "~/x"}, {"XDG_DATA_HOME": "/data"}, {"BATON_HOME": "", "XDG_DATA_HOME": "/d"}):
        assert Path(resident_client.data_home(environ)) == Settings.from_env(environ).home
    for value, off in (("off", True), ("0", True), ("No", True), ("on", False), ("", False)):
        assert resident_client.switched_off({"BATON_RESIDENT": value}) is off


def test_the_client_imports_nothing_heavy(home, resident, worktrees):
    """Handing a command over costs the interpreter's start and the standard library's
    socket: no argparse, no JSON, no Baton module beyond the client (tests/test_hot_path.py
    pins what the command itself imports when it runs here)."""
    main, _ = worktrees
    probe = CLIENT + "\nprint(sorted(m for m in sys.modules if m.startswith('baton') or m in HEAVY), file=sys.stderr)"
    probe = probe.replace("sys.exit(99 if code is None else code)\n", "assert code is not None\n")
    heavy = ("argparse", "json", "pydantic", "numpy", "tokenizers", "sqlite3", "baton.skills.frontends.cli")
    result = subprocess.run([sys.executable, "-c", f"HEAVY = {heavy!r}\n" + probe, "touch", "src/a.py"], cwd=main,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = result.stderr.strip().splitlines()[-1]
    assert loaded == str(["baton", "baton.skills", "baton.skills.runtime", "baton.skills.runtime.resident_client",
                          "baton.trust"])


def test_a_hook_names_the_agent_that_ran_baton(home, resident, worktrees):
    """The heartbeat names the hook's parent process, the agent: through the resident too, it
    is the client's parent (here this test), not the resident."""
    from baton.skills.runtime.agent_sessions import local_heartbeats
    from baton.skills.runtime.settings import Settings

    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    event = json.dumps(payload("user_prompt_submit", main))
    code, _, err = through_resident(main, "hook", "user-prompt-submit", stdin=event)
    assert (code, err) == (0, "")
    assert [beat.pid for beat in local_heartbeats(Settings.from_env())] == [os.getpid()]


def test_a_command_killed_by_a_signal_exits_as_a_killed_process_would(home, resident, worktrees):
    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    client = subprocess.Popen([sys.executable, "-c", CLIENT, "hook", "post-tool-use"], cwd=main,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    (child,) = wait_for(lambda: children_of(resident.pid), 30, "the command's process")
    os.kill(child, signal.SIGKILL)
    assert client.wait(30) == 128 + signal.SIGKILL
    client.stdin.close()
    client.stdout.close()
    client.stderr.close()
    assert resident.poll() is None


def test_the_resident_leaves_when_its_socket_is_gone(home, worktrees):
    """A data home removed under it (a test's, a benchmark's): no resident waits out its idle time."""
    main, _ = worktrees
    process = start_resident(home)
    assert through_resident(main, "bind", "OMN-1")[0] == 0
    (home / "resident.sock").unlink()
    assert process.wait(30) == 0


# A resident's preload, then one hook run as its child runs it (resident.run_child, here in
# this process: the descriptors and the connection are this script's own). Prints what the
# child left of the process's functions and the cli module, and the Baton modules loaded.
CHILD = """
import json, os, socket, sys
from baton.skills.frontends import cli, resident
from baton.skills.runtime.settings import Settings

real_getppid, parent = os.getppid, os.getppid()
resident.preload(Settings.from_env())
loaded = sorted(name for name in sys.modules if name.startswith("baton."))
names = dict(vars(cli))
payload, out = sys.argv[1], sys.argv[2]
read, write = os.pipe()
os.write(write, payload.encode())
os.close(write)
streams = [read] + [os.open(out + suffix, os.O_WRONLY | os.O_CREAT) for suffix in (".stdout", ".stderr")]
ours, theirs = socket.socketpair()
agent = os.getpid()  # the client's parent, as a request names it: not this process's parent
request = resident.Request(["baton", "hook", "user-prompt-submit"], os.getcwdb(), 0o022, agent,
                           [("utf-8", "strict", False, False)] * 3, dict(os.environb))
code = resident.run_child(request, streams, theirs)
with open(out, "w") as result:
    json.dump({"code": code, "answered": ours.recv(16).decode(), "agent": agent, "parent": parent,
               "getppid_is_real": os.getppid is real_getppid, "getppid": os.getppid(),
               "cli_unchanged": vars(cli).keys() == names.keys() and all(vars(cli)[k] is v for k, v in names.items()),
               "loaded": loaded, "pathspec": "pathspec.gitignore" in sys.modules}, result)
"""


def preload_and_child(main: Path, tmp_path: Path) -> dict:
    out = tmp_path / "child.json"
    event = json.dumps(payload("user_prompt_submit", main))
    result = subprocess.run([sys.executable, "-c", CHILD, event, str(out)], cwd=main, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def test_the_child_leaves_the_processs_functions_and_modules_as_they_are(home, worktrees, tmp_path):
    """The agent comes from the request, as an invocation: os.getppid stays the process's own,
    and the preload builds what it warms without replacing anything in the cli module."""
    from baton.skills.runtime.agent_sessions import local_heartbeats
    from baton.skills.runtime.settings import Settings

    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    found = preload_and_child(main, tmp_path)
    assert (found["code"], found["answered"]) == (0, "0\n")
    assert found["getppid_is_real"] and found["getppid"] == found["parent"] != found["agent"]
    assert found["cli_unchanged"]
    assert found["pathspec"], "the check before an edit finds pathspec loaded to match a lease"
    assert [beat.pid for beat in local_heartbeats(Settings.from_env())] == [found["agent"]]


def test_the_preload_is_every_module_of_the_installed_packages_but_those_inside_a_layer(home, worktrees, tmp_path):
    """Derived from the packages, not listed: a module added to a store package or a layer is
    loaded ahead too. The dashboard's package (inside a layer) runs in `baton serve`'s own process."""
    import tomllib

    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = pyproject["package-dir"]
    layers = {layer for contract in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"] if contract["id"] == "skills-layers" for layer in contract["layers"]}
    expected = set()
    for package in pyproject["packages"]:
        if package.rpartition(".")[0] in layers:
            continue  # a package inside a layer
        top = max((name for name in folders if package == name or package.startswith(f"{name}.")), key=len)
        folder = ROOT / folders[top] / package.removeprefix(top).strip(".").replace(".", "/")
        expected |= {f"{package}.{path.stem}" for path in folder.glob("*.py") if path.stem != "__init__"}
    loaded = set(preload_and_child(main, tmp_path)["loaded"])
    assert sorted(expected - loaded) == []
    assert not [name for name in loaded if name.startswith("baton.skills.frontends.web")]


def resident_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("resident ")]
    return line.split(None, 1)[1]


@pytest.mark.in_process  # takes os.pidfd_open away in the test's own process
def test_doctor_says_whether_the_resident_serves_and_why_not(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    assert resident_line(cli(main, "doctor")[1]) == "on"
    monkeypatch.setenv("BATON_RESIDENT", "off")
    assert resident_line(cli(main, "doctor")[1]) == "off: BATON_RESIDENT=off"
    monkeypatch.delenv("BATON_RESIDENT")
    monkeypatch.delattr(os, "pidfd_open")  # as on a system other than Linux
    assert resident_line(cli(main, "doctor")[1]) == ("off: os.pidfd_open missing here (it serves Linux); each "
                                                    "command runs in its own process")
    monkeypatch.delattr(_socket, "SO_PEERCRED")  # what the client reads it from (socket's is a copy)
    assert resident_line(cli(main, "doctor")[1]).startswith("off: os.pidfd_open and socket.SO_PEERCRED missing")


@pytest.mark.in_process  # takes os.pidfd_open away in the test's own process
def test_where_the_system_lacks_what_it_needs_no_resident_starts(home, worktrees, cli, monkeypatch, capsys):
    from baton.skills.frontends import entry, resident

    main, _ = worktrees
    cli(main, "bind", "OMN-1")  # the data home exists: a command would start a resident now
    for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(threads, "1")  # the resident's main() sets them: restored after the test
    monkeypatch.delattr(os, "pidfd_open")
    entry._start_resident()
    assert not (home / "resident.lock").exists() and processes_of(home) == []
    assert resident.main([]) == 2
    assert capsys.readouterr().err == ("baton: the resident process is off: os.pidfd_open missing here (it serves "
                                       "Linux)\n")
    assert not (home / "resident.lock").exists()


PRELOAD_CLIENTS = """
import sys
from baton.skills.frontends import resident
from baton.skills.runtime.settings import Settings

resident.preload(Settings.from_env())
print(sorted(name for name in ("psycopg", "neo4j", "qdrant_client", "confluent_kafka") if name in sys.modules))
"""


@pytest.mark.parametrize("servers, clients", [
    ({}, []),
    ({"BATON_GRAPH_URL": "bolt://127.0.0.1:9", "BATON_QDRANT_URL": "http://127.0.0.1:9"}, ["neo4j", "qdrant_client"]),
    ({"BATON_DATABASE_URL": "postgresql://baton@127.0.0.1:9/baton", "BATON_KAFKA_BOOTSTRAP": "127.0.0.1:9"},
     ["confluent_kafka", "psycopg"]),
])
def test_the_preload_imports_the_client_of_each_server_the_settings_name(home, servers, clients):
    """A command's first use of a server imports its client (qdrant_client alone about 0.6 s):
    the resident imports it ahead, and only the ones the settings name; it connects to none
    (nothing listens on those ports)."""
    result = subprocess.run([sys.executable, "-c", PRELOAD_CLIENTS], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, **servers))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().replace("'", '"')) == clients


IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)
IDLE_IO = 3  # IOPRIO_CLASS_IDLE
LOWEST = (19, os.SCHED_IDLE, IDLE_IO)


def scheduling(pid: int, tid: int | None = None) -> tuple[int, int, int]:
    """(nice, scheduling policy, I/O priority class) of one thread, as the kernel reports them:
    /proc/PID/task/TID/stat fields 19 and 41, and ioprio_get(2)."""
    import ctypes

    stat = Path(f"/proc/{pid}/task/{tid or pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()  # fields[0] is field 3, the state
    ioprio = ctypes.CDLL(None, use_errno=True).syscall(IOPRIO_GET, 1, tid or pid)
    return int(fields[16]), int(fields[38]), ioprio >> 13


def threads_scheduling(pid: int, seen: set) -> None:
    """Add each live thread's scheduling to seen."""
    try:
        tids = [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return
    for tid in tids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            seen.add(scheduling(pid, tid))


@pytest.mark.skipif(IOPRIO_GET is None, reason="ioprio_get's number is known for x86_64 and arm64")
def test_the_resident_starts_at_the_lowest_priority_and_serves_at_the_users(home, worktrees):
    """Its preload (imports, the model, the index) runs on a thread at nice 19, SCHED_IDLE
    and the idle I/O class; the thread that forks the commands' children keeps the user's."""
    users = scheduling(os.getpid())
    process = subprocess.Popen([str(BATON), "resident"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    seen: set = set()

    def started() -> bool:
        threads_scheduling(process.pid, seen)
        return (home / "resident.sock").exists() or process.poll() is not None

    wait_for(started, 120, "resident socket")
    assert process.poll() is None, process.communicate()
    assert LOWEST in seen, seen
    assert scheduling(process.pid) == users
    code, out, _ = through_resident(worktrees[0], "doctor")
    assert code == 0 and "resident" in out
    process.terminate()
    assert process.wait(30) == 0


@pytest.mark.skipif(IOPRIO_GET is None, reason="ioprio_get's number is known for x86_64 and arm64")
def test_a_write_starts_the_indexer_at_the_lowest_priority_after_the_command(home, worktrees, cli, monkeypatch,
                                                                             resident_lane):
    """The indexer a decide starts runs at nice 19, SCHED_IDLE and the idle I/O class from its
    first statement (`python -m baton.processes`) and is told which command to wait for: the
    one that started it. In-process (lane off) it is a fresh `baton index --background`;
    through the resident (lane on) the console script's, which hands it to the resident, and
    the resident's child that indexes, with Baton and the model loaded, lowers itself too."""
    main, _ = worktrees
    monkeypatch.setenv("BATON_BACKGROUND_INDEXING", "on")
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "decision: use PostgreSQL for the queue")[0] == 0
    seen: dict[int, tuple[list[bytes], set]] = {}
    forked: set = set()  # the scheduling of the resident's children

    def lowest_or_gone() -> bool:
        running = processes_of(home, b"index\0--background")
        for pid in running:
            with contextlib.suppress(OSError):
                seen.setdefault(pid, (Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"), set()))
                threads_scheduling(pid, seen[pid][1])
        residents = processes_of(home)
        for pid in residents:
            with contextlib.suppress(OSError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat[stat.rfind(")") + 2:].split()[1]) in residents:  # its parent is a resident
                    threads_scheduling(pid, forked)
        lowest = any(LOWEST in threads for _, threads in seen.values()) and (resident_lane is None or LOWEST in forked)
        return lowest or (bool(seen) and not running)

    wait_for(lowest_or_gone, 60, "the background indexer")
    (argv, threads), = seen.values()
    program = b"baton.skills.frontends.cli" if resident_lane is None else b"baton.skills.frontends.entry"
    assert argv[argv.index(b"-m") + 1:argv.index(b"index")] == [b"baton.processes", program]
    assert int(argv[argv.index(b"--after") + 1]) > 0
    assert LOWEST in threads, threads  # from its first statement: the interpreter's start, before it, is not
    if resident_lane is not None:
        assert LOWEST in forked, forked
    from baton.skills.core.indexing import indexer_running

    wait_for(lambda: not processes_of(home, b"index\0--background") and not indexer_running(home), 60,
             "the indexer's exit")
    assert direct(main, "index")[1].startswith("Indexed 0 decisions (0 were indexed already); 0 wait")


def test_a_program_run_through_baton_processes_starts_at_the_lowest_priority():
    """`python -m baton.processes MODULE ARGS` lowers itself before MODULE is even imported."""
    shown = subprocess.run([sys.executable, "-m", "baton.processes", "timeit", "-n1", "-r1",
                            "import os; print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0))"],
                           capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")[0]
    assert shown == f"19 {os.SCHED_IDLE}"


def test_the_background_indexer_waits_for_the_command_that_started_it(home, worktrees):
    """While the command named by --after runs, nothing is embedded, up to the indexer's bound
    (AFTER_WAIT); then it indexes all the same."""
    from baton.recall.embedded import EmbeddedDecisionIndex
    from baton.skills.core.indexing import AFTER_WAIT

    main, _ = worktrees
    assert direct(main, "bind", "OMN-1")[0] == 0
    assert direct(main, "decide", "decision: use PostgreSQL for the queue")[0] == 0
    command = subprocess.Popen(["sleep", "60"])
    started = time.monotonic()
    indexer = subprocess.Popen([str(BATON), "index", "--background", "--after", str(command.pid)], cwd=main,
                               env={**os.environ, "BATON_RESIDENT": "off"})
    try:
        index = EmbeddedDecisionIndex(home / "recall", timeout=5)
        wait_for(lambda: index.count() == 1, 60, "the decision indexed")
        assert time.monotonic() - started >= AFTER_WAIT
        assert command.poll() is None
        index.close()
    finally:
        command.kill()
        command.wait()
        assert indexer.wait(60) == 0
