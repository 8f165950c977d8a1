"""The security boundary of re-verification: which probes of a handoff may run at all.

A handoff is a file anyone with write access to the branch can edit, so every test here
puts a command that would leave a marker file into a handoff and checks the marker."""

import json
import os
import re
import stat
from pathlib import Path

import pytest

from baton.skills.handoff.probe_policy import matches
from baton.skills.handoff.probe_signing import PERSONAL_KEY_FILE
from tests.workspace import make_repo, run_process


def write(cli, worktree: Path, *args: str) -> Path:
    code, _, err = cli(worktree, "handoff", *args)
    assert code == 0, err
    return worktree / "docs" / "handoffs" / "LATEST.md"


def claims(cli, worktree: Path, *args: str) -> dict[str, dict]:
    code, out, err = cli(worktree, "handoff", "verify", *args, "--json")
    assert code == 0, err
    return {claim["section"]: claim for claim in json.loads(out)["live_state"]}


@pytest.fixture
def bound(home, worktrees, cli) -> Path:
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    return main


def test_a_tampered_probe_is_refused_and_its_command_never_runs(bound, cli, tmp_path):
    marker = tmp_path / "pwned"
    latest = write(cli, bound, "--probe", "greeting=echo hello")
    latest.write_text(latest.read_text().replace("$ echo hello", f"$ touch {marker}"))
    found = claims(cli, bound)["greeting"]
    assert found["status"] == "not_run" and found["probe"] == f"touch {marker}" and found["fresh"] is None
    assert "signature does not match" in found["reason"]
    code, out, _ = cli(bound, "resume", "OMN-1")
    assert code == 0 and "**greeting**: not run" in out
    assert not marker.exists()
    # Only the user's explicit opt-in runs it: the marker test above can fail.
    found = claims(cli, bound, "--allow-unsigned-probes")["greeting"]
    assert found["status"] == "changed" and "run because of --allow-unsigned-probes" in found["reason"]
    assert marker.exists()


def test_an_edited_recorded_result_or_a_removed_signature_refuses_the_probe(bound, cli, tmp_path):
    latest = write(cli, bound, "--probe", "greeting=echo hello")
    original = latest.read_text()
    latest.write_text(original.replace("\nhello\n", "\nHELLO\n"))
    assert "signature does not match" in claims(cli, bound)["greeting"]["reason"]
    lines = [line for line in original.splitlines() if not line.startswith("signature:")]
    latest.write_text("\n".join(lines) + "\n")
    found = claims(cli, bound)
    assert found["greeting"]["status"] == "not_run" and found["greeting"]["reason"].startswith("refused: unsigned")
    assert found["Branch"]["status"] == "verified", "Baton's read-only git probes may run unsigned"


def test_a_hand_written_probe_runs_only_when_allowlisted(bound, cli, home, tmp_path):
    marker = tmp_path / "ran"
    latest = write(cli, bound)
    latest.write_text(latest.read_text() + f"\n### Mine\nstatus: ok\nverify: 2026-06-28 via touch {marker}\n")
    assert claims(cli, bound)["Mine"]["status"] == "not_run" and not marker.exists()
    (home / "baton.toml").write_text(f'[handoff]\nallow = ["touch {marker}x"]\n')
    assert claims(cli, bound)["Mine"]["status"] == "not_run" and not marker.exists()
    (home / "baton.toml").write_text('[handoff]\nallow = ["touch **"]\n')
    found = claims(cli, bound)["Mine"]
    assert "allowed by [handoff] allow" in found["reason"] and marker.exists()


def test_an_allowlisted_git_probe_cannot_write_a_file_through_its_options(bound, cli, home, tmp_path):
    written = tmp_path / "written-by-git"
    latest = write(cli, bound)
    latest.write_text(latest.read_text() + f"\n### Mine\nstatus: ok\nverify: 2026-06-28 via git log -1 "
                                           f"--output={written}\n")
    (home / "baton.toml").write_text('[handoff]\nallow = ["git log **"]\n')
    found = claims(cli, bound)["Mine"]
    assert found["status"] == "not_run" and "not allowlisted" in found["reason"]
    assert not written.exists()
    # Named in the pattern, the option is the user's choice.
    (home / "baton.toml").write_text('[handoff]\nallow = ["git log -1 --output=*"]\n')
    assert "allowed by [handoff] allow" in claims(cli, bound)["Mine"]["reason"] and written.exists()


@pytest.mark.parametrize("pattern, argv", [
    ("git log **", "git log -1 --output /tmp/x"),
    ("git log **", "git log --ext-diff -p"),
    ("git **", "git -c core.pager=touch\\ /tmp/x log"),
    ("git **", "git -C /elsewhere log"),
    ("git **", "git --git-dir=/elsewhere/.git log"),
    ("git grep **", "git grep -iOvim main"),
    ("git fetch **", "git fetch --upload-pack=/tmp/x origin"),
    ("git log -* **", "git log --output=/tmp/x"),
    ("pytest -q **", "pytest -q -p evil_plugin"),
    ("pytest **", "pytest --basetemp=/home"),
    ("./scripts/queue-depth **", "./scripts/queue-depth --output=/tmp/x"),
])
def test_a_dangerous_option_needs_a_pattern_word_naming_it(pattern, argv):
    import shlex

    assert not matches(tuple(shlex.split(pattern)), tuple(shlex.split(argv)))


