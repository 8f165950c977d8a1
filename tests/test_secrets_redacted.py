"""Secrets written by agents or printed by checks never reach a store, a signal, a vector
payload or another ticket's output: each is replaced by its marker when it is written."""

import json
import sqlite3

import pytest

from tests.test_redaction import SECRETS

KINDS = ["aws-access-key", "github-token", "basic-auth-credentials", "json-web-token", "private-key",
         "slack-token", "stripe-access-key", "sendgrid-api-key", "npm-token", "pypi-token", "secret-keyword",
         "high-entropy-string"]


def secret_of(kind: str) -> str:
    return SECRETS[kind][1]


@pytest.fixture
def recorded(any_home, worktrees, cli):
    """OMN-1 writes every kind of secret through decide, update (journal fields) and a check
    whose output prints one; OMN-2 decides nearby so that recall shows OMN-1's decisions."""
    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    for kind in KINDS:
        text = SECRETS[kind][0]
        assert cli(main, "decide", f"deploy keys: {text}", "--context", f"because {text}")[0] == 0
    assert cli(main, "update", "--done", SECRETS["github-token"][0], "--failed", SECRETS["pypi-token"][0],
               "--goal", SECRETS["basic-auth-credentials"][0], "--evidence", SECRETS["json-web-token"][0],
               "--next", SECRETS["aws-access-key"][0],
               "--check", f"echo token={secret_of('secret-keyword')}")[0] == 0
    assert cli(second, "bind", "OMN-2")[0] == 0
    assert cli(second, "decide", "deploy keys are rotated by the platform team")[0] == 0
    assert cli(main, "index")[0] == 0
    return main, second, any_home


def test_no_secret_reaches_any_output(recorded, cli):
    main, second, _ = recorded
    outputs = [cli(main, "resume", "OMN-1", "--json")[1], cli(main, "resume", "OMN-1")[1],
               cli(second, "resume", "OMN-2", "--json")[1], cli(second, "recall", "deploy keys", "--json")[1],
               cli(main, "signals", "--json")[1], cli(main, "list", "--json")[1]]
    shown = "\n".join(outputs)
    assert "[REDACTED:" in outputs[0]
    leaked = [kind for kind in KINDS if secret_of(kind) in shown]
    assert not leaked, leaked
    related = json.loads(outputs[2])["related_decisions"]
    assert related and all("[REDACTED:" in d["text"] for d in related if d["task_id"] == "OMN-1")


def test_no_secret_reaches_any_embedded_store_file(recorded):
    _, _, home = recorded
    files = [p for p in home.rglob("*") if p.is_file()]
    assert files
    for path in files:
        raw = path.read_bytes()
        if path.suffix == ".db":  # the WAL may hold pages not yet checkpointed
            with sqlite3.connect(path) as conn:
                raw += "\n".join(str(row) for table in
                                 conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
                                 for row in conn.execute(f"SELECT * FROM \"{table[0]}\"")).encode()  # noqa: S608
        leaked = [kind for kind in KINDS if secret_of(kind).encode() in raw]
        assert not leaked, (path, leaked)


def test_a_handoffs_probes_and_checks_keep_no_secret_and_still_verify(home, worktrees, cli):
    """What a probe or check prints is redacted in the document, its JSON and a verification;
    the digest of the output itself still shows that the claim holds."""
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    printed = "\n".join(SECRETS[kind][0] for kind in KINDS)
    (main / "settings.txt").write_text(f"{printed}\n")
    code, out, err = cli(main, "handoff", "--check", "cat settings.txt", "--probe", "Settings=cat settings.txt",
                         "--json")
    assert code == 0, err
    code, verified, err = cli(main, "handoff", "verify", "--json")
    assert code == 0, err
    document = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    shown = "\n".join([out, document, verified, cli(main, "resume", "OMN-1", "--json")[1]])
    assert "[REDACTED:" in document and "[REDACTED:" in json.loads(out)["live_state"][-1]["recorded"]
    leaked = [kind for kind in KINDS if secret_of(kind) in shown]
    assert not leaked, leaked
    statuses = {claim["section"]: claim["status"] for claim in json.loads(verified)["live_state"]}
    assert statuses["Settings"] == "verified" and statuses["Check: cat settings.txt"] == "verified", statuses


def test_a_handoff_command_holding_a_secret_is_refused_before_it_runs(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    key = secret_of("aws-access-key")
    for args in (["--check", f"echo {key}"], ["--probe", f"Key=echo {key}"]):
        code, _, err = cli(main, "handoff", *args)
        assert code == 2 and "holds a secret" in err and key not in err, err
    assert not (main / "docs").exists()


def test_redact_scan_finds_secrets_stored_before_redaction_and_never_shows_them(home, worktrees, cli):
    """What a store took before redaction existed (written here straight into the embedded
    stores, as an older Baton did) is found by `baton redact --scan --dry-run`, by kind and
    place (tests/test_redact_rewrite.py rewrites it)."""
    import uuid
    from datetime import UTC, datetime

    from baton.registry.model import DecisionRecorded
    from baton.registry.sqlite import SqliteSessionStore
    from baton.signals.model import Signal, SignalPayload, SignalType
    from baton.signals.sqlite import SqliteSignalBus

    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    code, out, err = cli(main, "redact", "--scan", "--json")
    assert code == 0 and json.loads(out)["findings"] == [], out
    now = datetime.now(UTC)
    registry = SqliteSessionStore(home / "registry.db", timeout=2, project="github.com/acme/shop")
    registry.append([DecisionRecorded(event_id=uuid.uuid4(), task_id="OMN-1", session_id="s-old", at=now,
                                      text=f"deploy with {SECRETS['aws-access-key'][0]}",
                                      context=SECRETS["github-token"][0])])
    registry.close()
    bus = SqliteSignalBus(home / "signals.db", timeout=2, project="github.com/acme/shop")
    bus.publish([Signal(signal_id=uuid.uuid4(), signal_type=SignalType.decision_recorded, task_id="OMN-1",
                        session_id="s-old", repo="github.com/acme/shop", emitted_at=now,
                        payload=SignalPayload(reason=SECRETS["json-web-token"][0]))])
    bus.close()
    (main / "docs" / "handoffs").mkdir(parents=True)
    (main / "docs" / "handoffs" / "LATEST.md").write_text(f"# Handoff\n{SECRETS['private-key'][0]}\n")
    code, out, err = cli(main, "redact", "--scan", "--dry-run", "--json")
    assert code == 1, err
    found = {(f["store"], f["where"].split(" ")[-1]): f["kinds"] for f in json.loads(out)["findings"]}
    assert found[("registry", "text")] == ["aws-access-key"] and found[("registry", "context")] == ["github-token"]
    assert found[("signals", "reason")] == ["json-web-token"]
    assert found[("handoff", "docs/handoffs/LATEST.md")] == ["private-key"], found
    code, text, _ = cli(main, "redact", "--scan", "--dry-run")
    assert code == 1 and "4 secret(s) found" in text
    leaked = [kind for kind in KINDS if secret_of(kind) in out + text]
    assert not leaked, leaked
