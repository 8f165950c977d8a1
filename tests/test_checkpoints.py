"""Checkpoints of a worktree (baton.skills.core.checkpoints), on real git repositories.

Every take is checked for what it must never do: change the user's index, stash, branches
or files. Restores are compared byte for byte, exec bits and symlinks included, and through
git's own view (the index entries, the staged and unstaged differences).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from baton.errors import BadInput, StoreUnavailable
from baton.outcome import Found, NotFound
from baton.skills.core import checkpoints
from baton.skills.core.checkpoints import REF_PREFIX, Refused, Skipped, Submodule, Taken, Unchanged
from tests.workspace import ROOT, git, git_may_fail


def commit_all(repo: Path, message: str = "work") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        path.chmod(mode)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository with one commit of text, binary, executable and symlinked files."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_every_kind_of_file(root)
    commit_all(root, "base")
    return root


def write_every_kind_of_file(root: Path) -> None:
    """Text, binary, executable and symlinked files, and those make_every_kind_of_change changes."""
    write(root / "text.txt", "one\ntwo\n")
    write(root / "data.bin", bytes(range(256)) * 4)
    write(root / "run.sh", "#!/bin/sh\necho hi\n", 0o755)
    write(root / "plain.sh", "#!/bin/sh\n", 0o644)
    (root / "link").symlink_to("text.txt")
    write(root / "gone.txt", "to be deleted\n")
    write(root / "old/name.txt", "to be renamed\n")
    write(root / "both.txt", "base\n")
    write(root / "staged_only.txt", "base\n")
    write(root / "unstaged_only.txt", "base\n")
    write(root / "dir_to_file/inner.txt", "inner\n")
    write(root / "file_to_dir", "a file\n")
    write(root / ".gitignore", "build/\n*.log\n")
    # End-of-line conversion on: a checkpoint must still hold (and restore) the bytes on disk.
    write(root / ".gitattributes", "*.txt text=auto\n")


def make_every_kind_of_change(root: Path) -> None:
    write(root / "text.txt", "one\ntwo\nthree\n")
    write(root / "data.bin", bytes(reversed(range(256))) * 3 + b"\0\r\n")
    (root / "run.sh").chmod(0o644)  # exec bit removed
    (root / "plain.sh").chmod(0o755)  # exec bit added
    (root / "link").unlink()
    (root / "link").symlink_to("data.bin")  # retargeted
    (root / "newlink").symlink_to("../outside/nowhere")  # dangling, untracked
    (root / "gone.txt").unlink()
    (root / "new").mkdir()
    git(root, "mv", "old/name.txt", "new/name.txt")
    write(root / "both.txt", "staged\n")
    git(root, "add", "both.txt")
    write(root / "both.txt", "staged\nthen unstaged\n")  # staged and unstaged differences
    write(root / "staged_only.txt", "staged\n")
    git(root, "add", "staged_only.txt")
    write(root / "unstaged_only.txt", "unstaged\n")
    write(root / "added.txt", "new and staged\n")
    git(root, "add", "added.txt")
    write(root / "untracked.txt", "untracked\r\n")
    write(root / "deep/untracked/dir/file.bin", b"\xff\xfe\0binary")
    shutil.rmtree(root / "dir_to_file")
    write(root / "dir_to_file", "now a file\n")
    (root / "file_to_dir").unlink()
    write(root / "file_to_dir/inside.txt", "now a directory\n")
    write(root / "build/out.o", "ignored\n")
    write(root / "debug.log", "ignored\n")


def files(root: Path) -> dict[str, tuple]:
    """Every path under root but .git: (kind, bytes or link target, exec bit)."""
    found = {}
    for directory, names, filenames in os.walk(root):
        names[:] = [n for n in names if n != ".git" and not (Path(directory) / n).is_symlink()]
        for name in filenames + [n for n in os.listdir(directory) if (Path(directory) / n).is_symlink()]:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            if relative == ".git":
                continue
            if path.is_symlink():
                found[relative] = ("symlink", os.readlink(path))
            else:
                found[relative] = ("file", path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
    return found


def git_view(root: Path) -> dict[str, str]:
    """What git sees of a worktree: the index entries, staged and unstaged differences."""
    raw = lambda *args: subprocess.run(["git", *args], cwd=root, check=True, capture_output=True).stdout  # noqa: E731
    return {"index": raw("ls-files", "-s", "-z"),
            "staged": raw("diff", "--cached", "--raw", "-z", "--no-renames"),
            "unstaged": raw("diff", "--raw", "-z", "--no-renames"),
            "status": raw("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")}


def user_state(root: Path) -> dict:
    """What a take must leave exactly as it was."""
    git_dir = Path(git(root, "rev-parse", "--absolute-git-dir").strip())
    return {"index": (git_dir / "index").read_bytes() if (git_dir / "index").exists() else None,
            "stash": git(root, "stash", "list"),
            "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags",
                         "refs/stash"),
            "head": (git_dir / "HEAD").read_text(),
            "files": files(root), **git_view(root)}


def checkpoint_refs(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)", REF_PREFIX).split()


def taken(result) -> checkpoints.Checkpoint:
    assert isinstance(result, Taken), result
    return result.checkpoint


def test_a_restore_is_byte_identical_and_takes_change_nothing_of_the_user(repo, tmp_path):
    make_every_kind_of_change(repo)
    git(repo, "stash", "list")
    before = user_state(repo)
    checkpoint = taken(checkpoints.take(repo, boundary="stop", label="mid-refactor", run_id="run-1"))
    assert user_state(repo) == before, "the take changed the user's index, stash, branches or files"
    assert checkpoint.base == git(repo, "rev-parse", "HEAD").strip() and checkpoint.branch == "main"
    assert (checkpoint.boundary, checkpoint.label, checkpoint.run_id) == ("stop", "mid-refactor", "run-1")
    assert git(repo, "rev-parse", checkpoint.ref).strip() == checkpoint.commit
    assert git(repo, "rev-parse", f"{checkpoint.commit}^").strip() == checkpoint.base, "the base is kept alive"

    target = tmp_path / "restored"
    restored = checkpoints.restore(repo, checkpoint.id, target)
    assert restored.path == target and restored.skipped == ()
    ignored = {"build/out.o", "debug.log"}
    assert files(target) == {k: v for k, v in files(repo).items() if k not in ignored}
    assert git_view(target) == git_view(repo)
    assert git(target, "rev-parse", "HEAD").strip() == checkpoint.base
    assert user_state(repo) == before, "the restore changed the original worktree"


def test_git_gc_keeps_everything_a_checkpoint_needs(repo, tmp_path):
    """The checkpoint's ref is all that keeps its base, trees and blobs: a branch rewritten
    and `git gc --prune=now` lose none of them."""
    write(repo / "text.txt", "on a commit about to be dropped\n")
    commit_all(repo, "dropped")
    make_every_kind_of_change(repo)
    checkpoint = taken(checkpoints.take(repo, boundary="stop", artifacts=["build/*"],
                                        environment=("e" * 64, b"{}")))
    expected_files, expected_view = files(repo), git_view(repo)
    git(repo, "stash", "-u", "-q")
    git(repo, "stash", "drop", "-q")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert git_may_fail(repo, "cat-file", "-e", checkpoint.base).returncode == 0
    target = tmp_path / "restored"
    checkpoints.restore(repo, checkpoint.id, target)
    assert files(target) == {k: v for k, v in expected_files.items() if k != "debug.log"}
    assert git_view(target) == expected_view


def test_the_same_state_is_one_checkpoint(repo):
    make_every_kind_of_change(repo)
    first = taken(checkpoints.take(repo, boundary="stop"))
    assert checkpoints.take(repo, boundary="stop") == Unchanged(first.id)
    os.utime(repo / "untracked.txt", ns=(1, 1))  # the fingerprint moves (a take, not Unchanged), the content does not
    again = checkpoints.take(repo, boundary="handoff", label="another label")
    assert isinstance(again, Taken) and not again.created
    assert again.checkpoint == first, "the first record stands"
    assert checkpoint_refs(repo) == [first.ref]


def test_any_change_is_a_new_checkpoint(repo):
    ids = [taken(checkpoints.take(repo, boundary="stop")).id]
    write(repo / "text.txt", "changed\n")
    ids.append(taken(checkpoints.take(repo, boundary="stop")).id)
    git(repo, "add", "text.txt")  # the same bytes, now staged
    ids.append(taken(checkpoints.take(repo, boundary="stop")).id)
    (repo / "run.sh").chmod(0o644)
    ids.append(taken(checkpoints.take(repo, boundary="stop")).id)
    commit_all(repo)
    ids.append(taken(checkpoints.take(repo, boundary="stop")).id)
    assert len(set(ids)) == len(ids)
    assert sorted(checkpoint_refs(repo)) == sorted(REF_PREFIX + i for i in ids)


def test_a_same_size_rewrite_in_the_second_of_the_last_index_write_is_seen(repo):
    """git trusts an entry's stat data unless the index was written in the same second as
    the file (a racily clean entry): the copy of the index must keep that time."""
    path = repo / "text.txt"
    deadline = time.monotonic() + 10
    while True:  # the add and the rewrite within one second of the clock
        while time.time() % 1 > 0.3 and time.monotonic() < deadline:
            time.sleep(0.01)
        second = int(time.time())
        write(path, "aaaa\n")
        git(repo, "add", "text.txt")
        write(path, "bbbb\n")
        if int(time.time()) == second or time.monotonic() > deadline:
            break
    index = repo / ".git" / "index"
    while int(time.time()) <= int(index.stat().st_mtime) and time.monotonic() < deadline:
        time.sleep(0.02)  # the take copies the index in a later second
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    assert git(repo, "show", f"{checkpoint.worktree_tree}:text.txt") == "bbbb\n"


def test_read_list_and_gc(repo, tmp_path):
    first = taken(checkpoints.take(repo, boundary="bind"))
    write(repo / "text.txt", "changed\n")
    second = taken(checkpoints.take(repo, boundary="stop", label="two"))
    other = tmp_path / "other-worktree"
    git(repo, "worktree", "add", "-q", "--detach", str(other))
    write(other / "elsewhere.txt", "x")
    third = taken(checkpoints.take(other, boundary="stop"))

    assert checkpoints.read(repo, second.id) == Found(second)
    assert checkpoints.read(repo, second.id[:10]) == Found(second), "a unique prefix reads"
    assert checkpoints.read(repo, "0" * 64) == NotFound("0" * 64)
    with pytest.raises(BadInput):
        checkpoints.read(repo, "not-an-id")
    listed = checkpoints.list_checkpoints(repo)
    assert isinstance(listed, Found) and [c.id for c in listed.value] == [third.id, second.id, first.id]
    assert [c.worktree for c in listed.value] == [os.path.realpath(other), *[os.path.realpath(repo)] * 2]
    assert checkpoints.list_checkpoints(other) == listed, "every worktree of the repository lists them all"

    assert checkpoints.gc(repo, keep={second.id}) == tuple(sorted((first.id, third.id)))
    assert checkpoint_refs(repo) == [second.ref]
    assert checkpoints.gc(repo, keep={second.id}) == ()


def test_an_unborn_branch(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    assert taken(checkpoints.take(root, boundary="stop")).base is None, "an empty repository checkpoints"
    write(root / "staged.txt", "staged\n")
    git(root, "add", "staged.txt")
    write(root / "staged.txt", "staged\nand more\n")
    write(root / "tool.sh", "#!/bin/sh\n", 0o755)
    before = user_state(root)
    checkpoint = taken(checkpoints.take(root, boundary="stop"))
    assert checkpoint.base is None and user_state(root) == before
    target = tmp_path / "restored"
    restored = checkpoints.restore(root, checkpoint.id, target)
    assert files(target) == files(root) and git_view(target) == git_view(root)
    assert any("unborn" in note for note in restored.notes)
    assert git_may_fail(target, "rev-parse", "-q", "--verify", "HEAD").returncode == 1


def test_artifacts_are_ignored_files_matched_by_globs_and_capped(repo, tmp_path):
    write(repo / "build/app.bin", b"\0compiled")
    write(repo / "build/nested/lib.so", b"\0library")
    write(repo / "build/huge.bin", b"\0" * 2048)
    write(repo / "debug.log", "not asked for\n")
    write(repo / "tracked_change.txt", "untracked, not an artifact\n")
    # From a subdirectory: the patterns are relative to the worktree's root all the same.
    result = checkpoints.take(repo / "old", boundary="stop", artifacts=["build/**"], max_file_bytes=1024)
    checkpoint = taken(result)
    listed = git(repo, "ls-tree", "-r", "--name-only", checkpoint.artifacts_tree).split()
    assert listed == ["build/app.bin", "build/nested/lib.so"]
    assert Skipped("build/huge.bin", "2048 bytes, over the 1024-byte cap") in checkpoint.skipped
    target = tmp_path / "restored"
    restored = checkpoints.restore(repo, checkpoint.id, target)
    assert any("build/huge.bin" in note for note in restored.notes), "a restore says what it lacks"
    assert (target / "build/nested/lib.so").read_bytes() == b"\0library"
    assert not (target / "build/huge.bin").exists() and not (target / "debug.log").exists()
    assert checkpoints.take(repo, boundary="stop", artifacts=["build/**"], max_file_bytes=1024) == \
        Unchanged(checkpoint.id)
    write(repo / "build/app.bin", b"\0recompiled")
    assert taken(checkpoints.take(repo, boundary="stop", artifacts=["build/**"], max_file_bytes=1024)).id != \
        checkpoint.id, "a changed artifact is a change"


def test_an_environment_manifest_is_held_and_part_of_the_id(repo):
    plain = taken(checkpoints.take(repo, boundary="stop"))
    manifest = ("e" * 64, b'{"python": "3.11.7"}')
    with_environment = taken(checkpoints.take(repo, boundary="stop", environment=manifest))
    assert with_environment.id != plain.id and with_environment.environment == "e" * 64
    assert git(repo, "show", f"{with_environment.ref}:environment.json") == '{"python": "3.11.7"}'
    meta = json.loads(git(repo, "show", f"{with_environment.ref}:checkpoint.json"))
    assert meta["environment"] == "e" * 64 and meta["boundary"] == "stop"


# Restores that must refuse, writing nothing.

def test_a_non_empty_target_is_refused(repo, tmp_path):
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    target = tmp_path / "busy"
    write(target / "mine.txt", "keep me")
    worktrees = git(repo, "worktree", "list", "--porcelain")
    with pytest.raises(BadInput, match="not an empty directory"):
        checkpoints.restore(repo, checkpoint.id, target)
    assert files(target) == {"mine.txt": ("file", b"keep me", False)}
    assert git(repo, "worktree", "list", "--porcelain") == worktrees
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checkpoints.restore(repo, checkpoint.id, empty).path == empty, "an empty directory is fine"


def test_a_missing_base_commit_is_a_clear_error_with_nothing_written(repo, tmp_path):
    write(repo / "text.txt", "changed\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    loose = repo / ".git" / "objects" / checkpoint.base[:2] / checkpoint.base[2:]
    assert loose.exists()
    loose.unlink()  # as if pruned or lost
    worktrees = git(repo, "worktree", "list", "--porcelain")
    target = tmp_path / "restored"
    with pytest.raises(BadInput, match=f"base commit {checkpoint.base} is missing"):
        checkpoints.restore(repo, checkpoint.id, target)
    assert not target.exists() and git(repo, "worktree", "list", "--porcelain") == worktrees


def test_a_restore_failing_midway_takes_its_new_worktree_back(repo, tmp_path):
    write(repo / "untracked.txt", "only in the checkpoint\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    blob = git(repo, "rev-parse", f"{checkpoint.worktree_tree}:untracked.txt").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a damaged object store
    worktrees = git(repo, "worktree", "list", "--porcelain")
    target = tmp_path / "restored"
    with pytest.raises(StoreUnavailable, match="missing"):
        checkpoints.restore(repo, checkpoint.id, target)
    assert not target.exists() and git(repo, "worktree", "list", "--porcelain") == worktrees


def test_restoring_an_unknown_or_deleted_checkpoint(repo, tmp_path):
    write(repo / "text.txt", "changed\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    git(repo, "update-ref", "-d", checkpoint.ref)  # deleted by hand
    assert checkpoints.read(repo, checkpoint.id) == NotFound(checkpoint.id)
    with pytest.raises(BadInput, match="no checkpoint"):
        checkpoints.restore(repo, checkpoint.id, tmp_path / "restored")
    assert not (tmp_path / "restored").exists()
    again = checkpoints.take(repo, boundary="stop")
    assert isinstance(again, Taken) and again.created and again.checkpoint.id == checkpoint.id


def test_restore_in_place(repo, tmp_path):
    make_every_kind_of_change(repo)
    write(repo / "build/kept.o", "an artifact\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop", artifacts=["build/*"]))
    clean = tmp_path / "clean"
    git(repo, "worktree", "add", "-q", "-b", "other", str(clean))
    write(clean / "later.txt", "a commit after the base\n")
    commit_all(clean, "later")
    write(clean / "build/out.o", "the clean worktree's own ignored file\n")
    restored = checkpoints.restore(repo, checkpoint.id, clean, in_place=True)
    assert restored.path == clean
    assert restored.skipped == (Skipped("build/out.o", "a file is already there"),)
    assert (clean / "build/out.o").read_text() == "the clean worktree's own ignored file\n"
    assert (clean / "build/kept.o").read_text() == "an artifact\n"
    ignored = {"build/out.o", "build/kept.o", "debug.log"}
    assert {k: v for k, v in files(clean).items() if k not in ignored} == \
        {k: v for k, v in files(repo).items() if k not in ignored}
    assert git_view(clean) == git_view(repo)
    assert git(clean, "rev-parse", "HEAD").strip() == checkpoint.base
    assert git(repo, "rev-parse", "other").strip() != checkpoint.base, "the branch did not move"


def test_restore_in_place_refuses_a_dirty_worktree_or_another_repository(repo, tmp_path):
    write(repo / "text.txt", "changed\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    dirty = tmp_path / "dirty"
    git(repo, "worktree", "add", "-q", "--detach", str(dirty))
    write(dirty / "untracked.txt", "mine\n")
    before = files(dirty)
    with pytest.raises(BadInput, match="clean worktree"):
        checkpoints.restore(repo, checkpoint.id, dirty, in_place=True)
    assert files(dirty) == before
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    git(stranger, "init", "-q")
    with pytest.raises(BadInput, match="not a worktree of"):
        checkpoints.restore(repo, checkpoint.id, stranger, in_place=True)
    assert files(stranger) == {}


# Faults of a take: each a clear answer, nothing of the user's changed.

def test_a_merge_in_progress_is_refused(repo):
    git(repo, "checkout", "-q", "-b", "side")
    write(repo / "text.txt", "side\n")
    commit_all(repo, "side")
    git(repo, "checkout", "-q", "main")
    write(repo / "text.txt", "main\n")
    commit_all(repo, "main")
    git_may_fail(repo, "merge", "side")
    assert (repo / ".git" / "MERGE_HEAD").exists()
    before = user_state(repo)
    result = checkpoints.take(repo, boundary="stop")
    assert isinstance(result, Refused) and "a merge is in progress" in result.reason
    assert user_state(repo) == before and checkpoint_refs(repo) == []


def test_a_rebase_in_progress_is_refused(repo):
    git(repo, "checkout", "-q", "-b", "side")
    write(repo / "text.txt", "side\n")
    commit_all(repo, "side")
    git(repo, "checkout", "-q", "main")
    write(repo / "text.txt", "main\n")
    commit_all(repo, "main")
    git(repo, "checkout", "-q", "side")
    git_may_fail(repo, "rebase", "main")
    before = user_state(repo)
    result = checkpoints.take(repo, boundary="stop")
    assert isinstance(result, Refused) and "rebase" in result.reason
    assert user_state(repo) == before and checkpoint_refs(repo) == []


def test_unmerged_paths_without_an_operation_are_refused(repo):
    write(repo / "text.txt", "stashed\n")
    git(repo, "stash", "-q")
    write(repo / "text.txt", "committed\n")
    commit_all(repo)
    git_may_fail(repo, "stash", "pop")  # conflicts, no MERGE_HEAD
    result = checkpoints.take(repo, boundary="stop")
    assert isinstance(result, Refused) and "unmerged" in result.reason and "text.txt" in result.reason
    assert checkpoint_refs(repo) == []


def test_a_submodule_is_recorded_by_its_commit_not_recursed(repo, tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    write(library / "lib.txt", "v1\n")
    commit_all(library, "v1")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    commit_all(repo, "add the submodule")
    sub = repo / "lib"
    write(sub / "lib.txt", "v2\n")
    commit_all(sub, "v2")
    moved = git(sub, "rev-parse", "HEAD").strip()
    write(sub / "lib.txt", "v3, uncommitted in the submodule\n")
    write(sub / "scratch.txt", "untracked in the submodule\n")
    before = user_state(repo)
    checkpoint = taken(checkpoints.take(repo, boundary="stop"))
    assert user_state(repo) == before
    assert checkpoint.submodules == (Submodule("lib", moved),)
    assert git(repo, "ls-tree", checkpoint.worktree_tree, "lib").split()[:3] == ["160000", "commit", moved]
    assert "scratch.txt" not in git(repo, "ls-tree", "-r", "--name-only", checkpoint.worktree_tree)
    target = tmp_path / "restored"
    restored = checkpoints.restore(repo, checkpoint.id, target)
    assert (target / "lib").is_dir() and any("submodule lib" in note for note in restored.notes)


def test_an_unreadable_file_is_skipped_and_said(repo, tmp_path):
    """Root reads any file, so as root the take runs without the capability to override
    file permissions (setpriv); the socket needs no such help."""
    write(repo / "text.txt", "changed, then unreadable\n", 0o000)
    write(repo / "secret.txt", "untracked and unreadable\n", 0o000)
    write(repo / "fine.txt", "readable\n")
    (repo / "gone.txt").unlink()
    (repo / "unstaged_only.txt").unlink()
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(repo / "unstaged_only.txt"))  # a tracked file replaced by a socket
        program = textwrap.dedent(f"""
            import json
            from pathlib import Path
            from baton.skills.core import checkpoints
            result = checkpoints.take(Path({str(repo)!r}), boundary="stop")
            print(json.dumps([result.checkpoint.id, result.checkpoint.worktree_tree,
                              [[s.path, s.reason] for s in result.checkpoint.skipped]]))
        """)
        command = [sys.executable, "-c", program]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: no way to make a file unreadable")
            command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
        before = user_state(repo) if os.geteuid() != 0 else None
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        checkpoint_id, worktree_tree, skipped = json.loads(done.stdout)
        if before is not None:
            assert user_state(repo) == before
    assert ["text.txt", "unreadable: Permission denied"] in skipped
    assert ["secret.txt", "unreadable: Permission denied"] in skipped
    assert ["unstaged_only.txt", "not a regular file or symlink"] in skipped
    held = git(repo, "ls-tree", "-r", "--name-only", worktree_tree).split()
    assert "fine.txt" in held and "secret.txt" not in held and "gone.txt" not in held
    assert git(repo, "show", f"{worktree_tree}:text.txt") == "one\ntwo\n", "the staged version stands in"


def test_paths_with_line_breaks_and_odd_characters(repo, tmp_path):
    odd = ["new\nline.txt", "ends with return\r", '"quoted".txt', "tab\there.txt", "café ünïcode.txt",
           " leading space.txt", "back\\slash.txt"]
    for name in odd:
        write(repo / name, f"content of {name!r}\n")
    commit_all(repo, "odd names")
    write(repo / "new\nline.txt", "changed\n")
    write(repo / "untracked\nwith break.txt", "untracked\n")
    (repo / "link\nbreak").symlink_to("text.txt")
    write(repo / "\"quoted\".txt", "changed too\n")
    (repo / "café ünïcode.txt").unlink()
    write(repo / os.fsdecode(b"not utf-8 \xff\xfe.bin"), b"\xff")
    checkpoint = taken(checkpoints.take(repo / "old", boundary="stop"))  # from a subdirectory
    target = tmp_path / "restored"
    checkpoints.restore(repo, checkpoint.id, target)
    assert files(target) == files(repo) and git_view(target) == git_view(repo)


def test_a_huge_untracked_file_is_skipped_and_said(repo, tmp_path):
    write(repo / "dump.bin", b"\0" * 5000)
    write(repo / "small.txt", "small\n")
    checkpoint = taken(checkpoints.take(repo, boundary="stop", max_file_bytes=4096))
    assert checkpoint.skipped == (Skipped("dump.bin", "5000 bytes, over the 4096-byte cap"),)
    held = git(repo, "ls-tree", "-r", "--name-only", checkpoint.worktree_tree).split()
    assert "small.txt" in held and "dump.bin" not in held
    assert (repo / "dump.bin").stat().st_size == 5000


def test_two_processes_checkpointing_one_worktree_at_once(repo):
    for n in range(300):
        write(repo / f"many/{n}.txt", f"file {n}\n")
    program = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from baton.skills.core import checkpoints
        result = checkpoints.take(Path({str(repo)!r}), boundary="stop")
        print(json.dumps([type(result).__name__, getattr(result, "created", None),
                          result.checkpoint.id if hasattr(result, "checkpoint") else result.checkpoint_id]))
    """)
    runs = [subprocess.Popen([sys.executable, "-c", program], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(4)]
    answers = []
    for run in runs:
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        answers.append(json.loads(out))
    assert len({checkpoint_id for _, _, checkpoint_id in answers}) == 1, answers
    assert sum(1 for kind, created, _ in answers if kind == "Taken" and created) <= 1
    assert len(checkpoint_refs(repo)) == 1
    checkpoint = checkpoints.read(repo, answers[0][2])
    assert isinstance(checkpoint, Found) and checkpoint.value.skipped == ()


def test_a_sha256_repository(tmp_path):
    root = tmp_path / "sha256"
    root.mkdir()
    git(root, "init", "-q", "--object-format=sha256", "-b", "main")
    write(root / "a.txt", "a\n")
    commit_all(root)
    write(root / "a.txt", "b\n")
    (root / "a.txt").chmod(0o755)
    write(root / "new.txt", "new\n")
    checkpoint = taken(checkpoints.take(root, boundary="stop"))
    assert len(checkpoint.base) == 64 and len(checkpoint.worktree_tree) == 64
    checkpoints.restore(root, checkpoint.id, tmp_path / "restored")
    assert files(tmp_path / "restored") == files(root) and git_view(tmp_path / "restored") == git_view(root)
    assert checkpoints.gc(root, keep=()) == (checkpoint.id,)


def test_outside_a_repository_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="not inside a git worktree"):
        checkpoints.take(tmp_path, boundary="stop")
    with pytest.raises(BadInput):
        checkpoints.take(tmp_path, boundary="")


def test_a_worktree_root_is_located_from_its_git_files_as_git_locates_it(repo, tmp_path):
    """The Stop hook's take reads `.git` instead of asking `git rev-parse`: both must agree,
    for the main worktree, a linked one and a path through a symlink."""
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    (tmp_path / "via").symlink_to(linked)
    for root in (repo, linked, tmp_path / "via"):
        asked = checkpoints._Git(root, 10)
        out = asked.run("rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
        expected = checkpoints._Place(*(Path(line) for line in os.fsdecode(out).splitlines()))
        assert checkpoints._git_files(root) == expected, root
    git(repo, "config", "core.worktree", str(repo))
    assert checkpoints._git_files(repo) is None, "a configured core.worktree is git's to resolve"
