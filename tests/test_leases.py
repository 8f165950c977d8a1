"""Leases (`baton claim`, `baton release`, `baton leases`): glob overlap both ways, expiry and
renewal under a clock the test moves, a lead's forced release, replays, both registry
backends, and sixteen processes claiming overlapping globs at once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from itertools import combinations

import pytest

from baton import clock
from baton.registry.apply import apply_event
from baton.registry.base import lease_anchor
from baton.registry.model import LeaseGranted, LeaseReleased
from baton.skills.core.path_patterns import matches, overlap
from tests.workspace import git

# (first, second, whether some path matches both)
OVERLAPS = [
    ("src/api/db.py", "src/api/db.py", True),
    ("src/api/db.py", "src/api/cart.py", False),
    ("src", "src/api/db.py", True),  # a directory holds what is under it
    ("src/", "src/api/db.py", True),
    ("src/**", "src/api/db.py", True),
    ("src/**/*.py", "src/api/db.py", True),
    ("src/**/*.py", "src/api/README.md", False),
    ("src/*.py", "src/*.md", False),
    ("src/*.py", "src/db.*", True),
    ("src/a*", "src/*b", True),  # ab
    ("src/a*x", "src/b*", False),
    ("*.md", "docs/guide/intro.md", True),  # no slash: at any depth
    ("/README.md", "docs/README.md", False),  # a leading slash anchors it
    ("README.md", "docs/README.md", True),
    ("docs/*.md", "src/**", False),
    ("**/test_*.py", "tests/test_db.py", True),
    ("src/**/db.py", "src/db.py", True),  # ** stands for no segment too
    ("src/[ab].py", "src/c.py", False),
    ("src/[a-c].py", "src/b.py", True),
    ("src/[!a].py", "src/a.py", False),
    ("src/[!a].py", "src/?.py", True),
    ("src/???.py", "src/ab.py", False),
    ("src/api", "src/apiary", False),
    ("**", "anything/at/all", True),
]


@pytest.mark.parametrize("first, second, expected", OVERLAPS)
def test_glob_overlap_is_decided_both_ways(first, second, expected):
    assert overlap(first, second) is expected
    assert overlap(second, first) is expected


@pytest.mark.parametrize("pattern, path", [(a, b) for a, b, _ in OVERLAPS if not set("*?[") & set(b)])
def test_a_pattern_overlaps_a_path_exactly_when_pathspec_matches_it(pattern, path):
    """Against a plain path the overlap is pathspec's gitwildmatch answer."""
    assert overlap(pattern, path) is matches(pattern, path)


@pytest.mark.parametrize("pattern, start", [("src/api/**/*.py", "src/api"), ("src/api/db.py", "src/api/db.py"),
                                            ("/README.md", "README.md"), ("docs/*.md", "docs"), ("*.md", ""),
                                            ("src/", ""), ("src/[ab]/x.py", "src")])
def test_every_path_a_pattern_matches_begins_with_its_literal_start(pattern, start):
    """Where the graph is asked who touched what a lease may cover (the lease's anchor)."""
    assert lease_anchor(pattern) == start
    assert all(path.startswith(start) for path in ("src/api/db.py", "README.md", "docs/guide.md", "src/a/x.py")
               if matches(pattern, path))


def test_two_patterns_that_overlap_have_anchors_of_which_one_leads_the_other():
    """What lets a claim's decision read only the leases anchored on its patterns' way
    (baton.registry.base.meeting_anchors): no overlapping lease is left unread."""
    from baton.registry.base import anchors_meet, meeting_anchors

    odd = ["src/./db.py", "src//db.py", "/src/db/", "src/db/*/x.py", "src\\*/db.py", "lib/t1/**", "lib/*.c1"]
    patterns = sorted({p for a, b, _ in OVERLAPS for p in (a, b)} | {p for p, _ in CLAIMS} | set(odd))
    met = 0
    for first in patterns:
        for second in patterns:
            if overlap(first, second):
                met += 1
                assert anchors_meet(meeting_anchors([first]), lease_anchor(second)), (first, second)
    assert met > len(patterns)
    assert not anchors_meet(meeting_anchors(["src/api/**"]), "src/apiary")
    assert not anchors_meet(meeting_anchors(["lib/*.c1"]), "src")


class Clock:
    """baton.clock.now, moved by the test."""

    def __init__(self, monkeypatch) -> None:
        self.at = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
        monkeypatch.setattr(clock, "now", lambda: self.at)

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def _leases(cli, cwd, *flags: str) -> list[dict]:
    code, out, err = cli(cwd, "leases", "--json", *flags)
    assert code == 0, err
    return json.loads(out)["leases"]


