"""A touched path stays in its repository: through the CLI and Claude Code's hooks (the
MCP tool in tests/test_mcp_server.py), nothing outside a worktree of the repository, nor
a directory, a fifo or a name longer than the file system allows, is stored or shown."""

import json
from pathlib import Path

import pytest

from tests.test_claude_hooks import hook, payload, runtime_dir  # noqa: F401 -- the hooks' runtime directory
from tests.workspace import git

LONG = "a/" * 50_000  # 100,000 characters of short names


def files_touched(cli, main: Path) -> list[str]:
    code, out, err = cli(main, "resume", "OMN-1", "--json")
    assert code == 0, err
    return json.loads(out)["session"]["files_touched"]


OUTSIDE, TOO_LONG = "outside this repository's worktrees", "longer than the file system allows"
# (path as the agent gives it, {tmp} and {main} filled in; what the refusal says)
REFUSED = [
    ("/etc/passwd", OUTSIDE),
    ("../../../x", OUTSIDE),
    ("{tmp}/secret.txt", OUTSIDE),
    ("out.txt", OUTSIDE),  # a link leading out
    ("ext/new.py", OUTSIDE),  # through a linked directory
    (LONG, TOO_LONG),
    ("n" * 300 + ".py", TOO_LONG),
    ("src", "is a directory"),
    ("pipe", "is a fifo"),
    ("{main}", "is a directory"),
]
IDS = ["absolute", "dot-dot", "beside", "link", "linked-dir", "long", "long-name", "dir", "fifo", "root"]


def spelled(raw: str, main: Path, tmp_path: Path) -> str:
    return raw.replace("{tmp}", str(tmp_path)).replace("{main}", str(main))


@pytest.mark.parametrize("raw, says", REFUSED, ids=IDS)
def test_the_cli_refuses_a_path_it_must_not_store(ways_out, cli, tmp_path, raw, says):
    raw = spelled(raw, ways_out, tmp_path)
    code, out, err = cli(ways_out, "touch", "src/ok.py", raw)
    assert code == 2 and out == ""
    assert err.startswith("baton: error: ") and says in err and err.count("\n") == 1
    assert len(err) < 500, "a long path is cut in the message"
    assert files_touched(cli, ways_out) == [], "nothing of a refused call is stored"


def test_the_repository_keeps_its_own_paths_normalised(ways_out, worktrees, cli, tmp_path):
    main, second = worktrees
    (main / "src" / "real.py").write_text("x = 1\n")
    (main / "alias.py").symlink_to(main / "src" / "real.py")
    git(main, "commit", "-q", "--allow-empty", "-m", "x")
    code, _, err = cli(main, "touch", "alias.py", "src/../src/new.py", str(second / "docs" / "plan.md"),
                       "gone.py")
    assert code == 0, err
    assert sorted(files_touched(cli, main)) == ["docs/plan.md", "gone.py", "src/new.py", "src/real.py"]


@pytest.mark.parametrize("raw, says", REFUSED, ids=IDS)
def test_the_edit_hook_ignores_such_a_path_with_one_line(ways_out, cli, capsys, tmp_path, raw, says):
    raw = spelled(raw, ways_out, tmp_path)
    event = payload("post_tool_use_write", ways_out)
    event["tool_input"]["file_path"] = raw
    code, out, err = hook("post-tool-use", event, capsys)
    assert (code, out) == (0, None), "ignored: no systemMessage, nothing told to the agent"
    assert err.startswith("baton: warning: ignored: ") and says in err and err.count("\n") == 1, err
    assert files_touched(cli, ways_out) == []


def test_the_end_of_turn_sweep_leaves_a_link_out_of_the_repository_out(ways_out, cli, capsys):
    (ways_out / "pipe").unlink()
    (ways_out / "build.sh").write_text("echo built\n")
    code, out, err = hook("stop", payload("stop", ways_out), capsys)
    assert (code, out) == (0, None)
    assert "ignored: path is outside this repository's worktrees: out.txt" in err
    assert files_touched(cli, ways_out) == ["build.sh"]

