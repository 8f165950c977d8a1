"""Checkpoints through the team's git remote: two "machines" (two clones of one bare remote,
each with a data home of its own, one set of servers) hand a ticket over, its work
included; with the remote unreachable the restore says which checkpoint it could not
fetch and why, and nothing else fails. Then what is pushed (only the checkpoint's ref,
never a branch), what restore picks (the ticket's newest, never an older one held
locally), a remote that refuses, and gc pruning only the remote refs its clone created."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.stores import use_servers
from tests.test_checkpoints import (
    commit_all,
    files,
    git_view,
    make_every_kind_of_change,
    write,
    write_every_kind_of_file,
)
from tests.test_claude_hooks import hook, payload, runtime_dir  # noqa: F401 (the hooks' own runtime directory)
from tests.workspace import git, git_may_fail

REFS = "refs/baton/checkpoints/"


@dataclass
class Machine:
    """A clone of the team's remote and the data home of the person working in it."""

    shop: Path
    home: Path


@pytest.fixture
def remote(tmp_path, monkeypatch) -> Path:
    """A bare repository holding one commit of every kind of file, as a team's remote;
    checkpoints travel through it (the suite turns that off elsewhere)."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    write_every_kind_of_file(seed)
    commit_all(seed, "base")
    bare = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(seed, "push", "-q", str(bare), "main")
    monkeypatch.setenv("BATON_CHECKPOINT_PUSH", "auto")
    return bare


def machine(remote: Path, tmp_path: Path, name: str, *, home: Path | None = None) -> Machine:
    clone = tmp_path / name / "shop"
    clone.parent.mkdir()
    git(clone.parent, "clone", "-q", str(remote), str(clone))
    return Machine(clone, home or tmp_path / name / "baton-home")


def on(who: Machine, monkeypatch) -> Path:
    monkeypatch.setenv("BATON_HOME", str(who.home))
    return who.shop


def answer(cli, cwd: Path, *args: str) -> dict | list:
    code, out, err = cli(cwd, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def remote_refs(remote: Path) -> dict[str, str]:
    """{ref: commit} of the remote's checkpoint refs."""
    found = {}
    for line in git(remote, "for-each-ref", "--format=%(objectname) %(refname)", REFS).splitlines():
        oid, _, ref = line.partition(" ")
        found[ref] = oid
    return found


def without_batons_own(found: dict) -> dict:
    return {path: what for path, what in found.items() if not path.startswith(".baton/")}


IGNORED = {"build/out.o", "debug.log"}  # a checkpoint holds no ignored file unless asked


def a_hands_off(cli, a: Machine, capsys, monkeypatch) -> tuple[str, str]:
    """A binds OMN-1, edits every kind of file, decides, hands off and ends its turn:
    answers the handoff's checkpoint and the stderr of the handoff."""
    shop = on(a, monkeypatch)
    assert cli(shop, "bind", "OMN-1")[0] == 0
    assert cli(shop, "update", "--goal", "carts in PostgreSQL", "--next", "wire the cart table")[0] == 0
    make_every_kind_of_change(shop)
    assert cli(shop, "decide", "Keep carts in PostgreSQL")[0] == 0
    code, _, handoff_err = cli(shop, "handoff")
    assert code == 0, handoff_err
    assert hook("stop", payload("stop", shop), capsys)[0] == 0
    checkpoint = answer(cli, shop, "checkpoints", "OMN-1")["checkpoints"][0]
    assert checkpoint["boundary"] == "handoff", "the end of the turn found nothing changed since the handoff"
    assert cli(shop, "deliver")[0] == 0
    return checkpoint["id"], handoff_err


def two_machines(request, tmp_path: Path, monkeypatch, servers: bool) -> tuple[Path, Machine, Machine]:
    remote = request.getfixturevalue("remote")
    if servers:
        use_servers(request, monkeypatch, tmp_path, qdrant=False)
        return remote, machine(remote, tmp_path, "a"), machine(remote, tmp_path, "b")
    # Cheaper: one embedded registry both clones' commands share (one data home).
    shared = tmp_path / "shared-home"
    return remote, machine(remote, tmp_path, "a", home=shared), machine(remote, tmp_path, "b", home=shared)


@pytest.fixture(params=["servers", "embedded"])
def machines(request, tmp_path, monkeypatch, home) -> tuple[Path, Machine, Machine]:
    """The team's remote and two clones of it: with a data home each on one set of servers
    (PostgreSQL, Neo4j, Kafka), then sharing one embedded registry."""
    return two_machines(request, tmp_path, monkeypatch, request.param == "servers")