@pytest.mark.in_process  # the clock is moved in this process
def test_a_lease_lapses_after_inactivity_renews_with_activity_and_its_holder_is_told(registry_home, worktrees, cli,
                                                                                    monkeypatch):
    main, second = worktrees
    now = Clock(monkeypatch)
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")
    code, out, err = cli(main, "claim", "src/**", "--exclusive", "--reason", "moving the db layer")
    assert code == 0, err
    assert "claimed OMN-1 exclusive src/**" in out

    code, _, err = cli(second, "claim", "src/api/*.py")
    assert code == 1
    assert "held exclusive by OMN-1" in err and "moving the db layer" in err and "release --force" in err

    # The holder works on: a touch 40 minutes in renews the lease (30 minutes + 15 of grace from then).
    now.advance(minutes=40)
    cli(main, "touch", "src/db.py")
    now.advance(minutes=40)
    assert cli(second, "claim", "src/api/*.py")[0] == 1
    [held] = _leases(cli, main)
    assert held["expires_at"] == (now.at - timedelta(minutes=40) + timedelta(minutes=45)).isoformat()

    # Idle past TTL and grace: it lapses, and another ticket takes it.
    now.advance(minutes=6)
    assert _leases(cli, main) == []
    code, out, err = cli(second, "claim", "src/api/*.py", "--exclusive")
    assert code == 0, err
    assert [(lease["task_id"], lease["state"]) for lease in _leases(cli, main, "--all")] == [
        ("OMN-1", "lapsed"), ("OMN-2", "active")]

    code, out, _ = cli(main, "resume", "OMN-1", "--json")
    answer = json.loads(out)
    assert answer["leases"] == []
    assert answer["lease_notices"] == [
        "lease src/** lapsed at 2026-06-01T10:25Z and was taken by OMN-2 (src/api/*.py); claim it again to hold it"]
    # Claiming again is refused now: the taker holds part of it exclusive.
    code, _, err = cli(main, "claim", "src/**")
    assert code == 1 and "held exclusive by OMN-2" in err


@pytest.mark.in_process  # the clock is moved in this process
def test_a_forced_release_is_recorded_with_who_and_why_and_told_to_the_holder(registry_home, worktrees, cli,
                                                                              monkeypatch):
    main, second = worktrees
    Clock(monkeypatch)
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")
    assert cli(main, "claim", "src/db.py", "docs/", "--exclusive")[0] == 0

    # Only the holder releases its own leases, and a lead must say why.
    code, _, err = cli(second, "release", "--ticket", "OMN-1")
    assert code == 2 and "--force" in err
    code, _, err = cli(second, "release", "--ticket", "OMN-1", "--force")
    assert code == 2 and "--reason" in err
    before = _last_activity(cli, main, "OMN-1")

    code, out, err = cli(second, "release", "--force", "--ticket", "OMN-1", "src/db.py", "--reason", "agent is gone")
    assert code == 0, err
    assert "force-released by OMN-2 (agent is gone)" in out
    [released] = [lease for lease in _leases(cli, main, "--all") if lease["state"] == "released"]
    assert (released["pattern"], released["released_by"], released["release_reason"], released["forced"]) == (
        "src/db.py", "OMN-2", "agent is gone", True)
    assert [lease["pattern"] for lease in _leases(cli, main)] == ["docs/"]
    assert _last_activity(cli, main, "OMN-1") == before  # a lead's release renews none of the holder's leases

    assert cli(second, "claim", "src/db.py", "--exclusive")[0] == 0
    code, out, _ = cli(main, "resume", "OMN-1")
    assert "lease src/db.py was released by OMN-2: agent is gone" in out

    # The holder releases the rest itself; a second release finds nothing and changes nothing.
    code, out, _ = cli(main, "release")
    assert code == 0 and "released OMN-1 exclusive docs/" in out
    code, out, _ = cli(main, "release", "--json")
    assert json.loads(out)["released"] == []


def _last_activity(cli, cwd, task_id: str) -> str:
    code, out, _ = cli(cwd, "resume", task_id, "--json")
    return json.loads(out)["session"]["last_activity"]


