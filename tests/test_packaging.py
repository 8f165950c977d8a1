"""One import namespace: Baton installs as baton.* only (no top-level registry, graph,
recall, signals or skills), from an editable install and from a wheel, with its console
script and its agents' SKILL.md files."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.workspace import ROOT

STORE_FOLDERS = ("registry", "graph", "recall", "signals", "skills")


def python(*code: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess:
    """This environment's Python, isolated from the checkout (-I: no cwd, no PYTHONPATH)."""
    prelude = f"import sys; sys.path.insert(0, {str(path)!r}); " if path else ""
    return subprocess.run([sys.executable, "-I", "-c", prelude + "; ".join(code)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_the_editable_install_serves_baton_and_only_baton(tmp_path):
    found = python("import baton.registry, baton.graph, baton.recall, baton.signals",
                   "from baton.skills.installers.claude_code import skill_names", "print(skill_names())", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "'resume_session'" in found.stdout and "'handoff'" in found.stdout
    for name in STORE_FOLDERS:
        missing = python(f"import {name}", cwd=tmp_path)
        assert "ModuleNotFoundError" in missing.stderr, (name, missing.stderr)
    script = Path(sys.executable).with_name("baton")
    assert subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60).returncode == 0


@pytest.mark.slow
def test_the_wheel_holds_the_namespace_the_skill_files_and_the_console_script(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("baton_sessions-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"baton"}, tops
    assert "baton/registry/postgres.py" in names and "baton/skills/frontends/cli.py" in names
    skill_files = {f"baton/skills/agent_skills/{skill}/SKILL.md" for skill in ("resume_session", "handoff")}
    assert skill_files <= set(names)
    assert "baton = baton.skills.frontends.entry:run" in entry_points
    # The unpacked wheel first on the path: everything comes from it, the skill files too.
    served = python("import baton.registry.sqlite as m", "from baton.skills.installers.claude_code import skill_source",
                    "print(m.__file__)", "print(len(skill_source('resume_session')))",
                    cwd=tmp_path, path=tmp_path / "site")
    assert served.returncode == 0, served.stderr
    origin, size = served.stdout.split()
    assert origin.startswith(str(tmp_path / "site")) and int(size) > 100