def test_a_ticket_moves_between_machines_with_its_work_byte_for_byte(machines, tmp_path, cli, capsys, monkeypatch):
    remote, a, b = machines
    checkpoint_id, handoff_err = a_hands_off(cli, a, capsys, monkeypatch)
    assert "not pushed" not in handoff_err
    assert remote_refs(remote) == {REFS + checkpoint_id: git(a.shop, "rev-parse", REFS + checkpoint_id).strip()}
    assert git(a.shop, "ls-remote", "--heads", "--tags", "origin").split() == \
        git(a.shop, "ls-remote", "--heads", "origin", "main").split(), "a checkpoint never shows as a branch or tag"

    # B resumes: the whole journal, and the checkpoint fetched for the compatibility check.
    shop_b = on(b, monkeypatch)
    resumed = answer(cli, shop_b, "resume", "OMN-1")
    session = resumed["session"]
    assert (session["goal"], session["next_action"]) == ("carts in PostgreSQL", "wire the cart table")
    assert [d["text"] for d in session["decisions"]] == ["Keep carts in PostgreSQL"]
    assert session["handoff"] is not None and resumed["checkpoint"]["id"] == checkpoint_id
    checks = {c["check"]: (c["status"], c["detail"]) for c in resumed["compatibility"]}
    assert checks["checkpoint"] == ("ok", f"{checkpoint_id[:12]} (fetched from origin)")
    assert checks["base commit"][0] == "ok"
    # The conversation's transcript is A's: B is told why it cannot continue it natively
    # (with one shared data home, the one machine has the record but not the transcript).
    continuation = resumed["continuation"]
    why = "was recorded on this machine" if a.home != b.home else "transcript no longer exists"
    assert continuation["command"] is None and why in continuation["reason"], continuation

    # B restores A's checkpoint, the ticket's newest (B's clean worktree recorded none), byte for byte.
    target = tmp_path / "b" / "restored"
    started = answer(cli, shop_b, "restore", "OMN-1", "--into", str(target))
    assert started["run"]["diverged_at"] == checkpoint_id and started["run"]["kind"] == "restore"
    assert without_batons_own(files(target)) == {path: what for path, what in without_batons_own(files(a.shop)).items()
                                                 if path not in IGNORED}
    assert git_view(target) == git_view(a.shop)

    # B continues: its own work, pushed by hand, and a decision.
    write(target / "cart.sql", "CREATE TABLE carts (id bigint);\n")
    pushed = answer(cli, target, "checkpoint", "--push", "--label", "cart table")
    assert pushed["remote"] == str(remote).removesuffix(".git") and pushed["warnings"] == []
    assert REFS + pushed["checkpoint"]["id"] in remote_refs(remote)
    assert cli(target, "decide", "Carts get a bigint id")[0] == 0
    assert cli(target, "deliver")[0] == 0

    # A lead on either machine: one ticket, both runs in its lineage.
    for who in (a, b):
        here = on(who, monkeypatch)
        listed = answer(cli, here, "list")
        assert [line["task_id"] for line in listed] == ["OMN-1"]
        runs = answer(cli, here, "runs", "OMN-1")["runs"]
        assert [(r["kind"], r["depth"]) for r in runs] == [("bind", 0), ("restore", 1)]
        assert runs[1]["parent_run_id"] == runs[0]["run_id"] and runs[1]["diverged_at"] == checkpoint_id
    where = {c["id"]: c["remote"] for c in answer(cli, a.shop, "checkpoints", "OMN-1")["checkpoints"]}
    assert where[checkpoint_id] == where[pushed["checkpoint"]["id"]] == str(remote).removesuffix(".git")


