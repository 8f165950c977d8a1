"""Baton trusts only its own user (baton.trust), as ssh's StrictModes does: a data home, a
socket or a configuration file that another user owns or may write is
refused (one line naming it, exit 3) before anything is read from it or sent to it; and the
resident leaves when anything it preloaded is upgraded.

The tests run as root, so "another user" is nobody (65534): its processes are started with
setpriv, or by a root process that drops to it."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

from baton.trust import file_refusal, home_refusal
from tests.test_resident import BATON, CLIENT, NOT_FORWARDED, processes_of, start_resident, through_resident
from tests.timing import wait_for

OTHER = 65534
SETPRIV = shutil.which("setpriv")
# Another user cannot run the interpreter of the virtualenv (under /root): the system's.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another uid's files and processes need root to make")
another_user = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None or SYSTEM_PYTHON is None,
                                  reason="needs root, setpriv (util-linux) and /usr/bin/python3 to run as nobody")
SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
# Listens on argv[1] and appends every byte it receives to argv[2]. With argv[3] ("drop"),
# it binds as root (the socket is root's, 0600) and becomes nobody before listen(): the
# credentials a client reads (SO_PEERCRED) are those of listen()'s caller.
LISTENER = """
import os, socket, sys
path, record = sys.argv[1], sys.argv[2]
drop = sys.argv[3:] == ["drop"]
out = open(record, "ab", buffering=0)
os.umask(0o177 if drop else 0)
server = socket.socket(socket.AF_UNIX)
server.bind(path)
if drop:
    os.setgroups([])
    os.setgid(%d)
    os.setuid(%d)
server.listen(8)
os.rename(record, record + ".ready")
while True:
    conn, _ = server.accept()
    conn.settimeout(5)
    try:
        while chunk := conn.recv(65536):
            out.write(chunk)
    except OSError:
        pass
    conn.close()
