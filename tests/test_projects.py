"""Projects are the unit of isolation: two teams on one data home (the embedded default) and
on one set of servers cannot see, change or end each other's tickets through the CLI, the
agent's hooks or the MCP tools, and the same ticket id in two repositories is two sessions.
On PostgreSQL the database itself holds the line (row-level security)."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest

from tests.stores import ticket_vectors, unscope_recall
from tests.workspace import git, make_repo

SHOP = "github.com/acme/shop"
OTHER = "github.com/rival/shop"
FIXTURES = Path(__file__).parent / "fixtures" / "claude_hooks"


@pytest.fixture
def teams(tmp_path) -> tuple[Path, Path]:
    """Two teams' repositories: the same layout, different origins (so different projects)."""
    return (make_repo(tmp_path / "acme", f"git@github.com:{SHOP.split('/', 1)[1]}.git"),
            make_repo(tmp_path / "rival", f"https://{OTHER}.git"))


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))


def as_json(result: tuple[int, str, str]):
    code, out, err = result
    assert code == 0, err
    return json.loads(out)


def hook(name: str, fixture: str, cwd: Path, **tool_input) -> None:
    """Run `baton hook name` in-process with Claude Code's documented payload, in cwd."""
    from baton.skills.frontends.hooks import run_hook

    event = json.loads((FIXTURES / f"{fixture}.json").read_text())
    event["cwd"], event["session_id"] = str(cwd), f"agent-{cwd.name}"
    event.setdefault("tool_input", {}).update(tool_input)
    assert run_hook(name, io.StringIO(json.dumps(event)), io.StringIO()) == 0


def mcp(monkeypatch, cwd: Path, tool: str, **arguments) -> dict:
    """One MCP tool called in-process, served from cwd, as `baton mcp` started there would."""
    from baton.skills.frontends import mcp_server
    from baton.skills.frontends.cli import COMMANDS

    monkeypatch.chdir(cwd)
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.setattr(mcp_server, "_scope", mcp_server.Scope(cwd, commands=COMMANDS))
    result = mcp_server._call_tool({"name": tool, "arguments": arguments})
    assert result is not None and not result["isError"], result
    return json.loads(result["content"][0]["text"])


def test_two_teams_cannot_see_change_or_end_each_others_tickets(any_home, teams, cli, monkeypatch):
    acme, rival = teams
    # The first team works on SHOP-1, through the CLI and its agent's hooks.
    assert cli(acme, "bind", "SHOP-1", "--agent", "ana")[0] == 0
    assert cli(acme, "decide", "Rotate the payment key weekly", "--context", "acme only")[0] == 0
    assert cli(acme, "update", "--next", "write the acme migration")[0] == 0
    hook("post-tool-use", "post_tool_use_edit", acme, file_path=str(acme / "src" / "db.py"))

    # The second team sees none of it: not in its list, signals or resume.
    assert as_json(cli(rival, "list", "--json", "--all")) == []
    assert as_json(cli(rival, "signals", "--json")) == []
    assert mcp(monkeypatch, rival, "list_sessions", include_ended=True) == []
    assert mcp(monkeypatch, rival, "signals_since", task_id="SHOP-1") == []

    # Its own SHOP-1 is a session of its own: bound by MCP, touched by its hook, ended by the CLI.
    assert mcp(monkeypatch, rival, "bind_task", task_id="SHOP-1", agent="rival-bot")["task_id"] == "SHOP-1"
    resumed = as_json(cli(rival, "resume", "SHOP-1", "--json"))["session"]
    assert resumed["repo"] == OTHER and resumed["decisions"] == [] and resumed["next_action"] is None
    hook("post-tool-use", "post_tool_use_edit", rival, file_path=str(rival / "src" / "db.py"))
    mcp(monkeypatch, rival, "record_decision", text="Rival decision", task_id="SHOP-1")
    assert cli(rival, "update", "--task", "SHOP-1", "--next", "rival next step")[0] == 0
    assert cli(rival, "end", "SHOP-1")[0] == 0
    assert mcp(monkeypatch, rival, "end_session", task_id="SHOP-1", status="stalled")

    # The first team's SHOP-1 is as it left it: active, its repository, worktree, agent,
    # next action and decisions its own, and no conflict with the other team's db.py.
    mine = as_json(cli(acme, "resume", "SHOP-1", "--json"))
    session = mine["session"]
    assert session["status"] == "active", session
    assert (session["repo"], session["worktree_path"], session["agent"]) == (SHOP, str(acme), "ana")
    assert session["next_action"] == "write the acme migration"
    assert [d["text"] for d in session["decisions"]] == ["Rotate the payment key weekly"]
    assert session["files_touched"] == ["src/db.py"]
    assert mine["conflicts"] == []
    assert not [s for s in mine["signals"] if s["repo"] != SHOP]
    listed = as_json(cli(acme, "list", "--json"))
    assert [(line["task_id"], line["status"], line["conflicts_with"]) for line in listed] == [("SHOP-1", "active", [])]
    assert [s["task_id"] for s in mcp(monkeypatch, acme, "list_sessions")] == ["SHOP-1"]

    # The second team's own view holds its ended ticket only.
    theirs = as_json(cli(rival, "list", "--json", "--all"))
    assert [(line["task_id"], line["status"], line["repo"]) for line in theirs] == [("SHOP-1", "stalled", OTHER)]

    # The lead's view across projects shows both, each with its project.
    every = as_json(cli(acme, "list", "--json", "--all", "--all-projects"))
    assert sorted((line["project"], line["task_id"], line["status"]) for line in every) == [
        (SHOP, "SHOP-1", "active"), (OTHER, "SHOP-1", "stalled")]
    # And --project reads another project explicitly, never by accident.
    assert [line["status"] for line in as_json(cli(acme, "--project", OTHER, "list", "--json", "--all"))] == ["stalled"]