def test_claims_are_all_or_nothing_shared_leases_coexist_and_a_claim_again_holds_once(registry_home, worktrees, cli):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")
    assert cli(main, "claim", "src/**/*.py")[0] == 0
    code, out, _ = cli(second, "claim", "src/db.py")
    assert code == 0 and "Note: shared with OMN-1 shared src/**/*.py" in out
    # An exclusive claim over another's shared lease is refused, the other pattern with it.
    code, _, err = cli(second, "claim", "docs/**", "src/api/*.py", "--exclusive")
    assert code == 1 and "held shared by OMN-1" in err
    assert [lease["pattern"] for lease in _leases(cli, main) if lease["task_id"] == "OMN-2"] == ["src/db.py"]
    code, out, _ = cli(main, "claim", "src/**/*.py", "--json")
    assert json.loads(out)["granted"] == [] and len(json.loads(out)["held_already"]) == 1
    # The same pattern claimed the other way replaces the lease.
    code, _, err = cli(main, "claim", "src/**/*.py", "--exclusive")
    assert code == 1 and "held shared by OMN-2" in err
    assert cli(second, "release", "src/db.py")[0] == 0
    assert cli(main, "claim", "src/**/*.py", "--exclusive")[0] == 0
    assert [(lease["pattern"], lease["exclusive"]) for lease in _leases(cli, main)] == [("src/**/*.py", True)]
    code, out, _ = cli(main, "list", "--json")
    [line] = [line for line in json.loads(out) if line["task_id"] == "OMN-1"]
    assert [(lease["pattern"], lease["exclusive"]) for lease in line["leases"]] == [("src/**/*.py", True)]


@pytest.mark.parametrize("pattern", ["!src/db.py", "../elsewhere/*", "", "#comment", "src/["])
def test_a_pattern_a_lease_cannot_hold_is_bad_input(home, worktrees, cli, pattern):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    code, _, err = cli(main, "claim", pattern)
    assert code == 2 and err.startswith("baton: ")
    assert cli(main, "claim", "src/x.py", "--ttl", "soon")[0] == 2


def test_lease_events_replay_and_merge_without_moving_back():
    at = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
    grant = LeaseGranted(event_id=uuid.uuid4(), task_id="OMN-1", session_id="s", at=at, repo="r", pattern="src/**",
                         exclusive=True, ttl_seconds=1800)
    first = LeaseReleased(event_id=uuid.uuid4(), task_id="OMN-1", session_id="s", at=at, lease_id=grant.event_id,
                          released_at=at + timedelta(minutes=5), forced=True, by="lead", reason="first")
    later = first.model_copy(update={"event_id": uuid.uuid4(), "released_at": at + timedelta(minutes=9),
                                     "at": at + timedelta(minutes=1), "reason": "second"})
    once = apply_event(apply_event(None, grant), first)
    assert apply_event(once, first) == once and apply_event(once, grant) == once
    # A later release never replaces the first: a release is final.
    assert [r.reason for r in apply_event(once, later).lease_releases] == ["first"]
    assert [r.reason for r in apply_event(apply_event(apply_event(None, later), first), grant).lease_releases] == [
        "first"]


CLAIMS = [("src/**", True), ("src/api/*.py", True), ("src/api/db.py", False), ("*.md", True), ("docs/", False),
          ("src/ui/**", False), ("**/*.py", False), ("docs/guide/*.md", True)]