def test_with_the_remote_unreachable_the_restore_says_which_checkpoint_and_why(machines, tmp_path, cli, capsys,
                                                                                monkeypatch):
    remote, a, b = machines
    remote.rename(remote.with_name("moved.git"))  # the remote is gone for both clones
    checkpoint_id, handoff_err = a_hands_off(cli, a, capsys, monkeypatch)
    assert f"checkpoint {checkpoint_id[:12]} not pushed to origin" in handoff_err

    shop_b = on(b, monkeypatch)
    resumed = answer(cli, shop_b, "resume", "OMN-1")
    assert [d["text"] for d in resumed["session"]["decisions"]] == ["Keep carts in PostgreSQL"]
    checks = {c["check"]: (c["status"], c["detail"]) for c in resumed["compatibility"]}
    status, detail = checks["checkpoint"]
    assert status == "missing" and detail.startswith(f"{checkpoint_id[:12]}: not in this clone and not fetched")

    target = tmp_path / "b" / "restored"
    code, out, err = cli(shop_b, "restore", "OMN-1", "--into", str(target))
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"OMN-1's newest checkpoint {checkpoint_id[:12]} (handoff" in err
    assert "could not be fetched: origin did not answer" in err
    assert not target.exists()
    # Nothing else fails.
    assert cli(shop_b, "decide", "Carts wait for the remote")[0] == 0
    assert answer(cli, shop_b, "checkpoints", "OMN-1")["checkpoints"][0]["present"] is False
    for who in (a, b):
        here = on(who, monkeypatch)
        assert cli(here, "deliver")[0] == 0
        assert [line["task_id"] for line in answer(cli, here, "list")] == ["OMN-1"]
        assert answer(cli, here, "runs", "OMN-1")["runs"][0]["kind"] == "bind"
    assert cli(a.shop, "end", "--status", "stalled")[0] == 0


def test_restore_takes_the_tickets_newest_never_an_older_one_held_here(home, remote, tmp_path, cli, monkeypatch):
    a, b = machine(remote, tmp_path, "a", home=home), machine(remote, tmp_path, "b", home=home)
    assert cli(b.shop, "bind", "OMN-1")[0] == 0
    write(b.shop / "text.txt", "B's older work\n")
    older = answer(cli, b.shop, "checkpoint")["checkpoint"]["id"]
    assert cli(a.shop, "bind", "OMN-1", "--take-over")[0] == 0  # B's run is live
    assert answer(cli, a.shop, "checkpoints", "OMN-1")["checkpoints"][0]["id"] == older, \
        "A's clean worktree taking the ticket records no checkpoint in front of B's work"
    write(a.shop / "text.txt", "A's newer work\n")
    newer = answer(cli, a.shop, "checkpoint")["checkpoint"]["id"]  # not pushed: by hand without --push

    target = tmp_path / "restored"
    code, _, err = cli(b.shop, "restore", "OMN-1", "--into", str(target))
    assert code == 2 and f"newest checkpoint {newer[:12]}" in err and "origin does not hold it" in err, err
    assert not target.exists(), "never B's older checkpoint instead"
    assert answer(cli, b.shop, "restore", "OMN-1", "--at", older[:10], "--into", str(target))["run"]["diverged_at"] \
        == older
    assert (target / "text.txt").read_text() == "B's older work\n"

    shared = answer(cli, a.shop, "checkpoint", "--push")
    assert (shared["status"], shared["checkpoint"]["id"]) == ("unchanged", newer) and shared["remote"]
    second = tmp_path / "restored-newest"
    assert answer(cli, b.shop, "restore", "OMN-1", "--into", str(second))["run"]["diverged_at"] == newer
    assert (second / "text.txt").read_text() == "A's newer work\n"


def test_fork_and_end_push_their_checkpoints_and_fresh_fetches_the_newest(home, remote, tmp_path, cli, monkeypatch):
    a, b = machine(remote, tmp_path, "a", home=home), machine(remote, tmp_path, "b", home=home)
    assert cli(a.shop, "bind", "OMN-1")[0] == 0
    write(a.shop / "text.txt", "carts\n")
    taken = answer(cli, a.shop, "checkpoint")["checkpoint"]["id"]
    forked = answer(cli, a.shop, "fork", "OMN-1", "--as", "OMN-2", "--at", taken, "--into", str(tmp_path / "fork"))
    assert forked["warnings"] == []
    fork_latest = answer(cli, a.shop, "checkpoints", "OMN-2")["checkpoints"][0]
    assert {REFS + taken, REFS + fork_latest["id"]} <= set(remote_refs(remote))
    assert fork_latest["remote"] == str(remote).removesuffix(".git")

    started = answer(cli, b.shop, "fresh", "OMN-1", "--into", str(tmp_path / "fresh"))
    assert started["warnings"] == []
    assert git_may_fail(b.shop, "rev-parse", "--verify", REFS + taken).returncode == 0, "fetched for the fresh start"

    write(tmp_path / "fork" / "text.txt", "the fork's end\n")
    code, _, err = cli(tmp_path / "fork", "end", "--status", "completed")
    assert code == 0 and "not pushed" not in err
    ended = answer(cli, a.shop, "checkpoints", "OMN-2")["checkpoints"][0]
    assert ended["boundary"] == "completed" and REFS + ended["id"] in remote_refs(remote)


