"""The least-privilege grant of docs/backends.md's "Deploying for a team", run as written against the
test server: a team's role that owns nothing runs Baton's writes, reads, gc and redaction
on tables another role created."""

import json
import re

import pytest

from tests.workspace import ROOT


def documented_grant() -> str:
    backends = (ROOT / "docs" / "backends.md").read_text()
    section = backends[backends.index("\n## Deploying for a team\n"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


@pytest.mark.servers
def test_a_team_role_with_the_documented_grant_runs_baton(postgres_url, home, worktrees, cli, monkeypatch):
    import psycopg

    main, _ = worktrees
    monkeypatch.setenv("BATON_DATABASE_URL", postgres_url)
    assert cli(main, "list")[0] == 0  # the owner's role creates the tables
    database = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS team_shop")
        conn.execute(documented_grant().replace("'...'", "'team-password'").replace(" baton ", f" {database} "))
    try:
        team_url = postgres_url.replace("postgres@", "team_shop:team-password@", 1)
        assert "team_shop" in team_url
        monkeypatch.setenv("BATON_DATABASE_URL", team_url)
        for args in (("bind", "SHOP-1"), ("decide", "keep carts in PostgreSQL"), ("claim", "src/db/**"),
                     ("check", "src/db/models.py"), ("end", "--status", "completed"), ("gc",), ("redact", "--scan")):
            code, _, err = cli(main, *args)
            assert code == 0 and (args[0] != "check" or not err), (args, err)  # a check that cannot read warns
        resumed = json.loads(cli(main, "resume", "SHOP-1", "--json")[1])
        assert resumed["stores"]["registry"] == "ok" and resumed["session"]["decisions"]
        with psycopg.connect(team_url) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE intruder (x int)")  # least privilege: it creates nothing
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("DROP OWNED BY team_shop; DROP ROLE team_shop")
