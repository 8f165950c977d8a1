"""`baton redact --scan` rewrites secrets stored before redaction (here: written with the
redactor switched off) in a new event: afterwards no store, file or output holds them, a
second scan finds nothing, and a replay of the event log does not bring them back."""

import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from baton.skills.core.commit import apply_events
from baton.skills.runtime.stores import Stores
from tests.test_redaction import SECRETS

KINDS = ["aws-access-key", "github-token", "basic-auth-credentials", "json-web-token", "private-key",
         "slack-token", "stripe-access-key", "pypi-token", "secret-keyword", "high-entropy-string"]


def secret(kind: str) -> str:
    return SECRETS[kind][1]


def leaked_in(text: str) -> list[str]:
    return [kind for kind in KINDS if secret(kind) in text]


# stored_unredacted writes as an older Baton did: Baton patched in the test's own process.
pytestmark = pytest.mark.in_process


@pytest.fixture
def stored_unredacted(any_home, worktrees, cli, monkeypatch):
    """OMN-1 holds a secret in each free text (decisions and contexts, every journal field,
    a check's output, the signals they emit, recall's payloads), stored as an older Baton
    did; OMN-2 decides nearby, so that recall shows OMN-1's decisions to it."""
    main, second = worktrees
    (main / "settings.txt").write_text(f"{SECRETS['slack-token'][0]}\n")
    with monkeypatch.context() as off:
        off.setattr(Stores, "redact", property(lambda self: lambda text: text))
        assert cli(main, "bind", "OMN-1")[0] == 0
        for kind in ("aws-access-key", "private-key", "high-entropy-string"):
            assert cli(main, "decide", f"deploy keys: {SECRETS[kind][0]}",
                       "--context", f"because {SECRETS['stripe-access-key'][0]}")[0] == 0
        assert cli(main, "update", "--done", SECRETS["github-token"][0], "--failed", SECRETS["pypi-token"][0],
                   "--goal", SECRETS["basic-auth-credentials"][0], "--evidence", SECRETS["json-web-token"][0],
                   "--next", SECRETS["secret-keyword"][0], "--check", "cat settings.txt")[0] == 0
        assert cli(second, "bind", "OMN-2")[0] == 0
        assert cli(second, "decide", "deploy keys are rotated by the platform team")[0] == 0
        assert cli(main, "index")[0] == 0
    return main, second, any_home


def outputs(main: Path, second: Path, cli) -> str:
    return "\n".join([cli(main, "resume", "OMN-1", "--json")[1], cli(main, "resume", "OMN-1")[1],
                      cli(second, "recall", "deploy keys", "--json")[1], cli(main, "signals", "--json")[1],
                      cli(main, "list", "--json")[1], cli(second, "resume", "OMN-2", "--json")[1]])


def stored(home: Path) -> str:
    """Every byte of the data home's files, every row of its SQLite tables, and, on servers,
    every row of the registry's tables and every point of the Qdrant collection."""
    import os

    parts = []
    for path in (p for p in home.rglob("*") if p.is_file()):
        parts.append(path.read_bytes().decode("latin-1"))
        if path.suffix == ".db":
            with sqlite3.connect(path) as conn:
                tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                parts += [str(row) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')]  # noqa: S608
    if os.environ.get("BATON_DATABASE_URL"):
        import psycopg

        with psycopg.connect(os.environ["BATON_DATABASE_URL"]) as conn:
            for table in ("baton_events", "baton_sessions"):
                parts += [json.dumps(body) for (body,) in conn.execute(f"SELECT body FROM {table}")]  # noqa: S608
    if os.environ.get("BATON_QDRANT_URL"):
        from baton.skills.runtime.settings import Settings

        stores = Stores(Settings.from_env(), projection=apply_events)
        index = stores.decision_index()
        try:
            parts += [record.model_dump_json() for record, _ in index.points(stores.project)]
        finally:
            index.close()
            stores.close()
    return "\n".join(parts)


def test_redact_scan_rewrites_every_store_in_a_new_event(stored_unredacted, cli):
    main, second, home = stored_unredacted
    before = outputs(main, second, cli)
    assert set(leaked_in(before)) == set(KINDS)  # the test can fail: they are all there
    assert leaked_in(stored(home))

    code, out, err = cli(main, "redact", "--scan", "--dry-run", "--json")
    assert code == 1 and json.loads(out)["findings"] and not leaked_in(out + err), (out, err)
    assert leaked_in(outputs(main, second, cli))  # a dry run rewrites nothing

    listed = cli(main, "list", "--json")[1]
    code, out, err = cli(main, "redact", "--scan", "--json")
    assert code == 0, err
    assert cli(main, "list", "--json")[1] == listed  # the redaction moves no time of any session
    answer = json.loads(out)
    assert answer["rewritten"]["registry events"] >= 11 and answer["rewritten"]["signals"] >= 3, answer
    assert answer["left"] == [] and not leaked_in(out + err)
    assert cli(main, "index")[0] == 0  # with Kafka, the projector applied the event before this

    after = outputs(main, second, cli)
    assert not leaked_in(after), leaked_in(after)
    resumed = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]
    assert len(resumed["decisions"]) == 3 and all("[REDACTED:" in d["text"] for d in resumed["decisions"])
    assert resumed["next_action"].startswith("the staging password: [REDACTED:")
    related = json.loads(cli(second, "resume", "OMN-2", "--json")[1])["related_decisions"]
    assert {d["task_id"] for d in related} == {"OMN-1"} and all("[REDACTED:" in d["text"] for d in related)
    assert not leaked_in(stored(home)), leaked_in(stored(home))

    code, out, _ = cli(main, "redact", "--scan", "--json")  # idempotent: nothing left, nothing new
    assert code == 0 and json.loads(out)["findings"] == [] and json.loads(out)["rewritten"] == {}, out


@pytest.mark.parametrize("any_home", ["servers"], indirect=True)
def test_a_replay_of_the_event_log_does_not_bring_a_redacted_secret_back(stored_unredacted, cli):
    main, second, home = stored_unredacted
    assert cli(main, "redact", "--scan")[0] == 0
    assert cli(main, "index")[0] == 0
    code, out, err = cli(main, "projector", "--once", "--idle", "0.3", "--group", f"replay-{uuid.uuid4().hex[:8]}")
    assert code == 0 and int(out.split()[1]) > 10, (out, err)  # the whole log, originals included, again
    assert cli(main, "index")[0] == 0
    assert not leaked_in(outputs(main, second, cli))
    assert not leaked_in(stored(home)), leaked_in(stored(home))
    assert cli(main, "redact", "--scan", "--dry-run")[0] == 0
