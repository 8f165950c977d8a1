"""The workflow lifecycle (skills/core/stages.py) and the authority of each stage's claim
(skills/core/stage_authority.py): every transition and repair route, the round limit and
the blocked states, a team's lifecycle validated whole, and claims checked against real
git repositories: a stale TEST_PASS and a COMMITTED whose commit is gone."""

from datetime import timedelta
from pathlib import Path

import pytest

from baton import clock
from baton.errors import BadInput
from baton.skills.core.stage_authority import (
    RecordedCheck,
    artifact_proof,
    check_proof,
    commit_proof,
    snapshot,
    stale_line,
)
from baton.skills.core.stages import (
    DEFAULT_LIFECYCLE as L,
    DEFAULT_WORKFLOW,
    WORKFLOW_BLOCKED,
    StageRequest,
    advance,
    allowed_next,
    fall_back,
    parse_lifecycle,
    replay,
    state_from_dict,
)
from tests.workspace import git, make_repo

HAPPY = ["PLAN_READY", "IMPLEMENTED", "REVIEW_PASS", "TEST_PASS", "RETRO_COMPLETE", "COMMIT_PENDING", "COMMITTED"]


def walk(*steps, state=None, lifecycle=L):
    """Record each step (a status, or a StageRequest) from state (default: the start)."""
    state = state or lifecycle.start()
    for step in steps:
        state = advance(lifecycle, state, step if isinstance(step, StageRequest) else StageRequest(step))
    return state


def test_the_whole_lifecycle_in_order():
    state = L.start()
    assert (state.next_stage, state.resume_from, allowed_next(L, state)) == ("plan", "plan",
                                                                             ("PLAN_READY", WORKFLOW_BLOCKED))
    seen = []
    for status in HAPPY:
        state = walk(status, state=state)
        seen.append((state.status, state.next_stage))
    assert seen == [("PLAN_READY", "implement"), ("IMPLEMENTED", "code-review"), ("REVIEW_PASS", "test"),
                    ("TEST_PASS", "retrospective"), ("RETRO_COMPLETE", "commit"), ("COMMIT_PENDING", "commit"),
                    ("COMMITTED", None)]
    assert state.as_dict() == {
        "schema_version": 1, "stage": "commit", "status": "COMMITTED", "stage_result": "COMMITTED",
        "completed_stages": ["plan", "implement", "code-review", "test", "retrospective", "commit"],
        "repair_scope": None, "repair_round": 0, "repair_from": None, "next_stage": None, "resume_from": None,
        "blocker": None}
    assert allowed_next(L, state) == ()
    assert state_from_dict(L, state.as_dict()) == state


def test_an_illegal_transition_is_one_line_naming_the_allowed_next_statuses():
    state = walk("PLAN_READY", "IMPLEMENTED")
    with pytest.raises(BadInput) as refused:
        walk("TEST_PASS", state=state)
    message = str(refused.value)
    assert message == ("cannot record TEST_PASS after IMPLEMENTED: "
                       "allowed next: REVIEW_PASS, REVIEW_NEEDS_FIXES, WORKFLOW_BLOCKED")
    assert "\n" not in message
    with pytest.raises(BadInput, match="unknown status; allowed next: PLAN_READY, WORKFLOW_BLOCKED"):
        walk("SHIPPED\nIT")
    with pytest.raises(BadInput, match=r"nothing .the workflow is complete"):
        walk(*HAPPY, "PLAN_READY")


def test_commit_pending_is_a_gate_not_a_commit():
    state = walk(*HAPPY[:5])
    assert allowed_next(L, state) == ("COMMIT_PENDING", WORKFLOW_BLOCKED)
    with pytest.raises(BadInput, match="allowed next: COMMIT_PENDING"):
        walk("COMMITTED", state=state)
    pending = walk("COMMIT_PENDING", state=state)
    assert "commit" not in pending.completed_stages and allowed_next(L, pending) == ("COMMITTED", WORKFLOW_BLOCKED)


def test_a_local_result_stands_for_the_stage_passing():
    state = walk(*HAPPY[:4], StageRequest("RETRO_COMPLETE", result="NO_DOC_CHANGE"))
    assert (state.status, state.stage_result, state.next_stage) == ("RETRO_COMPLETE", "NO_DOC_CHANGE", "commit")
    with pytest.raises(BadInput, match="takes a result of DOCS_UPDATED, NO_DOC_CHANGE"):
        walk(*HAPPY[:4], StageRequest("RETRO_COMPLETE", result="MAYBE"))
    with pytest.raises(BadInput, match="TEST_PASS takes no result"):
        walk(*HAPPY[:3], StageRequest("TEST_PASS", result="DOCS_UPDATED"))