def test_sixteen_processes_claiming_overlapping_globs_get_answers_one_serial_order_explains(registry_home,
                                                                                          worktrees, monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "60")
    code = "import sys\nfrom baton.skills.frontends.cli import main\nsys.exit(main(sys.argv[1:]))"
    asked = {f"RACE-{i}": CLAIMS[i % len(CLAIMS)] for i in range(16)}
    start = main / "go"
    waiting = "import os, sys, time\ngo = sys.argv.pop(1)\nwhile not os.path.exists(go): time.sleep(0.005)\n"
    processes = {}
    for task_id, (pattern, exclusive) in asked.items():
        env = {**os.environ, "BATON_TASK_ID": task_id, "BATON_SESSION_ID": f"s-{task_id}"}
        processes[task_id] = subprocess.Popen(
            [sys.executable, "-c", waiting + code, str(start), "claim", pattern, *(["--exclusive"] * exclusive),
             "--json"], cwd=main, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the processes start and wait on the file: all then claim at once
    start.write_text("")
    answers = {task_id: (p.wait(timeout=240), p.stdout.read(), p.stderr.read()) for task_id, p in processes.items()}
    for p in processes.values():
        p.stdout.close()
        p.stderr.close()
    assert {code for code, _, _ in answers.values()} <= {0, 1}, answers
    granted = {task_id for task_id, (code, _, _) in answers.items() if code == 0}
    refused = set(asked) - granted
    assert granted and refused

    listed = subprocess.run([sys.executable, "-c", code, "leases", "--json"], cwd=main, capture_output=True,
                            text=True, timeout=60, check=True)
    leases = {lease["task_id"]: lease for lease in json.loads(listed.stdout)["leases"]}
    assert set(leases) == granted  # every grant answered is stored, and nothing else

    def conflict(a: tuple[str, bool], b: tuple[str, bool]) -> bool:
        return (a[1] or b[1]) and overlap(a[0], b[0])

    # Serially: the grants in the order decided (their stamps), each compatible with those before
    # (no release happens here, so with all of them), then every refusal, each meeting a grant.
    order = sorted(granted, key=lambda task_id: leases[task_id]["granted_at"])
    for earlier, later in combinations(order, 2):
        assert not conflict(asked[earlier], asked[later]), (earlier, later)
    for task_id in refused:
        named = re.search(r"held (exclusive|shared) by (RACE-\d+) ", answers[task_id][2])
        assert named is not None, answers[task_id]
        kind, holder = named.groups()
        assert holder in granted and conflict(asked[holder], asked[task_id])
        assert kind == ("exclusive" if asked[holder][1] else "shared")


def _commit(cwd, *paths: str, env: dict | None = None) -> subprocess.CompletedProcess:
    for path in paths:
        (cwd / path).parent.mkdir(parents=True, exist_ok=True)
        (cwd / path).write_text("change\n")
    git(cwd, "add", *paths)
    return subprocess.run(["git", "commit", "-q", "-m", "change"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_the_guard_stops_a_commit_under_another_tickets_exclusive_lease_and_says_the_way_out(home, worktrees, cli):
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "src/db/**", "--exclusive", "--reason", "schema change")[0] == 0
    assert cli(second, "claim", "docs/", "--reason", "rewriting the guide")[0] == 0
    cli(main, "bind", "OMN-1")
    assert cli(main, "install", "git-hook")[0] == 0  # advisory: overlaps alone never block
    head = git(main, "rev-parse", "HEAD")

    blocked = _commit(main, "src/db/schema.py")
    assert blocked.returncode != 0
    assert "src/db/schema.py is under OMN-2's exclusive lease src/db/**: schema change" in blocked.stderr
    assert "BATON_GUARD=warn" in blocked.stderr and "baton release --force --ticket OMN-2" in blocked.stderr
    assert git(main, "rev-parse", "HEAD") == head

    # A shared lease only warns; so does an exclusive one with BATON_GUARD=warn.
    git(main, "reset", "-q")
    shared = _commit(main, "docs/guide.md")
    assert shared.returncode == 0, shared.stderr
    assert "warning: docs/guide.md is under OMN-2's shared lease docs/" in shared.stderr
    warned = _commit(main, "src/db/schema.py", env={"BATON_GUARD": "warn"})
    assert warned.returncode == 0, warned.stderr
    assert "src/db/schema.py is under OMN-2's exclusive lease" in warned.stderr


def test_the_guard_sees_a_rename_out_of_an_exclusive_lease(home, worktrees, cli):
    main, second = worktrees
    (main / "src" / "db").mkdir(parents=True)
    (main / "src" / "db" / "old.py").write_text("kept\n")
    git(main, "add", "src/db/old.py")
    git(main, "commit", "-q", "-m", "base")
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "src/db/**", "--exclusive")[0] == 0
    cli(main, "bind", "OMN-1")
    assert cli(main, "install", "git-hook")[0] == 0
    (main / "lib").mkdir()
    git(main, "mv", "src/db/old.py", "lib/new.py")
    moved = subprocess.run(["git", "commit", "-q", "-m", "move"], cwd=main, capture_output=True, text=True,
                           timeout=120)
    assert moved.returncode != 0
    assert "src/db/old.py is under OMN-2's exclusive lease src/db/**" in moved.stderr


@pytest.mark.in_process  # the clock is moved in this process
def test_leases_covering_answers_the_pre_edit_check_on_each_backend(registry_home, worktrees, cli, monkeypatch):
    from baton.files import WorktreeLocator
    from baton.skills.core.binding import place_of
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.unit import unit_of_work
    from baton.skills.services.leases import leases_covering

    main, second = worktrees
    now = Clock(monkeypatch)
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "src/db/**", "--exclusive", "--reason", "schema change")[0] == 0
    assert cli(second, "claim", "*.md")[0] == 0
    cli(main, "bind", "OMN-1")
    assert cli(main, "claim", "src/ui/*.py")[0] == 0
    repo = place_of(main, WorktreeLocator()).repo
    monkeypatch.chdir(main)

    def covering(exclude: str | None) -> dict:
        with unit_of_work(projection=apply_events) as stores:
            found = leases_covering(stores, repo, ["src/db/models/user.py", "README.md", "src/ui/app.py", "src/x.py"],
                                    exclude_task=exclude)
        return {path: [(hit.task_id, hit.pattern, hit.exclusive, hit.reason) for hit in hits]
                for path, hits in found.items()}

    assert covering("OMN-1") == {"src/db/models/user.py": [("OMN-2", "src/db/**", True, "schema change")],
                                 "README.md": [("OMN-2", "*.md", False, None)]}
    assert covering(None)["src/ui/app.py"] == [("OMN-1", "src/ui/*.py", False, None)]
    with unit_of_work(projection=apply_events) as stores:
        hit = leases_covering(stores, repo, ["src/db/a.py"], exclude_task=None)["src/db/a.py"][0]
        assert hit.expires_at == now.at + timedelta(minutes=45)
        assert leases_covering(stores, "another-repo", ["src/db/a.py"], exclude_task=None) == {}
    now.advance(minutes=46)
    assert covering("OMN-1") == {}