def test_a_remote_that_refuses_is_said_once_and_off_means_nothing_travels(home, remote, tmp_path, cli, monkeypatch):
    a = machine(remote, tmp_path, "a", home=home)
    hook_file = remote / "hooks" / "pre-receive"
    write(hook_file, "#!/bin/sh\necho 'no baton refs here' >&2\nexit 1\n", 0o755)
    assert cli(a.shop, "bind", "OMN-1")[0] == 0
    write(a.shop / "text.txt", "one\n")
    code, _, err = cli(a.shop, "handoff")
    assert code == 0 and "origin refused it" in err and "automatic pushes to origin are off" in err, err
    write(a.shop / "text.txt", "two\n")
    code, _, err = cli(a.shop, "handoff")
    assert code == 0 and "not pushed" not in err, "a refusal is said once"
    code, out, err = cli(a.shop, "checkpoint", "--push", "--json")
    assert code == 0 and "origin refused it" in err and json.loads(out)["remote"] is None
    hook_file.unlink()
    assert answer(cli, a.shop, "checkpoint", "--push")["remote"] == str(remote).removesuffix(".git")
    write(a.shop / "text.txt", "three\n")
    code, _, err = cli(a.shop, "handoff")
    assert code == 0 and "not pushed" not in err
    assert len(remote_refs(remote)) == 2, "a push by hand that succeeds turns the automatic pushes on again"

    monkeypatch.setenv("BATON_CHECKPOINT_PUSH", "off")
    write(a.shop / "text.txt", "four\n")
    before = remote_refs(remote)
    assert cli(a.shop, "handoff")[0] == 0 and remote_refs(remote) == before


def test_a_repository_without_a_remote_pushes_nothing_and_says_nothing(home, remote, tmp_path, cli, monkeypatch):
    a = machine(remote, tmp_path, "a", home=home)
    git(a.shop, "remote", "remove", "origin")
    assert cli(a.shop, "bind", "OMN-1")[0] == 0
    write(a.shop / "text.txt", "one\n")
    code, _, err = cli(a.shop, "handoff")
    assert code == 0 and "push" not in err, err
    code, _, err = cli(a.shop, "checkpoint", "--push")
    assert code == 0 and "not pushed: this repository has no remote" in err


def test_gc_prunes_on_the_remote_only_the_refs_its_clone_created(home, remote, tmp_path, cli, monkeypatch):
    a, b = machine(remote, tmp_path, "a", home=home), machine(remote, tmp_path, "b", home=home)
    assert cli(b.shop, "bind", "OMN-2")[0] == 0
    write(b.shop / "text.txt", "B's\n")
    theirs = answer(cli, b.shop, "checkpoint", "--push")["checkpoint"]["id"]
    assert cli(a.shop, "bind", "OMN-1")[0] == 0
    ours = []
    for n in range(3):
        write(a.shop / "text.txt", f"A's {n}\n")
        ours.append(answer(cli, a.shop, "checkpoint", "--push")["checkpoint"]["id"])
    assert cli(b.shop, "restore", "OMN-1", "--into", str(tmp_path / "b-restored"))[0] == 0  # B fetches A's newest
    branches = git(remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")

    done = answer(cli, a.shop, "gc", "--checkpoints", "--keep", "1")
    assert set(ours[:2]) <= set(done["removed"]) and sorted(done["remote_removed"]) == sorted(ours[:2])
    assert set(remote_refs(remote)) == {REFS + ours[2], REFS + theirs}
    assert answer(cli, a.shop, "gc", "--checkpoints", "--keep", "1")["remote_removed"] == []
    # B's gc: B pushed only its own, which OMN-2 still needs; A's fetched newest is not B's to prune.
    assert answer(cli, b.shop, "gc", "--checkpoints", "--keep", "1")["remote_removed"] == []
    assert set(remote_refs(remote)) == {REFS + ours[2], REFS + theirs}
    assert git(remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads") == branches


def test_a_credential_in_the_remotes_url_is_never_what_is_recorded(remote, tmp_path):
    from baton.skills.core.checkpoint_remote import remotes

    a = machine(remote, tmp_path, "a")
    git(a.shop, "remote", "add", "team", "https://ana:s3cr3t-t0ken@git.example.com:8443/acme/shop.git")
    assert [(r.name, r.location) for r in remotes(a.shop)] == [
        ("origin", str(remote).removesuffix(".git")), ("team", "git.example.com/acme/shop")]
