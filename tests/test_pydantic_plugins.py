"""pydantic's plugins stay out of a command, with the resident and without it
(baton.pydantic_plugins); the programs a command starts get the environment as the user
gave it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_resident import BATON, processes_of
from tests.timing import wait_for

VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
# A pydantic plugin that says so in a file when pydantic loads it.
PLUGIN = """
import os
from pathlib import Path


class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


Path(os.environ["LOADED_MARKER"]).write_text("loaded")
plugin = Plugin()
"""


@pytest.fixture
def plugin(tmp_path) -> dict[str, str]:
    """The environment of a user who has a pydantic plugin installed (on PYTHONPATH)."""
    site = tmp_path / "site"
    info = site / "baton_test_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "baton_test_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: baton-test-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nbaton_test = baton_test_plugin:plugin\n")
    environ = {k: v for k, v in os.environ.items() if k != VARIABLE}
    return environ | {"PYTHONPATH": str(site), "LOADED_MARKER": str(tmp_path / "loaded")}


@pytest.fixture
def short_home():
    """A data home short enough for a resident's socket; its residents stopped afterwards."""
    top = Path(tempfile.mkdtemp(prefix="bpp-"))
    home = top / "home"
    yield home
    for pid in processes_of(home):
        os.kill(pid, 15)
    wait_for(lambda: not processes_of(home), 30, "exit of every resident process")
    shutil.rmtree(top, ignore_errors=True)


def run(cwd: Path, environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BATON), *args], cwd=cwd, env=environ, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("resident", ["off", "on"])
def test_a_command_loads_no_pydantic_plugin(plugin, short_home, worktrees, resident):
    marker = Path(plugin["LOADED_MARKER"])
    # The plugin is found: any other program that builds a validator loads it.
    subprocess.run([sys.executable, "-c", "from pydantic import TypeAdapter; TypeAdapter(int).validate_python(1)"],
                   env=plugin, check=True, timeout=60)
    assert marker.exists()
    marker.unlink()
    environ = plugin | {"BATON_HOME": str(short_home), "BATON_RESIDENT": resident,
                        "BATON_BACKGROUND_DELIVERY": "off", "BATON_BACKGROUND_INDEXING": "off"}
    main, _ = worktrees
    for args in (["bind", "PLUG-1"], ["decide", "Keep carts in PostgreSQL"], ["resume", "PLUG-1"],
                 ["resume", "PLUG-1"]):  # the second through the resident the first started (lane on)
        done = run(main, environ, *args)
        assert done.returncode == 0, done.stderr
    if resident == "on":
        assert processes_of(short_home), "no resident served the commands"
    assert not marker.exists(), "a Baton command loaded the user's pydantic plugin"


@pytest.mark.parametrize("given", [None, "my_plugin"])
def test_what_a_command_starts_gets_the_environment_as_given(tmp_path, given):
    """git (and the hooks it runs), a setup command and another Baton process: without the
    switch unless the user set it, then with the user's value."""
    probe = f"""
import json, os
from pathlib import Path
from baton.pydantic_plugins import as_given, switch_off
from baton.git import run_git

switch_off()
assert os.environ["{VARIABLE}"] == {given or "__all__"!r}
shown = run_git(Path({str(tmp_path)!r}), "-c", "alias.shown=!env", "shown").stdout.decode()
print(json.dumps([os.environ.get("{VARIABLE}"), as_given().get("{VARIABLE}"),
                  [line for line in shown.splitlines() if line.startswith("{VARIABLE}=")]]))
"""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    environ = {k: v for k, v in os.environ.items() if k != VARIABLE} | ({VARIABLE: given} if given else {})
    done = subprocess.run([sys.executable, "-c", probe], env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ours, passed_on, seen_by_git = json.loads(done.stdout)
    assert ours == (given or "__all__")
    assert passed_on == given
    assert seen_by_git == ([f"{VARIABLE}={given}"] if given else [])