def test_review_needs_fixes_routes_implement_review_test():
    state = walk(*HAPPY[:2], "REVIEW_NEEDS_FIXES")
    assert (state.status, state.repair_round, state.repair_from, state.next_stage) == \
        ("REVIEW_NEEDS_FIXES", 1, "code-review", "implement")
    assert state.completed_stages == ("plan",), "the repair redoes implement and everything after it"
    route = [walk(*steps, state=state).next_stage for steps in (["IMPLEMENTED"], ["IMPLEMENTED", "REVIEW_PASS"])]
    assert route == ["code-review", "test"]
    # A review's fixes always come back through review, whatever scope is given.
    infra = walk(*HAPPY[:2], StageRequest("REVIEW_NEEDS_FIXES", repair_scope="test-infrastructure"), "IMPLEMENTED")
    assert infra.next_stage == "code-review"
    done = walk("IMPLEMENTED", "REVIEW_PASS", "TEST_PASS", state=state)
    assert (done.repair_scope, done.repair_from, done.next_stage) == (None, None, "retrospective")


def test_a_test_infrastructure_failure_routes_implement_test():
    state = walk(*HAPPY[:3], StageRequest("TEST_FAIL", repair_scope="test-infrastructure"))
    assert (state.status, state.repair_scope, state.next_stage, state.repair_round) == \
        ("TEST_FAIL", "test-infrastructure", "implement", 1)
    assert state.completed_stages == ("plan", "code-review"), "the review still covers the unchanged production code"
    state = walk("IMPLEMENTED", state=state)
    assert state.next_stage == "test", "test infrastructure skips review"
    state = walk("TEST_PASS", state=state)
    assert (state.repair_scope, state.repair_from, state.next_stage) == (None, None, "retrospective")
    assert state.completed_stages == ("plan", "implement", "code-review", "test")


@pytest.mark.parametrize("scope", ["production", "runtime", "schema", "dependency", "public-interface"])
def test_a_production_scoped_failure_routes_implement_review_test(scope):
    state = walk(*HAPPY[:3], StageRequest("TEST_FAIL", repair_scope=scope))
    assert state.completed_stages == ("plan",)
    state = walk("IMPLEMENTED", state=state)
    assert state.next_stage == "code-review"
    state = walk("REVIEW_PASS", state=state)
    assert (state.next_stage, state.repair_from) == ("test", "test"), "still in the repair until the test passes"
    assert walk("TEST_PASS", state=state).repair_scope is None


@pytest.mark.parametrize("request_", [StageRequest("TEST_FAIL"), StageRequest("TEST_FAIL", repair_scope="unknown")])
def test_a_failure_of_unknown_scope_blocks_instead_of_routing_into_edits(request_):
    state = walk(*HAPPY[:3], request_)
    assert (state.status, state.stage_result, state.next_stage, state.repair_round) == \
        (WORKFLOW_BLOCKED, "TEST_FAIL", "test", 0)
    assert "unknown repair scope" in state.blocker
    assert allowed_next(L, state) == ("TEST_PASS", "TEST_FAIL", "TEST_BLOCKED")
    with pytest.raises(BadInput, match="blocker's resolution"):
        walk("TEST_FAIL", state=state)
    resumed = walk(StageRequest("TEST_FAIL", repair_scope="production", resolution="it is the db schema"), state=state)
    assert (resumed.status, resumed.next_stage, resumed.blocker) == ("TEST_FAIL", "implement", None)


def test_a_misspelled_scope_is_bad_input_naming_the_scopes():
    with pytest.raises(BadInput, match="unknown repair scope prodution: use one of test-infrastructure, production"):
        walk(*HAPPY[:3], StageRequest("TEST_FAIL", repair_scope="prodution"))


def test_a_blocked_test_blocks_the_workflow_until_its_blocker_is_resolved():
    with pytest.raises(BadInput, match="TEST_BLOCKED needs the blocker"):
        walk(*HAPPY[:3], "TEST_BLOCKED")
    state = walk(*HAPPY[:3], StageRequest("TEST_BLOCKED", blocker="postgres is not running"))
    assert (state.status, state.stage_result, state.blocker, state.next_stage, state.resume_from) == \
        (WORKFLOW_BLOCKED, "TEST_BLOCKED", "postgres is not running", "test", "test")
    assert state.repair_round == 0 and state.completed_stages == ("plan", "implement", "code-review"), \
        "a blocked test edits nothing"
    with pytest.raises(BadInput, match=r"blocked \(postgres is not running\).*--resolved"):
        walk("TEST_PASS", state=state)
    assert walk(StageRequest("TEST_PASS", resolution="started postgres"), state=state).next_stage == "retrospective"


