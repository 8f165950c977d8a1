"""Private files: the data home and `.baton/` are readable by their owner only, whatever
the umask, and a data home that lets others in is pointed out."""

import os
import stat
import subprocess
import sys

from tests.workspace import ROOT


def run(cwd, *args, env):
    return subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_every_file_baton_writes_is_private_under_umask_000(home, worktrees):
    main, _ = worktrees
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    previous = os.umask(0)
    try:
        for args in (("bind", "OMN-1"), ("touch", "src/a.py"), ("decide", "use the ledger"),
                     ("update", "--done", "wrote it", "--check", "true"), ("index",), ("resume", "OMN-1")):
            assert run(main, *args, env=env).returncode == 0, args
    finally:
        os.umask(previous)
    places = [home, main / ".baton"]
    found = [p for place in places for p in [place, *place.rglob("*")]]
    assert len(found) > 10
    exposed = [(str(p), oct(stat.S_IMODE(p.lstat().st_mode))) for p in found
               if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077]
    assert not exposed, exposed


def test_a_data_home_others_can_read_gives_a_warning(home, worktrees):
    main, _ = worktrees
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert run(main, "bind", "OMN-1", env=env).returncode == 0
    home.chmod(0o755)
    listed = run(main, "list", env=env)
    assert listed.returncode == 0 and "readable by other users" in listed.stderr and "chmod 700" in listed.stderr
    home.chmod(0o700)
    assert "readable by other users" not in run(main, "list", env=env).stderr