def test_explicit_projects_split_one_repository(any_home, worktrees, cli, monkeypatch):
    """Two projects named explicitly over one repository: the same file touched by both is
    no conflict, and neither ticket is visible from the other project."""
    main, second = worktrees
    assert cli(main, "--project", "team-a", "bind", "OMN-1")[0] == 0
    assert cli(main, "--project", "team-a", "touch", "src/db.py")[0] == 0
    monkeypatch.setenv("BATON_PROJECT", "team-b")
    assert cli(second, "bind", "OMN-2")[0] == 0
    hook("post-tool-use", "post_tool_use_write", second, file_path=str(second / "src" / "db.py"))
    listed = as_json(cli(second, "list", "--json"))
    assert [(line["task_id"], line["conflicts_with"], line["conflicting_tickets"], line["conflicting_files"])
            for line in listed] == [("OMN-2", [], 0, 0)], "the graph counts no ticket of another project"
    assert as_json(cli(second, "signals", "--json", "--task", "OMN-1")) == []
    monkeypatch.delenv("BATON_PROJECT")
    assert [line["task_id"] for line in as_json(cli(main, "--project", "team-a", "list", "--json"))] == ["OMN-1"]
    assert as_json(cli(main, "list", "--json")) == []  # the repository's own project has nothing


def decide_in(cli, worktree: Path, decisions: list[tuple[str, str, str]]) -> None:
    """(ticket, decision, context) recorded in worktree's project, each ticket bound in turn."""
    for task_id, text, context in decisions:
        assert cli(worktree, "bind", task_id)[0] == 0
        assert cli(worktree, "decide", text, "--context", context)[0] == 0


# Each team's two tickets: SHOP-1 with the same decision text in both projects (one point
# before projects, so one team read the other's context), SHOP-2 with its own.
ACME_DECISIONS = [("SHOP-2", "Store cart rows in PostgreSQL tables", "acme"),
                  ("SHOP-1", "Keep carts in PostgreSQL", "acme")]
RIVAL_DECISIONS = [("SHOP-2", "Persist carts in a PostgreSQL database", "rival"),
                   ("SHOP-1", "Keep carts in PostgreSQL", "rival")]