def test_common_probes_pass_the_safe_patterns():
    allow = [("git", "log", "-1", "--format=*", "**"), ("git", "status", "--porcelain", "**"), ("pytest", "-q", "**")]
    for argv in [("git", "log", "-1", "--format=%H %s", "--", "."), ("git", "status", "--porcelain", "-uno"),
                 ("pytest", "-q", "tests/test_cart.py", "-x", "-k", "carts")]:
        assert any(matches(pattern, argv) for pattern in allow), argv


def test_allowlist_patterns_match_word_by_word():
    assert matches(("pytest", "-q"), ("pytest", "-q"))
    assert not matches(("pytest", "-q"), ("pytest", "-q", "--co"))
    assert matches(("pytest", "**"), ("pytest",)) and matches(("pytest", "**"), ("pytest", "-x", "tests"))
    assert matches(("git", "log", "--format=*"), ("git", "log", "--format=%H"))
    assert not matches(("git", "log", "*"), ("git", "log", "-1", "--output=/tmp/x"))
    assert not matches(("git", "log", "*"), ("git", "log", "--output=/tmp/x")), "`*` never stands for an option"
    assert not matches(("cat", "?x"), ("cat", "-x")) and matches(("cat", "-?"), ("cat", "-x"))
    assert matches(("git", "log", "*"), ("git", "log", "main"))
    assert not matches(("./check",), ("./check2",))


def test_a_signed_handoff_moved_to_another_repository_is_refused(bound, cli, tmp_path, home):
    marker = tmp_path / "ran-elsewhere"
    latest = write(cli, bound, "--probe", f"marker=touch {marker}")
    marker.unlink()
    other = make_repo(tmp_path / "other", "git@github.com:evil/other.git")
    (other / "docs" / "handoffs").mkdir(parents=True)
    (other / "docs" / "handoffs" / "LATEST.md").write_text(latest.read_text())
    found = claims(cli, other)
    assert found["marker"]["status"] == "not_run" and "signature does not match" in found["marker"]["reason"]
    assert not marker.exists()


def test_only_keys_configured_here_are_trusted_and_a_team_key_is_shared(bound, cli, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    key = bound.parent / "baton-home" / PERSONAL_KEY_FILE
    write(cli, bound, "--probe", f"marker=touch {marker}")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    marker.unlink()
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "another-user"))
    found = claims(cli, bound)["marker"]
    assert found["status"] == "not_run" and "which is not configured here" in found["reason"]
    assert not marker.exists()

    team_key = tmp_path / "team.key"
    team_key.write_text("a-team-secret-of-at-least-32-bytes-0123456789\n")
    monkeypatch.setenv("BATON_HANDOFF_KEY_FILE", str(team_key))
    write(cli, bound, "--probe", f"marker=touch {marker}")
    marker.unlink()
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "a-teammate"))
    assert claims(cli, bound)["marker"]["status"] == "verified" and marker.exists()


def test_an_unreadable_team_key_refuses_signed_probes_but_never_breaks_resume(bound, cli, tmp_path, monkeypatch):
    write(cli, bound, "--probe", "greeting=echo hello")
    monkeypatch.setenv("BATON_HANDOFF_KEY_FILE", str(tmp_path / "missing.key"))
    code, out, err = cli(bound, "resume", "OMN-1", "--json")
    assert code == 0, err
    found = {c["section"]: c for c in json.loads(out)["live_state"]}
    assert (found["greeting"]["status"] == "not_run"
            and "cannot read the team handoff key" in found["greeting"]["reason"])
    assert found["Branch"]["status"] == "verified"
    code, _, err = cli(bound, "handoff")
    assert code == 2 and "cannot read the team handoff key" in err