""" % (OTHER, OTHER)


@pytest.fixture
def top(monkeypatch):
    """A short directory (a socket's path holds 107 bytes) that nobody may enter, for the
    data homes of a test; the resident on, as it is for users."""
    path = Path(tempfile.mkdtemp(prefix="btr-"))
    path.chmod(0o755)
    for name in ("BATON_TASK_ID", "BATON_SESSION_ID", "BATON_DATABASE_URL", "BATON_CONFIG", "BATON_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "2")
    monkeypatch.setenv("BATON_BACKGROUND_DELIVERY", "off")
    monkeypatch.setenv("BATON_BACKGROUND_INDEXING", "off")
    monkeypatch.setenv("BATON_RESIDENT", "on")
    started: list[subprocess.Popen] = []
    yield path, started
    for process in started:
        process.kill()
        process.wait(30)
    for home in path.iterdir():
        for pid in processes_of(home):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda home=home: not processes_of(home), 30, "exit of every resident process")
    shutil.rmtree(path, ignore_errors=True)


def listen(started: list, socket_path: Path, record: Path, *, drop: bool = False) -> None:
    """A listener on socket_path recording what it receives in record (see LISTENER), in
    a directory of nobody's."""
    record.parent.mkdir()
    os.chown(record.parent, OTHER, OTHER)
    record.touch()
    os.chown(record, OTHER, OTHER)
    if drop:  # root until it listens, then nobody
        command = [sys.executable, "-c", LISTENER, str(socket_path), str(record), "drop"]
    else:
        command = [SETPRIV, f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups", SYSTEM_PYTHON, "-c", LISTENER,
                   str(socket_path), str(record)]
    process = subprocess.Popen(command, cwd="/", stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started.append(process)
    ready = Path(f"{record}.ready")
    wait_for(lambda: ready.exists() or process.poll() is not None, 60, "the listener")
    assert process.poll() is None, process.communicate()
    ready.rename(record)  # the listener holds it open: what it receives lands here still


def victim(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`baton ARGS` as a user runs it: the console script, the resident on, a secret in the environment."""
    return subprocess.run([str(BATON), *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "STRIPE_SECRET_KEY": SECRET, **env})


def refused(result: subprocess.CompletedProcess, path: Path) -> None:
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("baton: refusing ") and str(path) in lines[0], result.stderr


def stored_anywhere(home: Path, text: str) -> list[str]:
    return [str(p) for p in home.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@another_user
def test_a_data_home_another_user_made_gets_nothing(top, worktrees):
    """Issue 22, 3: nobody made the data home (world-writable) and listens on its socket."""
    path, started = top
    home = path / "home"
    home.mkdir()
    os.chown(home, OTHER, OTHER)
    home.chmod(0o777)
    record = path / "listener" / "received"
    listen(started, home / "resident.sock", record)
    main, _ = worktrees
    result = victim(main, "decide", "ship it", BATON_HOME=str(home))
    refused(result, home)
    assert "owned by uid 65534" in result.stderr and "BATON_HOME" in result.stderr
    assert record.stat().st_size == 0, "the listener must receive nothing"
    assert sorted(p.name for p in home.iterdir()) == ["resident.sock"], "nothing is written there either"
    # Ours, but writable by others: refused too, with the fix.
    os.chown(home, 0, 0)
    result = victim(main, "decide", "ship it", BATON_HOME=str(home))
    refused(result, home)
    assert f"chmod 700 {home}" in result.stderr
    assert record.stat().st_size == 0


@as_root
def test_a_listener_of_another_user_behind_our_own_socket_gets_nothing(top, worktrees):
    """The socket is ours (0600, in our 0700 data home) but another user listens on it:
    the client reads the listener's uid from the kernel before it sends a byte."""
    path, started = top
    home = path / "home"
    home.mkdir(mode=0o700)
    record = path / "listener" / "received"
    listen(started, home / "resident.sock", record, drop=True)
    assert (home / "resident.sock").stat().st_uid == 0
    main, _ = worktrees
    result = victim(main, "decide", "ship it", BATON_HOME=str(home))
    refused(result, home / "resident.sock")
    assert "runs as uid 65534" in result.stderr
    assert record.stat().st_size == 0, "the listener must receive nothing"
    # A hook is refused the same, and exits 0 as every failing hook does: the agent goes on.
    hook = victim(main, "hook", "post-tool-use", BATON_HOME=str(home))
    assert hook.returncode == 0 and "runs as uid 65534" in hook.stderr
    assert record.stat().st_size == 0
    # A socket file of another user's is refused before connecting at all.
    os.chown(home / "resident.sock", OTHER, OTHER)
    result = victim(main, "decide", "ship it", BATON_HOME=str(home))
    refused(result, home / "resident.sock")
    assert "owned by uid 65534" in result.stderr
    assert record.stat().st_size == 0


@pytest.mark.parametrize("planted", ["another user's", "writable by others"])
def test_a_planted_rules_file_decides_nothing(top, worktrees, planted):
    """Issue 22, 4: an empty rule set in place of the rules cache Baton once kept in the data
    home. The rules are Baton's own code now (baton/secret_rules.py): nothing in the data
    home decides what is redacted, so the planted file changes nothing."""
    if planted == "another user's" and os.geteuid() != 0:
        pytest.skip("another uid's file needs root to make")
    path, _ = top
    home = path / "home"
    main, _ = worktrees
    env = {"BATON_HOME": str(home)}
    assert victim(main, "bind", "OMN-1", BATON_RESIDENT="off", **env).returncode == 0
    start_resident(home, **env)
    rules = home / "redaction-rules.json"
    rules.write_text(json.dumps({"format": 1, "rules": []}))
    if planted == "another user's":
        os.chown(rules, OTHER, OTHER)
    else:
        rules.chmod(0o666)
    result = victim(main, "decide", f"deploy with {AWS_KEY}", **env)
    assert result.returncode == 0, result.stderr
    assert not stored_anywhere(home, AWS_KEY)


@pytest.mark.parametrize("where, planted", [("BATON_CONFIG", "another user's"), ("BATON_CONFIG", "writable"),
                                                ("data home", "another user's"), ("data home", "writable")])
def test_a_planted_configuration_is_refused(top, worktrees, where, planted):
    """A baton.toml that keeps every secret ([redaction] allow), another user's or
    writable by others, wherever it is: refused before it is read."""
    if planted == "another user's" and os.geteuid() != 0:
        pytest.skip("another uid's file needs root to make")
    path, _ = top
    home = path / "home"
    main, _ = worktrees
    env = {"BATON_HOME": str(home)}
    assert victim(main, "bind", "OMN-1", BATON_RESIDENT="off", **env).returncode == 0
    config = home / "baton.toml" if where == "data home" else path / "shared" / "baton.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text('[redaction]\nallow = [".*"]\n')
    if where == "BATON_CONFIG":
        env["BATON_CONFIG"] = str(config)
    if planted == "another user's":
        os.chown(config, OTHER, OTHER)
    else:
        config.chmod(0o666)
    result = victim(main, "decide", f"deploy with {AWS_KEY}", **env)
    refused(result, config)
    assert not stored_anywhere(home, AWS_KEY)
    os.chown(config, os.geteuid(), os.getegid())
    config.chmod(0o644)  # the user's (or root's) and read-only to others: a configuration may be
    assert victim(main, "list", **env).returncode == 0


def test_what_the_checks_accept_and_refuse(tmp_path):
    ours = tmp_path / "home"
    assert home_refusal(ours) is None  # missing: created 700 on first write
    ours.mkdir(mode=0o755)
    assert home_refusal(ours) is None  # readable by others: a warning elsewhere, not a refusal
    sticky = tmp_path / "shared"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp
    assert home_refusal(sticky / "home") is None
    (sticky / "home").mkdir(mode=0o700)
    assert home_refusal(sticky / "home") is None
    open_above = tmp_path / "open"
    open_above.mkdir()
    open_above.chmod(0o777)  # anyone may rename what it holds
    refusal = home_refusal(open_above / "home")
    assert refusal is not None and f"{open_above} is writable by group or others" in refusal
    link = tmp_path / "link"
    link.symlink_to(ours)
    assert home_refusal(link) is None
    found = os.stat(ours)
    assert file_refusal(ours, found) is None
    ours.chmod(0o775)
    assert "writable by group or others (mode 775)" in (home_refusal(ours) or "")
    assert "chmod go-w" in (file_refusal(ours, os.stat(ours)) or "")


@as_root
def test_a_link_another_user_owns_is_refused(tmp_path):
    ours = tmp_path / "home"
    ours.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(ours)
    os.lchown(link, OTHER, OTHER)  # its owner may point it anywhere
    assert "the link" in (home_refusal(link) or "")


@as_root
def test_a_database_or_its_log_of_another_user_is_refused(tmp_path):
    from baton.errors import Untrusted
    from baton.sqlite import connect

    database, migrations = tmp_path / "x.db", ["CREATE TABLE t (x INTEGER)"]
    connect(database, migrations, timeout=1).close()
    for planted in (database, Path(f"{database}-wal")):
        planted.touch()
        os.chown(planted, OTHER, OTHER)
        with pytest.raises(Untrusted, match=re.escape(f"refusing {planted}: owned by uid {OTHER}")):
            connect(database, migrations, timeout=1)
        os.chown(planted, 0, 0)
    connect(database, migrations, timeout=1).close()


def test_doctor_says_whose_the_data_home_is(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    code, out, _ = cli(main, "doctor", "--json")
    (row,) = [r for r in json.loads(out) if r["store"] == "data home"]
    assert code == 0 and row["state"] == "ok" and row["location"] == str(home)
    assert row["backend"] == "owned by you, mode 700, at"


@pytest.mark.parametrize("distribution", ["pydantic", "cryptography"])
def test_an_upgraded_dependency_sends_the_resident_away(top, worktrees, distribution, monkeypatch):
    """Issue 22, 5: a distribution the resident imported (pydantic), or one Baton requires
    that a command may import later (cryptography): its metadata changed (an upgrade
    rewrites it), the resident refuses, leaves, and the next command is served by a new one.
    (The redaction rules are Baton's own source, watched as every Baton file is.)

    The upgrade happens to a copy of the distribution's metadata that this test's processes
    find first on PYTHONPATH: every resident watches the shared environment's metadata, so
    touching that would send away the residents of tests running beside this one."""
    path, _ = top
    home = path / "home"
    main, _ = worktrees
    shadow = path / "site"
    (listed,) = [f for f in metadata.distribution(distribution).files or () if f.name == "METADATA"]
    installed = Path(str(listed.locate())).parent
    upgraded = shadow / installed.name / "METADATA"
    shutil.copytree(installed, upgraded.parent)
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    monkeypatch.setenv("BATON_HOME", str(home))  # for through_resident and the console script
    first = start_resident(home)
    assert through_resident(main, "bind", "OMN-1")[0] == 0
    assert first.poll() is None
    before = upgraded.stat()
    os.utime(upgraded, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    result = subprocess.run([sys.executable, "-c", CLIENT, "touch", "src/a.py"], cwd=main, capture_output=True)
    assert result.returncode == NOT_FORWARDED, "a resident whose dependencies changed must not answer"
    assert first.wait(30) == 0, "and it leaves"
    # A command that met a stale resident runs itself and starts a fresh one.
    assert subprocess.run([str(BATON), "touch", "src/b.py"], cwd=main, capture_output=True,
                          timeout=120).returncode == 0
    (second,) = wait_for(lambda: processes_of(home), 120, "a new resident")
    wait_for(lambda: (home / "resident.sock").exists(), 120, "its socket")
    assert second != first.pid
    assert through_resident(main, "touch", "src/c.py")[0] == 0
    assert processes_of(home) == [second], "served by the new resident, which stays"