def test_a_blocked_retrospective_and_a_declared_block():
    state = walk(*HAPPY[:4], StageRequest("RETRO_BLOCKED", blocker="docs repo is read-only"))
    assert (state.status, state.stage_result, state.next_stage) == (WORKFLOW_BLOCKED, "RETRO_BLOCKED", "retrospective")
    pending = walk(*HAPPY[:6], StageRequest(WORKFLOW_BLOCKED, blocker="waiting for the user's confirmation"))
    assert (pending.status, pending.stage_result, pending.next_stage) == (WORKFLOW_BLOCKED, "COMMIT_PENDING", "commit")
    assert allowed_next(L, pending) == ("COMMITTED",), "the gate was passed before the block"
    with pytest.raises(BadInput, match="WORKFLOW_BLOCKED needs the blocker"):
        walk(*HAPPY[:2], WORKFLOW_BLOCKED)


def test_three_repair_rounds_then_the_fourth_blocks():
    state = walk(*HAPPY[:3])
    for round_ in (1, 2, 3):
        state = walk(StageRequest("TEST_FAIL", repair_scope="production"), state=state)
        assert (state.status, state.repair_round) == ("TEST_FAIL", round_)
        state = walk("IMPLEMENTED", "REVIEW_PASS", state=state)
    fourth = walk(StageRequest("TEST_FAIL", repair_scope="production", blocker="flaky migration"), state=state)
    assert (fourth.status, fourth.stage_result, fourth.repair_round, fourth.next_stage) == \
        (WORKFLOW_BLOCKED, "TEST_FAIL", 3, "implement")
    assert fourth.blocker == "repair round limit (3) reached: TEST_FAIL: flaky migration"
    # A review's repairs count too: the limit is on outer rounds, whatever asked for them.
    mixed = walk(*HAPPY[:2], "REVIEW_NEEDS_FIXES", "IMPLEMENTED", "REVIEW_NEEDS_FIXES", "IMPLEMENTED",
                 StageRequest("REVIEW_NEEDS_FIXES"), "IMPLEMENTED", "REVIEW_NEEDS_FIXES")
    assert (mixed.status, mixed.repair_round) == (WORKFLOW_BLOCKED, 3)
    # Resolved by a person, the repair continues on its route; the next failure blocks again.
    resumed = walk(StageRequest("IMPLEMENTED", resolution="split the migration"), "REVIEW_PASS", state=fourth)
    assert (resumed.next_stage, resumed.repair_from) == ("test", "test")
    assert walk(StageRequest("TEST_FAIL", repair_scope="production"), state=resumed).status == WORKFLOW_BLOCKED


def test_replay_stops_at_the_latest_safe_predecessor():
    requests = [StageRequest(s) for s in ("PLAN_READY", "IMPLEMENTED", "TEST_PASS", "REVIEW_PASS")]
    state, skipped = replay(L, requests)
    assert (state.status, state.next_stage) == ("IMPLEMENTED", "code-review")
    assert skipped[0].startswith("TEST_PASS: cannot record TEST_PASS after IMPLEMENTED")
    assert skipped[1] == "REVIEW_PASS: after a refused transition"


def test_a_claim_whose_proof_does_not_hold_sends_next_stage_back():
    state = walk(*HAPPY[:6])
    back = fall_back(L, state, unproven={"test"})
    assert (back.next_stage, back.resume_from, back.completed_stages) == ("test", "test",
                                                                          ("plan", "implement", "code-review"))
    assert allowed_next(L, back)[0] == "TEST_PASS"
    assert fall_back(L, state, unproven=set()) is state


def test_a_stored_state_is_checked_against_the_lifecycle():
    good = walk(*HAPPY[:3]).as_dict()
    for key, value, message in [("status", "SHIPPED", "status SHIPPED is not in the lifecycle"),
                                ("schema_version", 2, "schema_version must be 1"),
                                ("repair_round", 4, "repair_round must be 0 to 3"),
                                ("completed_stages", ["plan", "deploy"], "completed_stages must list"),
                                ("extra", 1, "unknown key extra")]:
        with pytest.raises(BadInput, match=message):
            state_from_dict(L, {**good, key: value})