def test_recall_and_related_decisions_are_of_the_project(any_home, teams, cli):
    """The same ticket id with different decisions in two projects: `baton recall` and the
    related decisions of `baton resume` show each team its own only."""
    acme, rival = teams
    decide_in(cli, acme, ACME_DECISIONS)
    decide_in(cli, rival, RIVAL_DECISIONS)
    assert cli(acme, "index")[0] == 0  # one queue, one indexer for the data home: both projects
    for worktree, decisions in ((acme, ACME_DECISIONS), (rival, RIVAL_DECISIONS)):
        found = as_json(cli(worktree, "recall", "carts in PostgreSQL", "--json", "--limit", "10"))
        assert sorted((hit["task_id"], hit["text"], hit["context"]) for hit in found) == sorted(decisions)
        related = as_json(cli(worktree, "resume", "SHOP-1", "--json"))["related_decisions"]
        assert [(r["task_id"], r["text"]) for r in related] == [decisions[0][:2]]


def test_recall_indexed_before_projects_is_healed_in_each_project(home, teams, cli):
    """A data home from before projects: points without a project, one of them the point
    both teams' SHOP-1 decisions shared, and a queue entry without one. None is read; the
    indexer stores each decision again in its project and embeds it (such a point predates
    the current embedding recipe too)."""
    from baton.recall.embedded import EmbeddedDecisionIndex
    from baton.recall.queue import EmbeddingQueue
    from baton.recall.wire import unscoped_point_id
    from baton.sqlite import write_transaction

    acme, rival = teams
    decide_in(cli, acme, ACME_DECISIONS)
    decide_in(cli, rival, RIVAL_DECISIONS[1:])
    assert cli(acme, "index")[0] == 0
    decide_in(cli, rival, RIVAL_DECISIONS[:1])  # queued, not indexed yet

    kept = unscope_recall(home)
    queue = EmbeddingQueue(home / "recall", timeout=5)
    queue_conn = queue.conn()
    with write_transaction(queue_conn):
        (point_id, payload), = queue_conn.execute("SELECT point_id, payload FROM queued").fetchall()
        fields = json.loads(payload)
        del fields["project"]
        queue_conn.execute("UPDATE queued SET point_id = ?, payload = ?",
                           (str(unscoped_point_id(fields["task_id"], fields["text"])), json.dumps(fields)))
    queue.close()
    assert len(kept) == 2  # SHOP-1 of both teams was one point

    # Nothing from before projects is read, by either team.
    index = EmbeddedDecisionIndex(home / "recall", timeout=5)
    assert index.unscoped_count() == 2 and index.count(SHOP) == index.count(OTHER) == 0
    assert as_json(cli(rival, "resume", "SHOP-1", "--json"))["related_decisions"] == []

    # The indexer heals: rival's SHOP-1 (its context is not the shared point's) and its
    # queued SHOP-2 are embedded, and acme's two as well: a point stored before projects
    # predates the context-first text too (recall/base.py), so its vector is made anew.
    code, out, _ = cli(acme, "index")
    assert code == 0 and out.startswith("Indexed 4 decisions"), out
    assert (index.unscoped_count(), index.count(SHOP), index.count(OTHER)) == (0, 2, 2)
    for worktree, decisions in ((acme, ACME_DECISIONS), (rival, RIVAL_DECISIONS)):
        found = as_json(cli(worktree, "recall", "carts in PostgreSQL", "--json", "--limit", "10"))
        assert sorted((hit["task_id"], hit["text"], hit["context"]) for hit in found) == sorted(decisions)
    index.close()


def decision_point(project: str, task_id: str, text: str):
    from baton.recall.wire import decision_point_id

    return decision_point_id(project, task_id, text)


def test_a_bad_project_is_bad_input(home, worktrees, cli):
    main, _ = worktrees
    code, _, err = cli(main, "--project", "*", "list")
    assert code == 2 and "invalid project" in err


