import os

import pytest

from baton.errors import BadInput
from baton.files import WorktreeLocator, normalise_remote
from tests.workspace import git, make_repo


@pytest.mark.parametrize("url", [
    "git@github.com:Acme/shop.git", "https://github.com/Acme/shop.git", "https://user:token@GitHub.com/Acme/shop/",
    "ssh://git@github.com:22/Acme/shop.git", "git://github.com/Acme/shop",
])
def test_remote_spellings_normalise_to_one_identity_without_credentials(url):
    assert normalise_remote(url) == "github.com/Acme/shop"


def test_spellings_of_one_file_are_one_file(worktrees):
    main, _ = worktrees
    (main / "src").mkdir()
    locator = WorktreeLocator()
    refs = {locator.file_ref(p, main) for p in ["./src/a.py", "src//a.py", str(main / "src" / "a.py"),
                                                "src/../src/a.py"]}
    assert len(refs) == 1
    ref = refs.pop()
    assert (ref.repo, ref.path) == ("github.com/acme/shop", "src/a.py")
    assert locator.file_ref("a.py", main / "src") == ref


def test_two_worktrees_share_files_unrelated_repos_do_not(worktrees, tmp_path):
    main, second = worktrees
    other = make_repo(tmp_path / "other", None)
    locator = WorktreeLocator()
    assert locator.file_ref("src/a.py", main) == locator.file_ref("src/a.py", second)
    assert locator.file_ref("src/a.py", other).repo == str(other.resolve())
    assert locator.file_ref("src/a.py", other) != locator.file_ref("src/a.py", main)


def test_worktrees_without_origin_share_the_main_worktree_identity(tmp_path):
    main = make_repo(tmp_path / "plain", None)
    git(main, "worktree", "add", "-q", str(tmp_path / "plain-2"), "-b", "two")
    locator = WorktreeLocator()
    assert locator.file_ref("x.py", main) == locator.file_ref("x.py", tmp_path / "plain-2")


def test_paths_outside_a_repo_stay_absolute(tmp_path):
    ref = WorktreeLocator().file_ref("notes.txt", tmp_path)
    assert ref.repo == "" and ref.path == os.path.join(os.path.realpath(tmp_path), "notes.txt")


@pytest.mark.parametrize("raw, problem", [("", "empty path"), ("a\x00b", "NUL"), ("caf\udce9.py", "UTF-8")])
def test_unstorable_paths_are_refused(tmp_path, raw, problem):
    with pytest.raises(BadInput, match=problem):
        WorktreeLocator().file_ref(raw, tmp_path)


def test_the_worktrees_read_from_the_git_dir_are_those_git_lists(worktrees, tmp_path):
    main, second = worktrees
    git(main, "worktree", "add", "-q", str(tmp_path / "third"), "-b", "third")
    listed = [line.removeprefix("worktree ") for line in git(main, "worktree", "list", "--porcelain").splitlines()
              if line.startswith("worktree ")]
    locator = WorktreeLocator()
    for place in (main, second):
        assert sorted(map(str, locator.worktree_roots(locator.locate(place)))) == sorted(map(os.path.realpath, listed))


def test_a_path_in_another_worktree_is_that_worktrees_file_and_one_elsewhere_is_refused(worktrees, tmp_path):
    main, second = worktrees
    locator = WorktreeLocator()
    assert locator.file_ref(str(second / "src" / "a.py"), main) == locator.file_ref("src/a.py", main)
    other = make_repo(tmp_path / "other", None)
    with pytest.raises(BadInput, match="outside this repository's worktrees"):
        locator.file_ref(str(other / "a.py"), main)
    loose = tmp_path / "loose"  # outside git, the directory itself is the place
    loose.mkdir()
    assert locator.file_ref("x.py", loose).path == os.path.join(os.path.realpath(loose), "x.py")
    with pytest.raises(BadInput, match="outside"):
        locator.file_ref("../x.py", loose)