def test_a_team_lifecycle_of_its_own():
    lifecycle = parse_lifecycle({
        "repair_stage": "build", "max_repair_rounds": 1,
        "stages": [{"name": "build", "pass": "BUILT", "resume_from": "/build"},
                   {"name": "qa", "pass": "QA_OK", "repair": "QA_FAILED", "repair_scope": "code", "authority": "check"},
                   {"name": "ship", "gate": "READY", "pass": "SHIPPED", "authority": "commit"}],
        "repair_scopes": {"code": []}})
    assert lifecycle.start().resume_from == "/build"
    assert lifecycle.authority_of("QA_OK") == "check" and lifecycle.authority_of("QA_FAILED") is None
    state = walk("BUILT", "QA_FAILED", lifecycle=lifecycle)
    assert (state.status, state.next_stage, state.resume_from) == ("QA_FAILED", "build", "/build")
    assert walk("BUILT", "QA_FAILED", state=state, lifecycle=lifecycle).status == WORKFLOW_BLOCKED, "one round only"
    assert walk("BUILT", "QA_OK", "READY", "SHIPPED", lifecycle=lifecycle).next_stage is None


def _workflow(**changes) -> dict:
    table = {**DEFAULT_WORKFLOW, "stages": [dict(s) for s in DEFAULT_WORKFLOW["stages"]]}
    for key, value in changes.items():
        if key.startswith("stage") and key[5:].isdigit():
            table["stages"][int(key[5:])].update(value)
        else:
            table[key] = value
    return table


@pytest.mark.parametrize("table, message", [
    ("not a table", r"\[workflow\] must be a table"),
    (_workflow(phases=[]), "unknown key phases"),
    (_workflow(stages=[]), "stages must be a non-empty list"),
    (_workflow(stage0={"name": "Plan"}), r"stages\[0\] name must be 1 to 40 of a-z"),
    (_workflow(stage0={"colour": "red"}), r"stages\[0\]: unknown key colour"),
    (_workflow(stage1={"pass": "PLAN_READY"}), "status PLAN_READY is used twice"),
    (_workflow(stage1={"name": "plan"}), "stage 'plan' is declared twice"),
    (_workflow(stage2={"repair": WORKFLOW_BLOCKED}), "WORKFLOW_BLOCKED is the workflow's own"),
    (_workflow(stage3={"authority": "vibes"}), "authority must be one of check, review, artifact, commit"),
    (_workflow(stage3={"pass": "test passed"}), "pass must be a status"),
    (_workflow(stage4={"resume_from": "two\nlines"}), "resume_from must be one line"),
    (_workflow(repair_stage="deploy"), "repair_stage 'deploy' is not a declared stage"),
    (_workflow(repair_stage="test"), "stage 'code-review' has a repair status but does not come after repair_stage"),
    (_workflow(repair_scopes={"production": ["deploy"]}), "repair_scopes.production must list declared stages"),
    (_workflow(repair_scopes={"unknown": []}), "is not a scope name"),
    (_workflow(repair_scopes={"production": ["implement"]}), "cannot skip the repair_stage"),
    (_workflow(stage2={"repair_scope": "style"}), "repair_scope 'style' is not in repair_scopes"),
    (_workflow(max_repair_rounds=True), "max_repair_rounds must be a whole number"),
    (_workflow(max_repair_rounds=-1), "max_repair_rounds must be a whole number"),
])
def test_a_team_lifecycle_is_validated_whole_with_one_line_errors(table, message):
    with pytest.raises(BadInput, match=message) as refused:
        parse_lifecycle(table, "/home/me/shop/baton.toml")
    assert "\n" not in str(refused.value) and str(refused.value).startswith("/home/me/shop/baton.toml: [workflow]")


# Authority, against real repositories.