@pytest.mark.servers
def test_row_level_security_holds_for_a_team_role(postgres_url, monkeypatch, home, teams, cli):
    """Connected as a team's role, a statement that names no project still sees, changes and
    removes only the rows of the project its transaction set, and the tables' owner is held
    too (FORCE ROW LEVEL SECURITY)."""
    import psycopg

    acme, rival = teams
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    monkeypatch.setenv("BATON_BACKGROUND_DELIVERY", "off")
    for repo, ticket in ((acme, "SHOP-1"), (rival, "SHOP-1"), (rival, "SHOP-2")):
        assert cli(repo, "bind", ticket)[0] == 0
        assert cli(repo, "deliver")[0] == 0
    # Roles belong to the cluster, which other tests share: names of this test's own, dropped after it.
    suffix = uuid.uuid4().hex[:8]
    team, owner = f"team_rls_{suffix}", f"owner_rls_{suffix}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {team} LOGIN")
        admin.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON baton_events, baton_sessions, baton_session_files, "
                      f"baton_lease_anchors, baton_pruned, baton_schema_migrations TO {team}")
        admin.execute(f"CREATE ROLE {owner} LOGIN")
        for table in ("baton_events", "baton_sessions", "baton_session_files", "baton_lease_anchors", "baton_pruned"):
            admin.execute(f"ALTER TABLE {table} OWNER TO {owner}")
    try:
        _rows_stay_in_their_project(postgres_url, (team, owner))
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            for role in (team, owner):
                admin.execute(f"DROP OWNED BY {role}")
                admin.execute(f"DROP ROLE {role}")


def _rows_stay_in_their_project(postgres_url: str, roles: tuple[str, str]) -> None:
    import psycopg

    for role in roles:
        with psycopg.connect(postgres_url.replace("postgres@", f"{role}@", 1)) as conn:
            def count(project: str | None, *, conn=conn) -> int:
                with conn.transaction():
                    if project is not None:
                        conn.execute("SELECT set_config('baton.project', %s, true)", (project,))
                    return conn.execute("SELECT count(*) FROM baton_sessions").fetchone()[0]

            assert (count(SHOP), count(OTHER), count(None)) == (1, 2, 0), role
            with conn.transaction():
                conn.execute("SELECT set_config('baton.project', %s, true)", (OTHER,))
                assert conn.execute("UPDATE baton_sessions SET body = body WHERE task_id = 'SHOP-1' "
                                    "AND project = %s", (SHOP,)).rowcount == 0
                assert conn.execute("DELETE FROM baton_events WHERE project = %s", (SHOP,)).rowcount == 0
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("INSERT INTO baton_pruned (project, task_id, through) VALUES (%s, 'X', now())",
                                 (SHOP,))
            with conn.transaction():  # `*` reads every project, and writes none
                conn.execute("SELECT set_config('baton.project', '*', true)")
                assert conn.execute("SELECT count(*) FROM baton_sessions").fetchone()[0] == 3
                assert conn.execute("UPDATE baton_sessions SET body = body").rowcount == 0
            assert count(SHOP) == 1, role


