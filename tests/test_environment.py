"""The environment manifest (baton.skills.core.environment): toolchain versions with a
bounded wait, lockfile hashes, setup statuses, content-addressed, no variable's value."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from baton.skills.core import environment
from baton.skills.core.environment import SetupResult
from tests.workspace import git


def program(directory: Path, name: str, script: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Path:
    """A PATH of known programs: git (the real one), a rustc that answers, a node that hangs,
    a java that answers on stderr; no python3 and no go."""
    bin_dir = tmp_path / "bin"
    program(bin_dir, "rustc", 'echo "rustc 9.9.9 (fake)"')
    program(bin_dir, "node", f"{shutil.which('sleep')} 30")  # a child holding the output open
    program(bin_dir, "java", 'echo \'openjdk version "99"\' >&2')
    (bin_dir / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_toolchains_are_asked_with_a_bounded_wait(tools, tmp_path):
    (tmp_path / "work").mkdir()
    started = time.monotonic()
    manifest = environment.capture(tmp_path / "work", wait=1.0)
    assert time.monotonic() - started < 5, "a hanging program costs one bounded wait"
    found = manifest.body["toolchains"]
    assert found["rustc"] == {"status": "ok", "version": "rustc 9.9.9 (fake)"}
    assert found["java"] == {"status": "ok", "version": 'openjdk version "99"'}
    assert found["node"] == {"status": "no answer within 1 s"}
    assert found["python"] == {"status": "not found"} and found["go"] == {"status": "not found"}
    real_git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    assert found["git"] == {"status": "ok", "version": real_git}
    assert set(manifest.body["os"]) == {"system", "release", "machine"} and manifest.body["os"]["machine"]


def test_a_program_planted_in_the_worktree_is_never_run(tools, tmp_path, monkeypatch):
    worktree = tmp_path / "work"
    marker = tmp_path / "ran"
    program(worktree / "node_modules/.bin", "go", f"touch {marker}; echo 'go version planted'")
    monkeypatch.setenv("PATH", os.pathsep.join([str(worktree / "node_modules/.bin"), "bin", str(tools)]))
    manifest = environment.capture(worktree, wait=1.0)
    assert manifest.body["toolchains"]["go"] == {"status": "not found"} and not marker.exists()


@pytest.mark.slow
def test_lockfiles_are_hashed_and_the_id_is_the_content(tools, tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    git(root, "init", "-q")
    (root / "uv.lock").write_text("version = 1\n")
    (root / "requirements-dev.txt").write_text("pytest\n")
    (root / "web").mkdir()
    (root / "web/package-lock.json").write_text("{}\n")
    (root / "web/untracked").mkdir()
    (root / "web/untracked/yarn.lock").write_text("# not tracked, not at the root\n")
    (root / "notes.txt").write_text("not a lockfile\n")
    git(root, "add", "web/package-lock.json")
    first = environment.capture(root, wait=1.0, setup=[SetupResult("uv sync", 0), SetupResult("npm ci", None)])
    assert first.body["lockfiles"] == {
        "requirements-dev.txt": hashlib.sha256(b"pytest\n").hexdigest(),
        "uv.lock": hashlib.sha256(b"version = 1\n").hexdigest(),
        "web/package-lock.json": hashlib.sha256(b"{}\n").hexdigest()}
    assert first.body["setup"] == [{"command": "uv sync", "exit_status": 0}, {"command": "npm ci", "exit_status": None}]
    assert first.id == hashlib.sha256(first.to_json()).hexdigest()
    assert json.loads(first.to_json()) == first.body
    same = environment.capture(root, wait=1.0, setup=[SetupResult("uv sync", 0), SetupResult("npm ci", None)])
    assert same.id == first.id, "the same environment is one id"
    assert environment.capture(root, wait=1.0, setup=[SetupResult("uv sync", 1), SetupResult("npm ci", None)]).id \
        != first.id, "a setup status is part of it"
    (root / "uv.lock").write_text("version = 2\n")
    assert environment.capture(root, wait=1.0, setup=[SetupResult("uv sync", 0), SetupResult("npm ci", None)]).id \
        != first.id, "a lockfile is part of it"


def test_no_environment_variable_value_is_held(tools, tmp_path, monkeypatch):
    program(tools, "go", 'echo "go version $SECRET_TOKEN"')
    monkeypatch.setenv("SECRET_TOKEN", "hunter2-value")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dpassword=hunter2-value")
    (tmp_path / "work").mkdir()
    manifest = environment.capture(tmp_path / "work", wait=1.0)
    text = manifest.to_json().decode()
    assert "hunter2-value" not in text and str(tools) not in text and str(tmp_path) not in text
    assert manifest.body["toolchains"]["go"] == {"status": "ok", "version": "go version"}
