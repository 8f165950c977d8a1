"""Every route of the default lifecycle through the command line (`baton stage ...`, `baton
resume --json`), with the registry embedded (SQLite) and on the PostgreSQL server: a review
that needs fixes, a test failure of each repair scope, a failure of unknown scope and a
blocked stage (WORKFLOW_BLOCKED, left only with the blocker's resolution), and the repair
round limit, the fourth repair blocking, walked on to COMMITTED; and a recorded state the
team's lifecycle no longer accepts, reconstructed to its latest safe predecessor."""

import json
from pathlib import Path

import pytest

from tests.workspace import git

TASK = "OMN-7"
PRODUCTION_LIKE = ["production", "runtime", "schema", "dependency", "public-interface"]


@pytest.fixture
def ticket(registry_home, worktrees, cli) -> Path:
    """TASK bound in a worktree holding a review, a retrospective and a source file."""
    main, _ = worktrees
    assert cli(main, "bind", TASK)[0] == 0
    (main / "review.md").write_text("approved\n")
    (main / "retro.md").write_text("nothing to document\n")
    (main / "app.py").write_text("print('shop')\n")
    return main


def stage(cli, cwd: Path, *args: str) -> dict:
    code, out, err = cli(cwd, "stage", *args, "--json")
    assert code == 0, err
    return json.loads(out)["state"]


def refused(cli, cwd: Path, *args: str) -> str:
    """The one line a refused transition answers (exit 2)."""
    code, out, err = cli(cwd, "stage", *args)
    assert (code, out, err.count("\n")) == (2, "", 1), (code, out, err)
    return err


def workflow(cli, cwd: Path) -> dict:
    code, out, err = cli(cwd, "resume", TASK, "--json")
    assert code == 0, err
    return json.loads(out)["workflow"]


def walk(cli, cwd: Path, *steps: tuple[tuple[str, ...], str | None]) -> dict:
    """Record each step's transition and check the next stage it leads to, in the answer
    and in what resume shows from the registry."""
    state: dict = {}
    for args, next_stage in steps:
        state = stage(cli, cwd, *args)
        assert state["next_stage"] == next_stage, (args, state)
    shown = workflow(cli, cwd)
    assert shown["state"] == state and shown["next_stage"] == state["next_stage"] and not shown["fell_back"]
    return state


PLANNED = (("PLAN_READY",), "implement")
IMPLEMENTED = (("IMPLEMENTED",), "code-review")
REVIEWED = (("REVIEW_PASS", "--evidence", "review.md"), "test")
TESTED = (("TEST_PASS", "--check", "git --version"), "retrospective")
RETRO = (("RETRO_COMPLETE", "--evidence", "retro.md", "--result", "NO_DOC_CHANGE"), "commit")
PENDING = (("COMMIT_PENDING",), "commit")


def commit_and_finish(cli, cwd: Path) -> dict:
    walk(cli, cwd, RETRO, PENDING)
    git(cwd, "add", "review.md", "retro.md", "app.py")
    git(cwd, "commit", "-q", "-m", TASK)
    done = walk(cli, cwd, (("COMMITTED",), None))
    shown = workflow(cli, cwd)
    assert [p["stage"] for p in shown["completed"] if p["held"]] == [
        "plan", "implement", "code-review", "test", "retrospective", "commit"]
    assert shown["next_stage"] is None and shown["resume_from"] is None
    return done


def test_review_needs_fixes_routes_implement_review_test(ticket, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED)
    fixes = walk(cli, ticket, (("REVIEW_NEEDS_FIXES",), "implement"))
    assert (fixes["status"], fixes["repair_scope"], fixes["repair_round"], fixes["repair_from"]) == (
        "REVIEW_NEEDS_FIXES", "production", 1, "code-review")
    assert fixes["completed_stages"] == ["plan"] and fixes["resume_from"] == "implement"
    assert refused(cli, ticket, "TEST_PASS", "--check", "git --version").endswith(
        "cannot record TEST_PASS after REVIEW_NEEDS_FIXES: allowed next: IMPLEMENTED, WORKFLOW_BLOCKED\n")
    # The fix goes back through the review before the test.
    walk(cli, ticket, IMPLEMENTED)
    assert refused(cli, ticket, "TEST_PASS", "--check", "git --version").endswith(
        "allowed next: REVIEW_PASS, REVIEW_NEEDS_FIXES, WORKFLOW_BLOCKED\n")
    reviewed = walk(cli, ticket, REVIEWED, TESTED)
    assert (reviewed["repair_scope"], reviewed["repair_from"], reviewed["repair_round"]) == (None, None, 1)
    assert commit_and_finish(cli, ticket)["repair_round"] == 1