def test_existing_rows_move_to_their_repositorys_project(tmp_path):
    """An embedded registry and signal log of a Baton before projects: each session, its
    events and its signals move to the project of the repository it records."""
    import sqlite3

    from baton.registry.sqlite import MIGRATIONS as REGISTRY, SqliteSessionStore
    from baton.signals.sqlite import MIGRATIONS as SIGNALS, SqliteSignalBus
    from baton.sqlite import APPLICATION_ID

    session = {"task_id": "SHOP-1", "repo": SHOP, "created_at": "2026-11-30T10:00:00+00:00",
               "last_activity": "2026-11-30T10:00:00+00:00"}
    bound = {"event_id": "6f1c2a3e-4b5d-5e6f-8a9b-0c1d2e3f4a5b", "task_id": "SHOP-1", "session_id": "s",
             "at": "2026-11-30T10:00:00+00:00", "type": "bound", "agent": None, "repo": SHOP,
             "worktree_path": "/w", "branch": None, "reopens": False}
    signal = {"signal_id": "7f1c2a3e-4b5d-5e6f-8a9b-0c1d2e3f4a5b", "signal_type": "ticket_claimed",
              "task_id": "SHOP-1", "session_id": "s", "repo": SHOP, "emitted_at": "2026-11-30T10:00:00+00:00",
              "payload": {"file_paths": [], "related_task_id": None, "pr_number": None, "phase": None, "reason": ""}}
    for name, migrations, rows in (
            ("registry.db", REGISTRY[:2], [
                ("INSERT INTO sessions VALUES (?, 'active', ?, ?)",
                 ("SHOP-1", session["last_activity"], json.dumps(session))),
                ("INSERT INTO events VALUES (?, ?, ?, ?, ?, 1)",
                 (bound["event_id"], "SHOP-1", bound["at"], "bound", json.dumps(bound)))]),
            ("signals.db", SIGNALS[:1], [
                ("INSERT INTO signals (signal_id, signal_type, task_id, emitted_at, body) VALUES (?, ?, ?, ?, ?)",
                 (signal["signal_id"], "ticket_claimed", "SHOP-1", signal["emitted_at"], json.dumps(signal))),
                ("INSERT INTO signal_subjects VALUES ('task:SHOP-1', ?, 1)", (signal["emitted_at"],))])):
        with sqlite3.connect(tmp_path / name) as conn:
            for block in migrations:
                conn.executescript(block)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {len(migrations)}")
            for statement, values in rows:
                conn.execute(statement, values)
        conn.close()
    for project, expected in ((SHOP, 1), (OTHER, 0)):
        registry = SqliteSessionStore(tmp_path / "registry.db", timeout=2, project=project)
        bus = SqliteSignalBus(tmp_path / "signals.db", timeout=2, project=project)
        try:
            assert len(registry.list_sessions().value) == expected
            assert len(registry.events("SHOP-1").value) == expected
            assert len(bus.concerning(["task:SHOP-1"], after=None, limit=10).value) == expected
        finally:
            registry.close()
            bus.close()


def test_retention_removes_a_tickets_decisions_in_its_project_only(home, teams, cli):
    """A gc in one project forgets its pruned ticket's decisions, queued and indexed, and
    leaves the same ticket id's in another project."""
    from datetime import timedelta

    from baton import clock
    from baton.recall.queue import EmbeddingQueue
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.gc import collect_garbage

    acme, rival = teams
    for worktree in (acme, rival):
        decide_in(cli, worktree, [("OLD-1", "Refunds go through the ledger", worktree.name)])
        assert cli(worktree, "end", "--status", "completed")[0] == 0
    assert cli(acme, "index")[0] == 0
    decide_in(cli, rival, [("OLD-1", "Queued, not indexed yet", "rival")])
    assert cli(rival, "end", "--status", "completed")[0] == 0
    stores = Stores(Settings.from_env(), project=SHOP, projection=apply_events)
    try:
        report = collect_garbage(stores, at=clock.now() + timedelta(days=91))
        assert report.sessions == ["OLD-1"] and report.decisions == 1 and not report.warnings
        index = stores.decision_index()
        assert ticket_vectors(index, SHOP, "OLD-1") == {}
        assert len(ticket_vectors(index, OTHER, "OLD-1")) == 1
        index.close()
    finally:
        stores.close()
    assert EmbeddingQueue(home / "recall", timeout=5).count() == 1, "the other project's queued decision stays"


def test_the_guard_reads_the_project_given(home, worktrees, cli):
    """`baton --project NAME guard` checks the staged files against that project's tickets,
    as every other command does, and never against another project's."""
    main, second = worktrees
    assert cli(second, "--project", "team-a", "bind", "OMN-2")[0] == 0
    assert cli(second, "--project", "team-a", "touch", "src/db.py")[0] == 0
    assert cli(main, "--project", "team-a", "bind", "OMN-1")[0] == 0
    (main / "src").mkdir(exist_ok=True)
    (main / "src" / "db.py").write_text("changed\n")
    git(main, "add", "src/db.py")
    code, out, err = cli(main, "--project", "team-a", "guard")
    assert code == 0 and "src/db.py also touched by OMN-2" in out + err
    code, out, err = cli(main, "--project", "team-b", "guard")
    assert code == 0 and "OMN-2" not in out + err