def test_the_session_start_context_tells_the_holder_its_leases_and_a_forced_release(home, worktrees, cli, tmp_path,
                                                                                     monkeypatch):
    import io

    from baton.skills.frontends.hooks import run_hook

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    assert cli(main, "claim", "src/db.py", "docs/", "--exclusive")[0] == 0
    cli(second, "bind", "OMN-2")
    assert cli(second, "release", "--force", "--ticket", "OMN-1", "docs/", "--reason", "the docs team needs it")[0] == 0
    event = {"session_id": "abc123", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(main),
             "hook_event_name": "SessionStart", "source": "startup"}
    out = io.StringIO()
    assert run_hook("session-start", io.StringIO(json.dumps(event)), out) == 0
    context = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    assert "lease docs/ was released by OMN-2: the docs team needs it" in context
    assert "OMN-1 exclusive src/db.py until" in context


@pytest.mark.slow  # starts `baton mcp`
def test_the_lease_tools_claim_refuse_list_and_release_as_the_cli(home, worktrees):
    from tests.test_mcp_server import with_server
    from tests.workspace import run_process

    main, second = worktrees
    run_process(second, "bind", "OMN-2").check_returncode()
    run_process(second, "claim", "src/db/**", "--exclusive", "--reason", "schema change").check_returncode()
    run_process(main, "bind", "OMN-1").check_returncode()

    async def script(session):
        refused = await session.call_tool("claim_paths", {"paths": ["src/db/models.py"]})
        granted = await session.call_tool("claim_paths", {"paths": ["src/ui/**"], "exclusive": True})
        listed = await session.call_tool("list_leases", {})
        released = await session.call_tool("release_leases", {"paths": ["src/ui/**"]})
        return [(r.is_error, r.content[0].text) for r in (refused, granted, listed, released)]

    refused, granted, listed, released = with_server(main, script)
    assert refused[0] and "held exclusive by OMN-2" in refused[1]
    assert not granted[0] and json.loads(granted[1])["granted"][0]["pattern"] == "src/ui/**"
    assert [(lease["task_id"], lease["pattern"]) for lease in json.loads(listed[1])["leases"]] == [
        ("OMN-1", "src/ui/**"), ("OMN-2", "src/db/**")]
    assert [lease["pattern"] for lease in json.loads(released[1])["released"]] == ["src/ui/**"]
    assert json.loads(run_process(main, "leases", "--json").stdout) == {"leases": [
        lease for lease in json.loads(listed[1])["leases"] if lease["task_id"] == "OMN-2"]}


def test_with_kafka_the_lease_events_reach_the_event_log_and_replay_changes_nothing(home, worktrees, cli, request,
                                                                                    monkeypatch, tmp_path,
                                                                                    kafka_server):
    """A grant is decided by the registry at once; with Kafka the event log, which every
    projection replays, gets the lease's events too, and the projector bringing them back
    leaves one lease."""
    from tests.stores import use_servers
    from tests.test_outages import messages_on

    use_servers(request, monkeypatch, tmp_path, qdrant=False)
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "deliver")[0] == 0
    topic = f"{os.environ['BATON_KAFKA_TOPIC_PREFIX']}session-events.v1"
    before = messages_on(kafka_server, topic)
    assert cli(main, "claim", "--exclusive", "src/db/**")[0] == 0
    assert cli(main, "release", "src/db/**")[0] == 0
    assert cli(main, "deliver")[0] == 0
    assert messages_on(kafka_server, topic) == before + 2, "the grant and the release, once each"
    assert cli(main, "projector", "--once")[0] == 0
    assert [(lease["pattern"], lease["state"]) for lease in _leases(cli, main, "--all")] == [("src/db/**", "released")]