def test_a_test_infrastructure_failure_routes_implement_test(ticket, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED)
    failed = walk(cli, ticket, (("TEST_FAIL", "--repair-scope", "test-infrastructure"), "implement"))
    assert (failed["repair_scope"], failed["repair_round"], failed["completed_stages"]) == (
        "test-infrastructure", 1, ["plan", "code-review"]), "the review still holds: it is not redone"
    # The repair skips the review: implement, then the test.
    walk(cli, ticket, (("IMPLEMENTED",), "test"))
    assert refused(cli, ticket, "REVIEW_PASS", "--evidence", "review.md").endswith(
        "cannot record REVIEW_PASS after IMPLEMENTED: allowed next: TEST_PASS, TEST_FAIL, TEST_BLOCKED, "
        "WORKFLOW_BLOCKED\n")
    tested = walk(cli, ticket, TESTED)
    assert tested["completed_stages"] == ["plan", "implement", "code-review", "test"]
    assert tested["repair_scope"] is None and tested["repair_from"] is None
    commit_and_finish(cli, ticket)


@pytest.mark.parametrize("scope", PRODUCTION_LIKE)
def test_a_production_like_failure_routes_implement_review_test(ticket, cli, scope):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED)
    failed = walk(cli, ticket, (("TEST_FAIL", "--repair-scope", scope), "implement"))
    assert (failed["repair_scope"], failed["repair_round"], failed["completed_stages"]) == (scope, 1, ["plan"]), \
        "the review is redone after a change to the product"
    walk(cli, ticket, IMPLEMENTED)
    assert refused(cli, ticket, "TEST_PASS", "--check", "git --version").endswith(
        "cannot record TEST_PASS after IMPLEMENTED: allowed next: REVIEW_PASS, REVIEW_NEEDS_FIXES, WORKFLOW_BLOCKED\n")
    walk(cli, ticket, REVIEWED, TESTED)
    commit_and_finish(cli, ticket)


def test_a_misspelled_scope_is_refused_naming_the_scopes(ticket, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED)
    assert refused(cli, ticket, "TEST_FAIL", "--repair-scope", "prod").endswith(
        "unknown repair scope prod: use one of test-infrastructure, production, runtime, schema, dependency, "
        "public-interface, unknown\n")
    assert workflow(cli, ticket)["state"]["status"] == "REVIEW_PASS", "nothing was recorded"


@pytest.mark.parametrize("scope_args", [(), ("--repair-scope", "unknown")], ids=["no-scope", "unknown"])
def test_a_failure_of_unknown_scope_blocks_until_the_blocker_is_resolved(ticket, cli, scope_args):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED)
    blocked = walk(cli, ticket, (("TEST_FAIL", *scope_args), "test"))
    assert (blocked["status"], blocked["stage_result"], blocked["repair_round"]) == (
        "WORKFLOW_BLOCKED", "TEST_FAIL", 0), "no repair round starts: nothing routes into edits"
    assert blocked["blocker"].startswith("TEST_FAIL of unknown repair scope: classify it")
    assert blocked["completed_stages"] == ["plan", "implement", "code-review"]
    # No speculative edit: implementing is refused, and so is anything without the resolution.
    assert refused(cli, ticket, "IMPLEMENTED").endswith(
        "cannot record IMPLEMENTED while WORKFLOW_BLOCKED after TEST_FAIL: allowed next: TEST_PASS, TEST_FAIL, "
        "TEST_BLOCKED\n")
    assert "record TEST_FAIL with the blocker's resolution (--resolved TEXT)" in refused(
        cli, ticket, "TEST_FAIL", "--repair-scope", "schema")
    _, out, _ = cli(ticket, "resume", TASK)
    assert "**Status:** WORKFLOW_BLOCKED (after TEST_FAIL)" in out and "**Blocker:** TEST_FAIL of unknown" in out
    assert "**Next stage:** test | **Resume from:** `test`" in out
    # Classified: the repair routes as its scope says.
    routed = walk(cli, ticket, (("TEST_FAIL", "--repair-scope", "schema", "--resolved", "a migration is missing"),
                                "implement"))
    assert (routed["status"], routed["repair_scope"], routed["repair_round"], routed["blocker"]) == (
        "TEST_FAIL", "schema", 1, None)
    walk(cli, ticket, IMPLEMENTED, REVIEWED, TESTED)
    commit_and_finish(cli, ticket)