def _repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "shop", None)
    (root / "src").mkdir()
    (root / "src" / "db.py").write_text("carts = {}\n")
    (root / "src" / "cart.py").write_text("items = []\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "cart")
    return root


def _check(root: Path, *, exit_status=0, observed=True) -> RecordedCheck:
    return RecordedCheck("pytest -q", exit_status, observed, clock.now(), snapshot(root))


def test_a_test_pass_goes_stale_when_a_file_changes_after_the_check(tmp_path):
    root = _repo(tmp_path)
    (root / "src" / "cart.py").write_text("items = ['dirty while tested']\n")
    check = _check(root)
    held = check_proof(root, check)
    assert held.held, held.reason
    # Committing exactly what was tested keeps the proof; Baton's own files never count.
    git(root, "commit", "-qam", "tested cart")
    (root / ".baton").mkdir()
    (root / ".baton" / "active_session.yaml").write_text("task_id: \"SHOP-1\"\n")
    assert check_proof(root, check).held, check_proof(root, check).reason

    (root / "src" / "db.py").write_text("carts = {'changed': True}\n")
    stale = check_proof(root, check)
    assert not stale.held
    assert stale_line("TEST_PASS",
                      stale).startswith("TEST_PASS claimed, but src/db.py changed after the check `pytest -q`")


@pytest.mark.parametrize("change", ["new file", "deleted", "reverted", "committed"])
def test_every_kind_of_change_after_the_check_is_seen(tmp_path, change):
    root = _repo(tmp_path)
    (root / "src" / "cart.py").write_text("items = ['dirty']\n")
    check = _check(root)
    if change == "new file":
        (root / "src" / "orders.py").write_text("orders = []\n")
    elif change == "deleted":
        (root / "src" / "db.py").unlink()
    elif change == "reverted":
        git(root, "checkout", "--", "src/cart.py")
    else:
        (root / "src" / "db.py").write_text("carts = None\n")
        git(root, "commit", "-qam", "after the check")
    proof = check_proof(root, check)
    assert not proof.held and "changed after the check" in proof.reason


def test_a_failing_or_reported_check_proves_nothing(tmp_path):
    root = _repo(tmp_path)
    assert check_proof(root, _check(root, exit_status=1)).reason == "the check `pytest -q` exited 1"
    assert check_proof(root, _check(root, exit_status=None)).reason == "the check `pytest -q` did not finish"
    assert "reported, not run by Baton" in check_proof(root, _check(root, observed=False)).reason


def test_a_check_whose_commit_is_gone_proves_nothing(tmp_path):
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "spike")
    (root / "src" / "db.py").write_text("carts = 'spike'\n")
    git(root, "commit", "-qam", "spike")
    check = _check(root)
    git(root, "checkout", "-q", "main")
    git(root, "branch", "-q", "-D", "spike")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    proof = check_proof(root, check)
    assert not proof.held and "is gone" in proof.reason


def test_a_check_without_a_snapshot_falls_back_to_modification_times(tmp_path):
    root = _repo(tmp_path)
    check = _check(root)._replace(snapshot=None, recorded_at=clock.now() + timedelta(seconds=5))
    (root / "src" / "db.py").write_text("carts = 1\n")
    assert check_proof(root, check).held, "changed before the recorded time"
    check = check._replace(recorded_at=clock.now() - timedelta(seconds=5))
    assert not check_proof(root, check).held


def test_committed_needs_the_commit_on_the_branch(tmp_path):
    root = _repo(tmp_path)
    head = git(root, "rev-parse", "HEAD").strip()
    assert commit_proof(root, head, "main").held
    git(root, "checkout", "-q", "-b", "side")
    (root / "side.txt").write_text("side\n")
    git(root, "add", "side.txt")
    git(root, "commit", "-qm", "side")
    side = git(root, "rev-parse", "HEAD").strip()
    assert commit_proof(root, side, "main").reason == f"commit {side[:12]} is not on branch main"
    assert commit_proof(root, side, "gone").reason == "branch gone does not exist"
    git(root, "checkout", "-q", "main")
    git(root, "branch", "-q", "-D", "side")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    assert commit_proof(root, side, "main").reason == f"commit {side[:12]} does not exist in this repository"
    assert not commit_proof(root, "--all", "main").held and not commit_proof(root, head, "-x").held


def test_review_and_retrospective_need_their_artifact(tmp_path):
    root = _repo(tmp_path)
    assert artifact_proof(root, "docs/review.md", "review artifact").reason == \
        "the review artifact docs/review.md does not exist"
    (root / "docs").mkdir()
    (root / "docs" / "review.md").write_text("")
    assert artifact_proof(root, "docs/review.md").reason == "the artifact docs/review.md is empty"
    (root / "docs" / "review.md").write_text("PASS\n")
    assert artifact_proof(root, "docs/review.md").held
    assert artifact_proof(root, "docs").reason == "the artifact docs is not a regular file"
    (tmp_path / "outside.md").write_text("PASS\n")
    (root / "docs" / "link.md").symlink_to(tmp_path / "outside.md")
    assert "outside the worktree" in artifact_proof(root, "docs/link.md").reason
    assert "outside the worktree" in artifact_proof(root, "../outside.md").reason
