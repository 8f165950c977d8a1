"""Handoffs: writing them, and re-verifying their live state on resume and `baton handoff verify`."""

import json
import os
import random
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from baton.skills.handoff.document import parse_document
from baton.skills.handoff.verify import STATUSES
from tests import timing
from tests.workspace import ROOT, git

CLAIM_KEYS = {"section", "recorded", "recorded_at", "probe", "fresh", "status", "reason"}


def handoff(cli, worktree: Path, *args: str) -> str:
    code, out, err = cli(worktree, "handoff", *args)
    assert code == 0, err
    return out


def resumed(cli, worktree: Path, task: str = "OMN-1", *args: str) -> dict:
    code, out, err = cli(worktree, "resume", task, "--json", *args)
    assert code == 0, err
    return json.loads(out)


def verified(cli, worktree: Path, *args: str) -> dict:
    code, out, err = cli(worktree, "handoff", "verify", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def claims(result: dict) -> dict[str, dict]:
    return {claim["section"]: claim for claim in result["live_state"]}


def commit(worktree: Path, path: str, text: str, message: str) -> None:
    (worktree / path).parent.mkdir(parents=True, exist_ok=True)
    (worktree / path).write_text(text)
    git(worktree, "add", path)
    git(worktree, "commit", "-q", "-m", message)


def test_a_fresh_handoff_verifies_against_the_live_state(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1", "--agent", "claude")
    commit(main, "src/cart.py", "carts\n", "cart schema")
    out = handoff(cli, main, "--check", "true", "--probe", "greeting=echo hello")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    dated = main / "docs" / "handoffs" / f"{today}-OMN-1.md"
    latest = main / "docs" / "handoffs" / "LATEST.md"
    assert f"Wrote docs/handoffs/{today}-OMN-1.md and docs/handoffs/LATEST.md" in out
    assert latest.read_text() == dated.read_text(), "LATEST.md is the full document, not a pointer"
    text = latest.read_text()
    assert "- ticket: OMN-1" in text and "(agent claude)" in text and "## Live state" in text
    for heading in ("### Branch", "### HEAD commit", "### Dirty files", "### Check: true", "### greeting"):
        assert heading in text
    assert text.count("signature: hmac-sha256:") == 5

    result = resumed(cli, main)
    assert result["handoff"]["path"] == "docs/handoffs/LATEST.md"
    assert datetime.fromisoformat(result["handoff"]["written_at"]).date().isoformat() == today
    found = claims(result)
    assert list(found) == ["Branch", "HEAD commit", "Dirty files", "Check: true", "greeting"]
    for claim in result["live_state"]:
        assert set(claim) == CLAIM_KEYS
        assert claim["status"] == "verified", claim
        assert claim["recorded_at"] and claim["probe"] and claim["fresh"] is not None
    assert found["Branch"]["fresh"] == found["Branch"]["recorded"] == "main"
    assert found["HEAD commit"]["fresh"].endswith(" cart schema")
    assert found["greeting"] == {**found["greeting"], "probe": "echo hello", "recorded": "hello", "fresh": "hello"}
    code, out, _ = cli(main, "resume", "OMN-1")
    assert code == 0 and "### Live state (re-verified now from docs/handoffs/LATEST.md" in out
    assert "5 verified" in out


def test_changed_values_show_both_and_the_live_result_wins(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    commit(main, "a.py", "a\n", "first")
    handoff(cli, main, "--probe", "greeting=echo hello")
    commit(main, "b.py", "b\n", "second")
    git(main, "checkout", "-q", "-b", "feature")
    (main / "notes.txt").write_text("wip\n")
    (main / "docs" / "handoffs" / "LATEST.md").write_text(
        (main / "docs" / "handoffs" / "LATEST.md").read_text())  # rewriting a handoff is no change to the tree
    found = claims(resumed(cli, main))
    assert found["Branch"]["status"] == "changed"
    assert (found["Branch"]["recorded"], found["Branch"]["fresh"]) == ("main", "feature")
    assert "the live result wins" in found["Branch"]["reason"]
    assert found["HEAD commit"]["status"] == "changed"
    assert found["HEAD commit"]["recorded"].endswith(" first") and found["HEAD commit"]["fresh"].endswith(" second")
    assert found["Dirty files"]["status"] == "changed"
    assert (found["Dirty files"]["recorded"], found["Dirty files"]["fresh"]) == ("", "?? notes.txt")
    assert found["greeting"]["status"] == "verified"
    code, out, _ = cli(main, "resume", "OMN-1")
    assert "**Branch**: CHANGED" in out and "now: `feature`" in out and "`main`" in out


def test_the_tree_is_recorded_as_the_checks_left_it(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main, "--check", "touch build.out")
    found = claims(verified(cli, main))
    assert found["Dirty files"]["recorded"] == "?? build.out" and found["Dirty files"]["status"] == "verified"


def test_committing_the_handoff_changes_none_of_its_claims(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    commit(main, "a.py", "a\n", "work")
    handoff(cli, main)
    git(main, "add", "docs/handoffs")
    git(main, "commit", "-q", "-m", "handoff")
    assert {c["status"] for c in verified(cli, main)["live_state"]} == {"verified"}


def test_checks_are_run_recorded_and_failed_when_they_fail_now(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    (main / "ok.txt").write_text("ok\n")
    handoff(cli, main, "--check", "test -f ok.txt", "--check", "sh -c 'echo 1 failed; exit 1'")
    text = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    assert "status: passed (exit 0)" in text and "status: CHECK-FAILED (exit 1): 1 failed" in text
    (main / "ok.txt").unlink()
    found = claims(verified(cli, main))
    assert found["Check: test -f ok.txt"]["status"] == "failed"
    assert (found["Check: test -f ok.txt"]["fresh"] == "exit 1"
            and found["Check: test -f ok.txt"]["recorded"] == "exit 0")
    still = found["Check: sh -c 'echo 1 failed; exit 1'"]
    assert still["status"] == "failed" and "alarm CHECK-FAILED is current" in still["reason"]
    session = resumed(cli, main)["session"]
    assert sorted((c["command"], c["exit_status"], c["provenance"]) for c in session["checks"]) == [
        ("sh -c 'echo 1 failed; exit 1'", 1, "observed"), ("test -f ok.txt", 0, "observed")]


def _append(worktree: Path, text: str) -> None:
    latest = worktree / "docs" / "handoffs" / "LATEST.md"
    latest.write_text(latest.read_text() + text)


def test_alarms_are_current_only_when_a_fresh_probe_reproduces_them(home, worktrees, cli):
    main, _ = worktrees
    home.mkdir(parents=True, exist_ok=True)
    (home / "baton.toml").write_text('[handoff]\n'
                                     'allow = ["echo QUEUE-WEDGED", "echo all clear", "baton-no-such-tool **"]\n')
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    _append(main, "\n### Bus health\nstatus: BUS-IS-DOWN\nverify: 2026-06-28 via rpk cluster health\n"
                  "\n### Lane\nstatus: LANE-UNHEALTHY since Tuesday\n"
                  "\n### Broker\nstatus: BROKER-GONE\nverify: 2026-06-28 via baton-no-such-tool --health\n"
                  "\n### Queue\nstatus: QUEUE-WEDGED\nverify: 2026-06-28 via echo QUEUE-WEDGED\n"
                  "\n### Cluster\nstatus: BUS-IS-DOWN\nverify: 2026-06-28 via `echo all clear`\n")
    code, out, err = cli(main, "resume", "OMN-1", "--json")
    assert code == 0, "an alarm never gates the resume"
    found = claims(json.loads(out))
    bus = found["Bus health"]
    assert bus["status"] == "stale" and bus["recorded"] == "BUS-IS-DOWN" and bus["recorded_at"] == "2026-06-28"
    assert "not allowlisted" in bus["reason"] and "does not gate" in bus["reason"] and bus["fresh"] is None
    assert (found["Lane"]["status"] == "stale" and found["Lane"]["probe"] is None
            and "no probe" in found["Lane"]["reason"])
    assert found["Broker"]["status"] == "stale" and "command not found" in found["Broker"]["reason"]
    assert found["Queue"]["status"] == "verified" and "alarm QUEUE-WEDGED is current" in found["Queue"]["reason"]
    assert found["Cluster"]["status"] == "changed" and "not reproduced" in found["Cluster"]["reason"]
    assert found["Cluster"]["fresh"] == "all clear"


def _hand_written(path: Path, ticket: str, word: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Handoff\n\n- ticket: {ticket}\n\n"
                    f"### Word\nstatus: {word}\nverify: 2026-06-28 via echo {word}\n")
    os.utime(path, (mtime, mtime))


def test_the_current_handoff_is_latest_md_else_the_root_one_else_the_newest(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    directory = main / "docs" / "handoffs"
    now = time.time()
    _hand_written(directory / "2026-06-01-OMN-1.md", "OMN-1", "older", now - 7200)
    _hand_written(directory / "2026-05-01-OMN-1.md", "OMN-1", "newest", now - 60)
    result = verified(cli, main, "--allow-unsigned-probes")
    newest = "docs/handoffs/2026-05-01-OMN-1.md"
    assert result["handoff"]["path"] == newest, "newest modification time wins, not the name"
    assert [(c["section"], c["fresh"], c["status"]) for c in result["live_state"]] == [("Word", "newest", "verified")]
    assert abs(datetime.fromisoformat(result["handoff"]["written_at"]).timestamp() - (now - 60)) < 0.01
    _hand_written(main / "LATEST.md", "OMN-1", "root", now - 86400)
    assert verified(cli, main, "--allow-unsigned-probes")["handoff"]["path"] == "LATEST.md"
    _hand_written(directory / "LATEST.md", "OMN-1", "latest", now - 86400)
    result = verified(cli, main, "--allow-unsigned-probes")
    assert result["handoff"]["path"] == "docs/handoffs/LATEST.md" and result["live_state"][0]["fresh"] == "latest"
    code, out, _ = cli(main, "handoff", "verify", "--allow-unsigned-probes")
    assert "3 other handoffs in this worktree: history, not probed" in out


def test_history_sections_and_older_handoffs_are_never_probed(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    older_marker, history_marker = main / "older-ran", main / "history-ran"
    handoff(cli, main, "--probe", f"older=touch {older_marker}")
    assert older_marker.exists(), "a probe runs when the handoff is written"
    older_marker.unlink()
    handoff(cli, main)
    _append(main, f"\n## Notes\nWe ran this earlier:\n\n```bash\ntouch {history_marker}\n```\n"
                  f"\n$ touch {history_marker}\n\nThen we said verify the thing via touch {history_marker}.\n")
    result = resumed(cli, main, "OMN-1", "--allow-unsigned-probes")
    assert "older" not in claims(result) and "Notes" not in claims(result)
    assert not older_marker.exists() and not history_marker.exists()
    parsed = parse_document((main / "docs" / "handoffs" / "LATEST.md").read_text())
    assert "Notes" in parsed.history and "Journal" in parsed.history
    # The same probe still runs when its own handoff is verified: the test above could fail.
    older = sorted((main / "docs" / "handoffs").glob("*-OMN-1.md"))[0]
    assert claims(verified(cli, main, str(older)))["older"]["status"] == "verified"
    assert older_marker.exists()


def test_the_verification_is_recorded_as_an_event(any_home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main, "--probe", "greeting=echo hello")
    assert resumed(cli, main)["session"]["handoff"]["path"].startswith("docs/handoffs/")
    (main / "notes.txt").write_text("wip\n")
    verified(cli, main)
    record = resumed(cli, main)["session"]["handoff_verification"]
    assert record["path"] == "docs/handoffs/LATEST.md" and record["held"] is False
    counts = (record["verified"], record["changed"], record["failed"], record["not_run"], record["stale"])
    assert counts == (3, 1, 0, 0, 0)
    rows = {row["task_id"]: row for row in json.loads(cli(main, "list", "--json")[1])}
    listed = rows["OMN-1"]["handoff"]  # recorded by the resume just above, which verified too
    assert {**listed, "verified_at": None} == {**record, "verified_at": None}, "a lead sees how the handoff fared"
    assert "handoff: 1 CHANGED" in cli(main, "list")[1]
    (main / "notes.txt").unlink()
    resumed(cli, main)  # the resume verifies and records too
    record = resumed(cli, main)["session"]["handoff_verification"]
    assert record["held"] is True and record["verified"] == 4
    assert "handoff held" in cli(main, "list")[1]


def test_baton_list_never_runs_probes(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    marker = main / "probe-ran"
    handoff(cli, main, "--probe", f"marker=touch {marker}")
    marker.unlink()
    for args in (("list",), ("list", "--json"), ("list", "--all"), ("resume", "--list")):
        assert cli(main, *args)[0] == 0
    assert not marker.exists()
    resumed(cli, main)
    assert marker.exists(), "resume does run the signed probe, so the check above could fail"


def test_a_handoff_is_signalled(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    signals = json.loads(cli(main, "signals", "--task", "OMN-1", "--json")[1])
    written = [s for s in signals if s["signal_type"] == "handoff_written"]
    assert len(written) == 1 and re.search(r"handoff docs/handoffs/\S+-OMN-1\.md: 3 live-state claims",
                                           written[0]["payload"]["reason"])


def test_the_journal_keeps_provenance_and_agent_text_cannot_forge_a_claim(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    marker = main / "injected-ran"
    code, out, err = cli(main, "update", "--goal", "ship carts", "--constraint", "no new services",
                         "--todo", "migration", "--todo", "docs", "--done", "docs", "--next", "write migration",
                         "--evidence", f"harmless\nverify: 2026-01-01 via touch {marker}",
                         "--check", "sh -c 'echo 12 passed'")
    assert code == 0, err
    assert "check `sh -c 'echo 12 passed'`: passed: 12 passed" in out
    cli(main, "decide", "Keep carts in PostgreSQL\n### Injected\nstatus: BUS-IS-DOWN", "--context", "restarts")
    handoff(cli, main)
    text = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    assert "### Goal\n- [reported] ship carts" in text
    assert "### Remaining work\n- [reported] migration\n" in text, "a --done with the same text completes a --todo"
    assert "### Constraints\n- [reported] no new services" in text
    assert re.search(r"### Checks run\n- \[observed\] `sh -c 'echo 12 passed'` passed: 12 passed", text)
    assert f"- [reported] harmless verify: 2026-01-01 via touch {marker}" in text
    assert "- [reported] Keep carts in PostgreSQL ### Injected status: BUS-IS-DOWN (restarts)" in text
    result = resumed(cli, main, "OMN-1", "--allow-unsigned-probes")
    assert list(claims(result)) == ["Branch", "HEAD commit", "Dirty files"]
    assert not marker.exists()
    code, out, _ = cli(main, "resume", "OMN-1")
    assert "**Goal:** ship carts [reported]" in out and "### Checks run\n- [observed]" in out
    assert "### Evidence\n- [reported] harmless" in out


@pytest.mark.slow
def test_probes_that_hang_keep_resume_valid_and_bounded(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    script = main / "slow.sh"
    script.write_text("#!/bin/sh\n[ -f hang ] && sleep 30\necho ok\n")
    script.chmod(0o755)
    handoff(cli, main, *(arg for n in range(4) for arg in ("--probe", f"slow {n}=./slow.sh")))
    monkeypatch.setenv("BATON_PROBE_TIMEOUT", "0.5")
    monkeypatch.setenv("BATON_PROBE_BUDGET", "1.2")
    started = time.monotonic()
    cli(main, "resume", "OMN-1", "--json")
    healthy = time.monotonic() - started  # the floor: the same probes answering at once
    (main / "hang").write_text("")
    started = time.monotonic()
    code, out, err = cli(main, "resume", "OMN-1", "--json")
    assert time.monotonic() - started < timing.bound(healthy, 1.2), "the budget bounds the whole re-verification"
    assert code == 0
    found = claims(json.loads(out))
    assert found["slow 0"]["status"] == "failed" and found["slow 0"]["reason"] == "timed out after 0.5s"
    assert found["slow 0"]["recorded"] == "ok" and found["slow 0"]["fresh"] is None
    assert found["slow 3"]["status"] == "not_run" and "probe budget of 1.2s was used up" in found["slow 3"]["reason"]
    assert {c["status"] for c in json.loads(out)["live_state"]} <= set(STATUSES)
    code, out, _ = cli(main, "resume", "OMN-1")
    assert code == 0 and out.startswith("## Resuming OMN-1")


def test_bad_input_runs_and_writes_nothing(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    marker = main / "ran"
    for args, message in [(("--check", f"touch {marker} | tee x"), "shell syntax"),
                          (("--probe", "no-equals-sign"), "NAME=CMD"),
                          (("--probe", f"a\nb=touch {marker}"), "one non-empty line"),
                          (("--probe", f"Branch=touch {marker}"), "two live-state sections"),
                          (("--check", f"touch {marker}", "--check", "'unbalanced"), "cannot be split"),
                          (("--timeout", "0"), "out of range"),
                          (("--check", f"touch {marker} " + "x" * 4100), "longer than 4000 characters")]:
        code, _, err = cli(main, "handoff", *args)
        assert code == 2 and message in err and err.startswith("baton: error:"), err
    code, _, err = cli(main, "update", "--check", f"touch {marker} " + "x" * 4100)
    assert code == 2 and "longer than 4000 characters" in err, err
    assert not marker.exists() and not (main / "docs").exists()
    code, _, err = cli(main, "handoff", "verify", "docs/handoffs/nothing.md")
    assert code == 2 and "no handoff at" in err
    code, out, _ = cli(main, "handoff", "verify")
    assert code == 0 and out.startswith("No handoff in this worktree")
    assert cli(main, "handoff", "verify", "--strict")[0] == 1


def test_a_second_handoff_of_the_day_keeps_the_first(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    handoff(cli, main, "--probe", "greeting=echo hello")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    first, second = main / "docs" / "handoffs" / f"{today}-OMN-1.md", main / "docs" / "handoffs" / f"{today}-OMN-1-2.md"
    assert "greeting" not in first.read_text() and "### greeting" in second.read_text()
    assert (main / "docs" / "handoffs" / "LATEST.md").read_text() == second.read_text()
    assert f"## Earlier handoffs\n\n- docs/handoffs/{today}-OMN-1.md" in second.read_text()


def test_another_tickets_handoff_is_not_verified_for_this_one(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    result = resumed(cli, main, "OMN-9")
    assert result["handoff"] is None and result["live_state"] == []
    code, out, _ = cli(main, "resume", "OMN-9")
    assert "no handoff for OMN-9; other tickets': docs/handoffs/LATEST.md (OMN-1)" in out
    assert resumed(cli, main, "OMN-1")["handoff"]["path"] == "docs/handoffs/LATEST.md"


def test_reading_any_text_never_raises():
    rng = random.Random(4)
    pieces = ["### A\n", "status: BUS-IS-DOWN\n", "verify: via\n", "verify:\n", "```verify exit=x\n", "```\n", "~~~\n",
              "$ echo hi\n", "signature: x\n", "- ticket: \n", "- written: yesterday\n", "\x00", "`````\n", "# T\n",
              "- written: 0001-01-01T00:00:00+05:00\n", "## a" + " " * 300 + "x\n", "status:" + " " * 300 + "x y\n",
              "verify: d" + " " * 300 + "via" + " " * 300 + "\n", "### C#\n", "a\u2028b\x0c\n"]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        parse_document(text)
        parse_document("# T\n" + text)  # the header, where ticket and written are read
    for _ in range(50):
        parse_document("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(500)))


def test_the_handoff_skill_file_tells_an_agent_how_to_hand_off():
    text = (ROOT / "skills" / "agent_skills" / "handoff" / "SKILL.md").read_text()
    front, body = text.split("---\n")[1], text.split("---\n", 2)[2]
    assert re.search(r"^name: handoff$", front, re.M) and re.search(r"^description: .{40,}", front, re.M)
    for needed in ("baton handoff", "--check", "--probe", "baton update", "LATEST.md", "verify", "stale",
                   "reported", "observed", "--allow-unsigned-probes"):
        assert needed in body, needed


def test_a_pathological_document_parses_in_well_under_a_second():
    """Lines built to make backtracking regular expressions take minutes (the reviewer's
    9 KB LATEST.md held resume for 57 s, outside the probe budget)."""
    spaces = " " * 3000
    lines = [f"## a{spaces}x"] * 3 + [f"status:{spaces}x{spaces}y", f"verify: d{spaces}via{spaces}x{spaces}y",
                                      f"verify:{spaces}via{spaces}", f"- written:{spaces}x{spaces}y"]
    started = time.monotonic()
    parse_document("\n".join(line.replace(" ", "x") for line in lines))
    plain = time.monotonic() - started  # the floor: a document as long without the runs of spaces
    started = time.monotonic()
    parsed = parse_document("\n".join(lines))
    assert time.monotonic() - started < timing.bound(plain)
    assert [claim.probe.command for claim in parsed.claims] == [f"x{spaces}y"]


def test_an_out_of_range_written_time_falls_back_to_the_modification_time(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    for written in ("0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"):
        assert parse_document(f"# Handoff\n\n- written: {written}\n").written_at is None
    _hand_written(main / "LATEST.md", "OMN-1", "word", time.time())
    (main / "LATEST.md").write_text((main / "LATEST.md").read_text().replace(
        "- ticket: OMN-1\n", "- ticket: OMN-1\n- written: 0001-01-01T00:00:00+05:00\n"))
    assert verified(cli, main)["handoff"]["path"] == "LATEST.md"
    assert resumed(cli, main)["handoff"]["written_at"] is not None


def test_baton_verifies_its_own_signatures_whatever_the_titles_and_output_hold(home, worktrees, cli):
    import sys

    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    commit(main, "a.py", "a\n", "subject with\u2028a line separator")
    (main / "ctl.py").write_text('print("a\\fb\\vc\\x1cd\\x1de\\x1ef\\x85g\\u2028h\\u2029i\\x1b[31mred")\n')
    handoff(cli, main, "--probe", "C#=echo sharp", "--probe", f"controls={sys.executable} ctl.py")
    text = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    assert "\x1b" not in text and "\u2028" not in text and "\x85" not in text and "\f" not in text
    assert text.splitlines() == text.split("\n")[:-1], "every reader sees the same lines"
    found = claims(verified(cli, main))
    assert list(found) == ["Branch", "HEAD commit", "Dirty files", "C#", "controls"]
    assert {c["status"] for c in found.values()} == {"verified"}, found
    assert found["controls"]["fresh"] == "a\\x0cb\\x0bc\\x1cd\\x1de\\x1ef\\x85g\\u2028h\\u2029i\\x1b[31mred"
    code, _, err = cli(main, "handoff", "--probe", "C #=echo sharp")
    assert code == 2 and "C #" in err, "a title Markdown would read differently is refused"


def test_resume_marks_every_journal_item_with_its_provenance(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/cart.py")
    cli(main, "update", "--next", "write migration", "--done", "schema drafted", "--failed", "redis lost carts")
    cli(main, "decide", "Keep carts in PostgreSQL", "--context", "restarts")
    code, out, _ = cli(main, "resume", "OMN-1")
    assert code == 0
    assert "**Next action:** write migration [reported]" in out
    assert "### Decisions made\n- [reported] Keep carts in PostgreSQL (restarts)" in out
    assert "### Completed steps\n- [reported] schema drafted" in out
    assert "### Failures\n- [reported] redis lost carts" in out
    assert "### Files touched [reported]\n- src/cart.py" in out


def test_a_check_cut_by_the_verification_limits_is_not_run_and_probes_run_first(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    script = main / "slow.sh"
    script.write_text("#!/bin/sh\n[ -f slow ] && sleep 30\necho 3 passed\n")
    script.chmod(0o755)
    handoff(cli, main, *(arg for n in range(3) for arg in ("--check", f"./slow.sh {n}")),
            "--probe", "greeting=echo hello")
    (main / "slow").write_text("")  # the suite now takes longer than re-verification allows
    monkeypatch.setenv("BATON_PROBE_TIMEOUT", "0.5")
    monkeypatch.setenv("BATON_PROBE_BUDGET", "1.2")
    found = claims(verified(cli, main))
    assert list(found)[-1] == "greeting", "results keep the document's order"
    assert found["greeting"]["status"] == "verified" and found["Branch"]["status"] == "verified"
    for n in range(3):
        check = found[f"Check: ./slow.sh {n}"]
        assert check["status"] == "not_run", check
        assert "takes longer than" in check["reason"] and check["recorded"] == "exit 0: 3 passed", check


def test_a_stale_alarm_never_counts_against_a_handoff_holding(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    _append(main, "\n### Lane\nstatus: LANE-UNHEALTHY since Tuesday\n")
    assert cli(main, "handoff", "verify", "--strict")[0] == 0
    record = resumed(cli, main)["session"]["handoff_verification"]
    assert record["stale"] == 1 and record["held"] is True, "the record and --strict agree: stale gates nothing"
    assert "handoff held" in cli(main, "list")[1]
    (main / "notes.txt").write_text("wip\n")
    assert cli(main, "handoff", "verify", "--strict")[0] == 1


def test_only_handoff_named_files_count_as_handoffs(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    now = time.time()
    _hand_written(main / "docs" / "handoffs" / "2026-06-01-OMN-1.md", "OMN-1", "handoff", now - 60)
    _hand_written(main / "docs" / "handoffs" / "README.md", "OMN-1", "readme", now)
    result = verified(cli, main, "--allow-unsigned-probes")
    dated = "docs/handoffs/2026-06-01-OMN-1.md"
    assert result["handoff"]["path"] == dated, "a README.md there is not the current handoff"


def test_resume_with_the_registry_down_verifies_and_warns_once(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    handoff(cli, main)
    monkeypatch.setenv("BATON_DATABASE_URL", "postgresql://baton@127.0.0.1:1/baton")
    code, out, err = cli(main, "resume", "OMN-1", "--json")
    assert code == 3 and json.loads(out)["handoff"]["path"] == "docs/handoffs/LATEST.md"
    warnings = [line for line in err.splitlines() if line.startswith("baton: warning:")]
    assert len(warnings) == len(set(warnings)), err  # the writes are kept for delivery: nothing to warn of
