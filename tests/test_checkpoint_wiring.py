"""Checkpoints, runs and the verbs wired into the commands and hooks: restore through the
CLI, fork and fresh end to end with their lineage and inherited journal (on the embedded
default and on the servers), the Stop hook's checkpoint, and the checkpoint gc."""

import json
import os
from pathlib import Path

import pytest

from baton.masking import mask_all
from tests.test_checkpoints import files, git_view, make_every_kind_of_change, repo, write  # noqa: F401
from tests.test_claude_hooks import hook, payload, runtime_dir  # noqa: F401
from tests.workspace import git, make_repo


def answer(cli, cwd: Path, *args: str) -> dict:
    code, out, err = cli(cwd, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def checkpoint_events(task_id: str) -> list:
    from baton.registry.model import CheckpointTaken
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        return [e for e in stores.registry.events(task_id).value if isinstance(e, CheckpointTaken)]
    finally:
        stores.close()


def without_batons_own(found: dict) -> dict:
    return {path: what for path, what in found.items() if not path.startswith(".baton/")}


def test_restore_through_the_cli_is_byte_identical_and_a_new_child_run(home, repo, tmp_path, cli):  # noqa: F811
    assert cli(repo, "bind", "OMN-1")[0] == 0
    make_every_kind_of_change(repo)
    taken = answer(cli, repo, "checkpoint", "--label", "mid-refactor")
    assert taken["status"] == "taken" and taken["checkpoint"]["label"] == "mid-refactor"
    assert answer(cli, repo, "checkpoint")["status"] == "unchanged"
    checkpoint_id = taken["checkpoint"]["id"]

    target = tmp_path / "restored"
    started = answer(cli, repo, "restore", f"OMN-1@{checkpoint_id[:10]}", "--into", str(target))
    ignored = {"build/out.o", "debug.log"}
    assert without_batons_own(files(target)) == {k: v for k, v in without_batons_own(files(repo)).items()
                                                 if k not in ignored}
    assert git_view(target) == git_view(repo)
    bind_run = taken["checkpoint"]["run_id"]
    assert started["run"] == {"run_id": started["run"]["run_id"], "parent_run_id": bind_run, "kind": "restore",
                              "diverged_at": checkpoint_id}
    resumed = answer(cli, target, "resume", "OMN-1")
    assert resumed["run"]["run_id"] == started["run"]["run_id"]
    assert {c["check"]: c["status"] for c in resumed["compatibility"]} == {
        "base commit": "ok", "lockfiles": "ok", "toolchains": "ok", "checkpoint": "ok"}

    code, _, err = cli(repo, "restore", "OMN-1", "--into", str(target))
    assert code == 2 and "not an empty directory" in err and len(err.strip().splitlines()) == 1


def test_a_restore_whose_base_commit_is_gone_exits_2_with_nothing_written(home, repo, tmp_path, cli):  # noqa: F811
    assert cli(repo, "bind", "OMN-1")[0] == 0
    write(repo / "text.txt", "changed\n")
    checkpoint = answer(cli, repo, "checkpoint")["checkpoint"]
    (repo / ".git" / "objects" / checkpoint["base"][:2] / checkpoint["base"][2:]).unlink()
    target = tmp_path / "restored"
    code, _, err = cli(repo, "restore", "OMN-1", "--into", str(target))
    assert code == 2 and "is missing" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


@pytest.fixture
def shop(tmp_path) -> Path:
    root = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    write(root / "app.py", "print('v1')\n")
    git(root, "add", "app.py")
    git(root, "commit", "-q", "-m", "v1")
    return root


def test_fork_and_fresh_end_to_end_with_lineage_and_inherited_journal(any_home, shop, tmp_path, cli):
    fork_and_fresh(shop, tmp_path, cli)


def test_fork_and_fresh_on_a_postgresql_registry_written_directly(home, shop, tmp_path, cli, postgres_url,
                                                                    monkeypatch):
    """The registry on PostgreSQL without Kafka: writes kept locally and delivered to it."""
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    fork_and_fresh(shop, tmp_path, cli)


def fork_and_fresh(shop: Path, tmp_path: Path, cli) -> None:
    assert cli(shop, "bind", "OMN-1")[0] == 0
    assert cli(shop, "update", "--goal", "ship carts", "--constraint", "no new services", "--evidence",
               "carts load in 40 ms")[0] == 0
    assert cli(shop, "decide", "Keep carts in PostgreSQL")[0] == 0
    write(shop / "app.py", "print('v2: carts')\n")
    parent = answer(cli, shop, "checkpoint", "--label", "carts half done")["checkpoint"]

    # Fork: a new ticket in its own worktree and branch, its journal inherited.
    fork_path = tmp_path / "shop-fork"
    forked = answer(cli, shop, "fork", "OMN-1", "--as", "OMN-2", "--at", parent["id"], "--into", str(fork_path))
    assert forked["branch"] == "OMN-2" and (fork_path / "app.py").read_text() == "print('v2: carts')\n"
    assert git(fork_path, "branch", "--show-current").strip() == "OMN-2"
    assert forked["run"]["kind"] == "fork" and forked["run"]["diverged_at"] == parent["id"]
    assert forked["run"]["parent_run_id"] == parent["run_id"]
    session = answer(cli, fork_path, "resume", "OMN-2")["session"]
    assert session["goal"] == "ship carts" and session["goal_inherited_from"] == "OMN-1"
    assert [(c["text"], c.get("inherited_from")) for c in session["constraints"]] == [("no new services", "OMN-1")]
    assert [(d["text"], d.get("inherited_from")) for d in session["decisions"]] == [
        ("Keep carts in PostgreSQL", "OMN-1")]
    assert session["evidence"] == [], "the parent's evidence is not the fork's own"
    code, text, _ = cli(fork_path, "resume", "OMN-2")
    assert "[inherited from OMN-1] no new services" in text and "**Goal:** ship carts [inherited from OMN-1]" in text
    assert answer(cli, shop, "resume", "OMN-1")["session"]["status"] == "active", "the parent stays active"
    assert cli(shop, "touch", "app.py")[0] == 0 and cli(fork_path, "touch", "app.py")[0] == 0
    listed = {line["task_id"]: line for line in answer(cli, shop, "list")}
    assert (listed["OMN-2"]["fork_of"], listed["OMN-2"]["conflicts_with"], listed["OMN-1"]["conflicts_with"]) == (
        "OMN-1", [], []), "the overlap of a fork and its parent is expected, not a conflict"
    resumed_fork = answer(cli, fork_path, "resume", "OMN-2")
    assert (resumed_fork["conflicts"], resumed_fork["forks_overlapping"]) == ([], ["OMN-1"])
    code, text, _ = cli(shop, "resume", "OMN-1")
    assert "- OMN-2 is a fork of this ticket; both touch app.py" in text and "### Conflicts" not in text

    # Fresh: the same ticket on a new base, the previous run superseded, its evidence inherited.
    write(shop / "base.txt", "the new base\n")
    git(shop, "add", "base.txt")
    git(shop, "commit", "-q", "-m", "moved on")  # app.py's change stays in the worktree
    fresh_path = tmp_path / "shop-fresh"
    started = answer(cli, shop, "fresh", "OMN-1", "--base", "main", "--into", str(fresh_path))
    assert started["base"] == git(shop, "rev-parse", "main").strip() and (fresh_path / "base.txt").exists()
    assert (fresh_path / "app.py").read_text() == "print('v1')\n", "a fresh start begins from the base, not the work"
    resumed = answer(cli, fresh_path, "resume", "OMN-1")
    assert resumed["run"]["kind"] == "fresh" and resumed["run"]["parent_run_id"] == parent["run_id"]
    assert [(e["text"], e["inherited"]) for e in resumed["session"]["evidence"]] == [("carts load in 40 ms", True)]
    assert resumed["session"]["goal"] == "ship carts" and resumed["session"]["goal_inherited_from"] is None
    code, text, _ = cli(fresh_path, "resume", "OMN-1")
    assert f"[reported, inherited from run {parent['run_id'][:8]}] carts load in 40 ms" in text

    lineage = answer(cli, shop, "runs", "OMN-1")["runs"]
    assert [(r["task_id"], r["kind"], r["state"], r["depth"]) for r in lineage] == [
        ("OMN-1", "bind", "superseded", 0), ("OMN-2", "fork", "current", 1), ("OMN-1", "fresh", "current", 1)]
    code, text, _ = cli(shop, "runs", "OMN-1")
    assert code == 0 and "fork (fork of OMN-1, current" in text and "bind (superseded" in text


def test_the_stop_hook_checkpoints_only_when_the_tree_changed(home, shop, cli, capsys):
    assert cli(shop, "bind", "OMN-1")[0] == 0
    at_bind = checkpoint_events("OMN-1")
    assert [e.boundary for e in at_bind] == ["bind"]
    assert hook("stop", payload("stop", shop), capsys)[0] == 0
    assert len(checkpoint_events("OMN-1")) == 1, "nothing changed since the bind's checkpoint"
    write(shop / "app.py", "print('edited by the agent')\n")
    assert hook("stop", payload("stop", shop), capsys)[0] == 0
    assert hook("stop", payload("stop", shop), capsys)[0] == 0
    taken = checkpoint_events("OMN-1")
    assert [e.boundary for e in taken] == ["bind", "stop"]
    assert taken[1].run_id == taken[0].run_id and taken[1].environment == taken[0].environment


def test_a_refused_stop_checkpoint_is_one_warning_not_a_failed_hook(home, shop, cli, capsys):
    assert cli(shop, "bind", "OMN-1")[0] == 0
    (shop / ".git" / "MERGE_HEAD").write_text(git(shop, "rev-parse", "HEAD"))
    code, output, err = hook("stop", payload("stop", shop), capsys)
    assert code == 0 and (output is None or "systemMessage" not in output)
    assert err.count("no checkpoint at stop") == 1 and "a merge is in progress" in err


def test_gc_keeps_what_is_needed_and_removes_the_rest(any_home, shop, cli, tmp_path):
    any_home.mkdir(parents=True, exist_ok=True)
    (any_home / "baton.toml").write_text("[checkpoints]\nkeep_per_run = 2\n")
    assert cli(shop, "bind", "OMN-1")[0] == 0
    taken = []
    for n in range(4):
        write(shop / "app.py", f"print({n})\n")
        taken.append(answer(cli, shop, "checkpoint")["checkpoint"]["id"])
    forked = answer(cli, shop, "fork", "OMN-1", "--as", "OMN-2", "--at", taken[0], "--into", str(tmp_path / "fork"))
    refs = lambda: {line.rsplit("/", 1)[1] for line in git(shop, "for-each-ref", "--format=%(refname)",  # noqa: E731
                                                             "refs/baton/checkpoints/").splitlines()}
    before = refs()
    planned = answer(cli, shop, "gc", "--checkpoints", "--dry-run")
    assert planned["dry_run"] and refs() == before
    bind_checkpoint = {c["id"] for c in answer(cli, shop, "checkpoints")["checkpoints"] if c["boundary"] == "bind"}
    assert set(planned["removed"]) == {taken[1]} | bind_checkpoint, \
        "kept: the newest 2 of the run ([checkpoints] keep_per_run), the fork's divergence point, the fork's own"
    done = answer(cli, shop, "gc", "--checkpoints")
    assert done["removed"] == planned["removed"] and done["records_removed"] == len(done["removed"])
    assert refs() == before - set(done["removed"])
    listed = answer(cli, shop, "checkpoints", "OMN-1")["checkpoints"]
    assert [c["id"] for c in listed] == [taken[3], taken[2], taken[0]], "the removed ones' records are gone too"
    assert all(c["present"] for c in listed)
    assert answer(cli, shop, "gc", "--checkpoints")["removed"] == []
    assert forked["run"]["diverged_at"] == taken[0]
    restored = answer(cli, shop, "restore", "OMN-1", "--into", str(shop.parent / "latest"))
    assert restored["run"]["diverged_at"] == taken[-1]
    assert answer(cli, shop, "restore", f"OMN-1@{taken[0]}", "--into", str(shop.parent / "first"))["base"]


def test_a_bad_checkpoints_table_is_one_line_and_exit_2(home, shop, cli):
    home.mkdir(parents=True, exist_ok=True)
    for table, problem in (("keep_per_run = 0", "out of range"), ("artifacts = \"dist\"", "list of glob"),
                           ("artifacts = [\"../up\"]", "inside the worktree"), ("max_file_bytes = 1.5", "whole"),
                           ("keep = 3", "unknown key")):
        (home / "baton.toml").write_text(f"[checkpoints]\n{table}\n")
        code, _, err = cli(shop, "list")
        assert code == 2 and problem in err and len(err.strip().splitlines()) == 1, (table, err)


def test_artifacts_from_baton_toml_are_held_within_the_size_cap_and_the_skipped_said(home, shop, cli, capsys):
    home.mkdir(parents=True, exist_ok=True)
    (home / "baton.toml").write_text('[checkpoints]\nartifacts = ["dist/**"]\nmax_file_bytes = 100\n')
    write(shop / ".gitignore", "dist/\n")
    write(shop / "dist" / "app.bin", "built\n")
    write(shop / "dist" / "huge.bin", "x" * 101)
    assert cli(shop, "bind", "OMN-1")[0] == 0
    write(shop / "app.py", "print('v2')\n")
    code, text, _ = cli(shop, "checkpoint")
    assert code == 0 and "not held: dist/huge.bin: 101 bytes, over the 100-byte cap" in text
    write(shop / "app.py", "print('v3')\n")
    code, _, err = hook("stop", payload("stop", shop), capsys)
    assert code == 0 and "does not hold 'dist/huge.bin' (101 bytes, over the 100-byte cap)" in err
    restored = answer(cli, shop, "restore", "OMN-1", "--into", str(shop.parent / "back"))
    back = Path(restored["worktree"])
    assert (back / "dist" / "app.bin").read_text() == "built\n" and not (back / "dist" / "huge.bin").exists()


def test_env_record_runs_the_setup_and_records_a_content_addressed_manifest_checkpoints_name(
        home, shop, cli, monkeypatch):
    home.mkdir(parents=True, exist_ok=True)
    (home / "baton.toml").write_text('[environment]\nlockfiles = ["deps/*.lock"]\n'
                                     'services = {db = "true", cache = "false"}\n')
    write(shop / "deps" / "app.lock", "pinned\n")
    write(shop / "uv.lock", "uv pinned\n")
    monkeypatch.setenv("SHOP_DB_PASSWORD", "hunter2-value-never-recorded")
    assert cli(shop, "bind", "OMN-1")[0] == 0
    setup = ["true", "sh -c 'exit 3'", "echo token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"]
    code, out, _ = cli(shop, "env", "record", *(arg for s in setup for arg in ("--setup", s)), "--json")
    recorded = json.loads(out)
    assert code == 1, "a failed setup command is exit 1, recorded all the same"
    manifest = recorded["environment"]
    assert [s["exit_status"] for s in manifest["setup"]] == [0, 3, 0]
    assert set(manifest["lockfiles"]) == {"uv.lock", "deps/app.lock"}
    assert manifest["services"] == {"cache": {"status": "exit 1"}, "db": {"status": "ok"}}
    text = json.dumps(recorded)
    # Redacted when stored; the CLI's output edge leaves the marker as it reads.
    assert "ghp_abcdefghijklmnopqrstuvwxyz" not in text and "echo token=[REDACTED:github-token]" in text
    assert "hunter2-value-never-recorded" not in text and "SHOP_DB_PASSWORD" not in text
    taken = [c for c in answer(cli, shop, "checkpoints")["checkpoints"] if c["boundary"] == "environment"]
    assert [c["id"] for c in taken] == [recorded["checkpoint"]]
    ref = f"refs/baton/checkpoints/{recorded['checkpoint']}"
    held = json.loads(git(shop, "cat-file", "blob", f"{ref}:environment.json"))
    assert mask_all(held) == {k: v for k, v in manifest.items() if k != "id"}, "the same, as the output edge masks"
    write(shop / "app.py", "print('after setup')\n")
    assert answer(cli, shop, "checkpoint")["checkpoint"]["environment"] == manifest["id"], \
        "later checkpoints name the recorded manifest"
    again = json.loads(cli(shop, "env", "record", *(arg for s in setup for arg in ("--setup", s)), "--json")[1])
    assert again["environment"]["id"] == manifest["id"], "the same environment is one manifest"
    assert "base commit: ok" in cli(shop, "resume", "OMN-1")[1]
    resumed = answer(cli, shop, "resume", "OMN-1")
    assert {c["check"]: c["status"] for c in resumed["compatibility"]}["lockfiles"] == "ok"
    assert cli(shop, "env", "--setup", "true")[0] == 2


def test_a_fork_overlapping_its_parent_is_told_as_fork_of_everywhere(home, shop, tmp_path, cli, capsys):
    from baton.skills.frontends.web.overview import Filters, OverviewSource, conflict_map
    from baton.skills.runtime.settings import Settings

    assert cli(shop, "bind", "OMN-1")[0] == 0
    write(shop / "app.py", "print('v2')\n")
    assert cli(shop, "checkpoint")[0] == 0
    fork_path = tmp_path / "shop-fork"
    assert cli(shop, "fork", "OMN-1", "--as", "OMN-2", "--into", str(fork_path))[0] == 0
    other = tmp_path / "shop-other"
    git(shop, "worktree", "add", "-q", str(other), "-b", "other")
    assert cli(other, "bind", "OMN-3")[0] == 0

    assert cli(shop, "touch", "app.py")[0] == 0
    code, out, _ = cli(fork_path, "touch", "app.py")
    assert code == 0 and out.strip() == \
        "Note: OMN-1 also touching app.py (fork of: OMN-2 is a fork of OMN-1; expected, not a conflict)"
    code, out, _ = cli(other, "touch", "app.py")
    assert "Warning: OMN-1 also touching app.py (advisory)" in out, "an unrelated ticket is still a conflict"

    code, said, _ = hook("user-prompt-submit", payload("user_prompt_submit", shop, session="parent-agent"), capsys)
    told = said["hookSpecificOutput"]["additionalContext"]
    assert "fork of: OMN-2 is a fork of OMN-1; both change app.py, as expected (not a conflict)" in told
    assert "conflict_detected from OMN-3" in told or "OMN-3" in told

    write(fork_path / "cart.py", "carts\n")
    write(shop / "cart.py", "carts too\n")
    assert cli(shop, "touch", "cart.py")[0] == 0
    edit = payload("post_tool_use_write", fork_path, file=fork_path / "cart.py", session="fork-agent")
    code, said, _ = hook("post-tool-use", edit, capsys)
    told = said["hookSpecificOutput"]["additionalContext"]
    assert told.startswith("Baton: fork of: OMN-2 is a fork of OMN-1, and both change app.py, cart.py; "
                           "this overlap is expected"), told

    source = OverviewSource(Settings.from_env())
    drawn = conflict_map(source.current(), Filters(), 60, source.shared_among)
    edges = {(e["a"], e["b"]): e["fork_of"] for e in drawn["edges"]}
    assert edges[("OMN-1", "OMN-2")] == "OMN-2 is a fork of OMN-1" and edges[("OMN-1", "OMN-3")] is None
    assert {n["id"]: n["conflicts"] for n in drawn["nodes"]}["OMN-2"] == 1, "OMN-3 only: the parent is no conflict"


def test_the_toolchains_are_asked_beside_the_resumes_writes(home, repo, tmp_path, cli, monkeypatch):  # noqa: F811
    """A resume checks the run's environment while it binds: a java that answers only once
    the resume has written the binding again (a new file: its inode moves) answers within
    the check's 1 s wait. Asked before the writes, it would not answer in time, and the
    toolchains would show as changed."""
    tools, written_before = tmp_path / "tools", tmp_path / "binding-inode"
    binding = repo / ".baton" / "active_session.yaml"
    tools.mkdir()
    java = tools / "java"
    java.write_text(f"""#!/bin/sh
if [ -e '{written_before}' ]; then
    for _ in $(seq 100); do
        [ "$(stat -c %i '{binding}')" != "$(cat '{written_before}')" ] && break
        sleep 0.05
    done
fi
echo 'openjdk version "99"' >&2
""")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    assert cli(repo, "bind", "OMN-1")[0] == 0  # java answers at once: the run's manifest
    written_before.write_text(str(binding.stat().st_ino))
    resumed = answer(cli, repo, "resume", "OMN-1")
    assert {c["check"]: c["status"] for c in resumed["compatibility"]}["toolchains"] == "ok", resumed["compatibility"]