def test_a_handoff_pointing_outside_the_worktree_is_not_read(bound, cli, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# secret\n\n### S\nstatus: BUS-IS-DOWN\n")
    directory = bound / "docs" / "handoffs"
    directory.mkdir(parents=True)
    (directory / "LATEST.md").symlink_to(outside)
    code, out, _ = cli(bound, "handoff", "verify", "--json")
    assert json.loads(out) == {"handoff": {"path": "docs/handoffs/LATEST.md", "written_at": None}, "live_state": []}
    code, out, _ = cli(bound, "resume", "OMN-1")
    assert code == 0 and "points outside the worktree" in out


def test_a_huge_file_is_never_read_and_a_fifo_is_no_candidate(bound, tmp_path):
    directory = bound / "docs" / "handoffs"
    directory.mkdir(parents=True)
    os.mkfifo(directory / "LATEST.md")  # reading it would block forever (the reader's own check: below)
    (directory / "2026-01-01-OMN-1.md").write_text("x" * (1024 * 1024 + 1))
    done = run_process(bound, "handoff", "verify", timeout=60)
    assert done.returncode == 0 and "is larger than 1024 KiB" in done.stdout


def test_an_edited_status_line_never_makes_an_alarm_current(bound, cli, home):
    """The alarm is read from the status line, so the signature covers it, and an unsigned
    alarm is current only when the fresh output itself begins with it."""
    (home / "baton.toml").write_text('[handoff]\nallow = ["echo **"]\n')
    latest = write(cli, bound, "--probe", "bus=echo ok")
    text = latest.read_text()
    text = re.sub(r"(### bus\nstatus: ).*", r"\1BUS-IS-DOWN since noon", text)
    text = re.sub(r"(### Branch\nstatus: ).*", r"\1LANE-UNHEALTHY", text)
    text += ("\n### Queue\nstatus: QUEUE-WEDGED\n```verify exit=0\n$ git rev-parse --abbrev-ref HEAD\nmain\n```\n"
             "\n### Echo\nstatus: BUS-IS-DOWN\nverify: 2026-06-28 via echo no BUS-IS-DOWN\n")
    latest.write_text(text)
    found = claims(cli, bound)
    assert "signature does not match" in found["bus"]["reason"]
    for section, alarm in (("bus", "BUS-IS-DOWN"), ("Branch", "LANE-UNHEALTHY"), ("Queue", "QUEUE-WEDGED"),
                           ("Echo", "BUS-IS-DOWN")):
        assert found[section]["status"] in ("stale", "changed"), found[section]
        assert f"alarm {alarm} is current" not in found[section]["reason"], found[section]
    assert found["Branch"]["status"] == "stale" and found["Branch"]["fresh"] == "main"


def test_writing_never_follows_a_link_out_of_the_worktree_and_bad_layouts_are_bad_input(bound, cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "LATEST.md").write_text("theirs\n")
    (bound / "docs").mkdir()
    marker = tmp_path / "check-ran"
    (bound / "docs" / "handoffs").symlink_to(outside)
    code, _, err = cli(bound, "handoff", "--check", f"touch {marker}")
    assert code == 2 and err.startswith("baton: error:") and "outside the worktree" in err, err
    assert (sorted(p.name for p in outside.iterdir()) == ["LATEST.md"]
            and (outside / "LATEST.md").read_text() == "theirs\n")
    (bound / "docs" / "handoffs").unlink()
    (bound / "docs" / "handoffs").write_text("a file\n")
    code, _, err = cli(bound, "handoff", "--check", f"touch {marker}")
    assert code == 2 and "not a directory" in err, err
    (bound / "docs" / "handoffs").unlink()
    (bound / "docs" / "handoffs" / "LATEST.md").mkdir(parents=True)
    code, _, err = cli(bound, "handoff", "--check", f"touch {marker}")
    assert code == 2 and "LATEST.md is not a regular file" in err, err
    assert not marker.exists(), "the layout is checked before any check runs"
    assert [p.name for p in (bound / "docs" / "handoffs").iterdir()] == ["LATEST.md"]
    (bound / "docs" / "handoffs" / "LATEST.md").rmdir()
    code, _, err = cli(bound, "handoff")
    assert code == 0, "the same worktree with a sane layout takes the handoff: the refusals above could pass"


def test_a_fifo_is_refused_by_the_reader_itself(tmp_path):
    from baton.skills.handoff.files import UnreadableHandoff, read_handoff

    os.mkfifo(tmp_path / "LATEST.md")
    with pytest.raises(UnreadableHandoff, match="not a regular file"):
        read_handoff(tmp_path / "LATEST.md", tmp_path)  # without the check it blocks or reads nothing


def test_verifying_a_file_naming_another_ticket_creates_no_session(bound, cli, tmp_path):
    ghost = bound / "ghost.md"
    ghost.write_text("# Handoff\n\n- ticket: GHOST-1\n\n### Branch\nstatus: on branch main\n"
                     "verify: 2026-06-28 via git rev-parse --abbrev-ref HEAD\n")
    code, out, err = cli(bound, "handoff", "verify", str(ghost))
    assert code == 0 and "not recorded" in err and "GHOST-1" in err, err
    listed = {row["task_id"] for row in json.loads(cli(bound, "list", "--all", "--json")[1])}
    assert "GHOST-1" not in listed and "OMN-1" in listed
    write(cli, bound)
    cli(bound, "bind", "GHOST-1")  # once the ticket has a session, its verification is recorded
    cli(bound, "bind", "OMN-1")
    code, _, err = cli(bound, "handoff", "verify", str(ghost))
    assert code == 0 and "not recorded" not in err, err
    code, out, _ = cli(bound, "resume", "GHOST-1", "--json")
    assert json.loads(out)["session"]["handoff_verification"]["path"] == "ghost.md"