def test_a_blocked_test_blocks_the_workflow_until_its_blocker_is_resolved(ticket, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED)
    assert refused(cli, ticket, "TEST_BLOCKED").endswith(
        "TEST_BLOCKED needs the blocker that stops the work (--blocker TEXT)\n")
    blocked = walk(cli, ticket, (("TEST_BLOCKED", "--blocker", "the CI runner is down"), "test"))
    assert (blocked["status"], blocked["stage_result"], blocked["blocker"], blocked["resume_from"]) == (
        "WORKFLOW_BLOCKED", "TEST_BLOCKED", "the CI runner is down", "test")
    assert refused(cli, ticket, "TEST_PASS", "--check", "git --version").endswith(
        "the workflow is blocked (the CI runner is down): record TEST_PASS with the blocker's resolution "
        "(--resolved TEXT)\n")
    assert refused(cli, ticket, "IMPLEMENTED").endswith("allowed next: TEST_PASS, TEST_FAIL, TEST_BLOCKED\n")
    shown = workflow(cli, ticket)
    assert (shown["next_stage"], shown["resume_from"]) == ("test", "test")
    resumed = walk(cli, ticket, (("TEST_PASS", "--check", "git --version", "--resolved", "the runner is back"),
                                 "retrospective"))
    assert (resumed["status"], resumed["blocker"]) == ("TEST_PASS", None)
    # A retrospective blocks the same way, and a block may be declared at any stage.
    blocked = walk(cli, ticket, (("RETRO_BLOCKED", "--blocker", "the docs site is frozen"), "retrospective"))
    assert (blocked["status"], blocked["stage_result"]) == ("WORKFLOW_BLOCKED", "RETRO_BLOCKED")
    walk(cli, ticket, (("RETRO_COMPLETE", "--evidence", "retro.md", "--resolved", "thawed"), "commit"))
    declared = walk(cli, ticket, (("WORKFLOW_BLOCKED", "--blocker", "waiting for the release branch"), "commit"))
    assert (declared["status"], declared["stage_result"]) == ("WORKFLOW_BLOCKED", "RETRO_COMPLETE")
    walk(cli, ticket, (("COMMIT_PENDING", "--resolved", "the release branch is cut"), "commit"))
    git(ticket, "add", "review.md", "retro.md", "app.py")
    git(ticket, "commit", "-q", "-m", TASK)
    assert walk(cli, ticket, (("COMMITTED",), None))["status"] == "COMMITTED"


def test_three_repair_rounds_then_the_fourth_blocks(ticket, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED)
    # Rounds count every outer repair, whichever stage asked for it.
    assert walk(cli, ticket, (("REVIEW_NEEDS_FIXES",), "implement"))["repair_round"] == 1
    walk(cli, ticket, IMPLEMENTED, REVIEWED)
    assert walk(cli, ticket, (("TEST_FAIL", "--repair-scope", "runtime"), "implement"))["repair_round"] == 2
    walk(cli, ticket, IMPLEMENTED, REVIEWED)
    assert walk(cli, ticket, (("TEST_FAIL", "--repair-scope", "test-infrastructure"), "implement"))[
        "repair_round"] == 3
    walk(cli, ticket, (("IMPLEMENTED",), "test"))
    fourth = walk(cli, ticket, (("TEST_FAIL", "--repair-scope", "test-infrastructure",
                                 "--blocker", "flaky fixture again"), "implement"))
    assert (fourth["status"], fourth["stage_result"], fourth["repair_round"], fourth["blocker"]) == (
        "WORKFLOW_BLOCKED", "TEST_FAIL", 3, "repair round limit (3) reached: TEST_FAIL: flaky fixture again")
    assert "record IMPLEMENTED with the blocker's resolution (--resolved TEXT)" in refused(cli, ticket, "IMPLEMENTED")
    _, out, _ = cli(ticket, "resume", TASK)
    assert "**Status:** WORKFLOW_BLOCKED (after TEST_FAIL) | **Repair round:** 3" in out
    assert "**Blocker:** repair round limit (3) reached: TEST_FAIL: flaky fixture again [reported]" in out
    # Resolved by a person, the workflow goes on where the repair would have: implement, test.
    walk(cli, ticket, (("IMPLEMENTED", "--resolved", "the fixture is rewritten; the lead agreed"), "test"), TESTED)
    assert commit_and_finish(cli, ticket)["repair_round"] == 3


TEAM_LIFECYCLE = """
[workflow]
repair_stage = "implement"
stages = [
  { name = "plan", pass = "PLAN_READY" },
  { name = "implement", pass = "IMPLEMENTED" },
  { name = "test", pass = "TEST_PASS", repair = "TEST_FAIL", authority = "check" },
  { name = "commit", gate = "COMMIT_PENDING", pass = "COMMITTED", authority = "commit" },
]
[workflow.repair_scopes]
production = []
"""


def test_a_state_the_lifecycle_no_longer_accepts_is_reconstructed_and_said_so(ticket, registry_home, cli):
    walk(cli, ticket, PLANNED, IMPLEMENTED, REVIEWED, TESTED)
    (registry_home / "baton.toml").write_text(TEAM_LIFECYCLE)  # the team drops the code review
    shown = workflow(cli, ticket)
    assert shown["notes"][0].startswith("the recorded state does not fit the lifecycle (workflow state: "
                                        "completed_stages must list stages of the lifecycle); reconstructed from 2 "
                                        "of 4 recorded transitions")
    assert shown["notes"][1].startswith("not replayed: REVIEW_PASS: cannot record REVIEW_PASS after IMPLEMENTED")
    assert (shown["next_stage"], shown["resume_from"]) == ("test", "test"), "the latest safe predecessor: implemented"
    _, out, _ = cli(ticket, "resume", TASK)
    assert "- note: the recorded state does not fit the lifecycle" in out
    code, out, err = cli(ticket, "stage", "TEST_PASS", "--check", "git --version")
    assert code == 0 and out.startswith("note: the recorded state does not fit the lifecycle"), err
    assert out.endswith(f"{TASK}: TEST_PASS; next: commit (commit)\n")
    assert workflow(cli, ticket)["notes"] == [], "recorded again in the team's lifecycle"
