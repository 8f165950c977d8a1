"""Kafka with authentication and encryption on (SASL/SCRAM-SHA-256 over TLS on the test
broker, its certificate self-signed): Baton's producer, readers and projector connect with
the credentials and the CA of its settings, the password read from a file; wrong credentials
are one clear line naming the refusal, never the password, and a broker whose certificate
is not trusted is one clear line too."""

import json
import uuid

import pytest

from tests.workspace import run_process

USER, PASSWORD = "team-shop", f"pw-{uuid.uuid4().hex[:12]}"
WRONG = f"wrong-{uuid.uuid4().hex[:12]}"

pytestmark = pytest.mark.servers


@pytest.fixture(scope="module")
def scram_kafka():
    from tests.servers.kafka import KafkaServer

    server = KafkaServer(scram=(USER, PASSWORD), tls=True).start()
    yield server
    server.destroy()


@pytest.fixture
def scram_home(home, monkeypatch, scram_kafka, tmp_path):
    password = tmp_path / "kafka-password"
    password.write_text(f"{PASSWORD}\n")
    monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", scram_kafka.bootstrap)
    monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    monkeypatch.setenv("BATON_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("BATON_KAFKA_SSL_CA", str(scram_kafka.ca))
    monkeypatch.setenv("BATON_KAFKA_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("BATON_KAFKA_SASL_USERNAME", USER)
    monkeypatch.setenv("BATON_KAFKA_SASL_PASSWORD_FILE", str(password))
    # Every new connection authenticates first: the first delivery (creating the topics on
    # this fresh broker, the idempotent producer's handshake) takes over 2 s on this machine.
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "10")
    return home


def test_writes_are_delivered_and_projected_through_a_broker_that_authenticates(scram_home, worktrees):
    main, second = worktrees
    for cwd, args in ((main, ("bind", "OMN-1")), (main, ("touch", "src/db.py")),
                      (main, ("decide", "Keep carts in PostgreSQL")), (second, ("bind", "OMN-2")),
                      (second, ("touch", "src/db.py"))):
        result = run_process(cwd, *args)
        assert result.returncode == 0, result.stderr
    delivered = run_process(main, "deliver")
    assert delivered.returncode == 0 and "Nothing waits" in delivered.stdout, delivered.stderr
    projected = run_process(main, "projector", "--once")
    assert projected.returncode == 0 and projected.stdout.startswith("applied "), projected.stderr
    resumed = json.loads(run_process(main, "resume", "OMN-1", "--json").stdout)
    assert [d["text"] for d in resumed["session"]["decisions"]] == ["Keep carts in PostgreSQL"]
    assert resumed["stores"]["signals"] == "ok" and [c["other_task_id"] for c in resumed["conflicts"]] == ["OMN-2"]
    doctor = run_process(main, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    shown = "".join(r.stdout + r.stderr for r in (delivered, projected, doctor))
    assert PASSWORD not in shown


def test_wrong_credentials_are_one_line_naming_the_refusal_never_the_password(scram_home, worktrees, tmp_path,
                                                                               monkeypatch):
    main, _ = worktrees
    (tmp_path / "kafka-password").write_text(f"{WRONG}\n")
    results = [run_process(main, *args) for args in (("doctor",), ("projector", "--once"), ("signals", "--json"),
                                                     ("bind", "OMN-9"), ("deliver",))]
    shown = "".join(r.stdout + r.stderr for r in results)
    assert WRONG not in shown and PASSWORD not in shown, shown
    doctor, projector, signals, bind, deliver = results
    assert doctor.returncode == 3
    line = next(line for line in doctor.stdout.splitlines() if line.startswith("signal"))
    assert "refused the credentials" in line and "SCRAM-SHA-256" in line, doctor.stdout
    assert projector.returncode == 3 and len(projector.stderr.strip().splitlines()) == 1, projector.stderr
    assert "refused the credentials" in projector.stderr
    assert "refused the credentials" in signals.stderr and len(signals.stderr.strip().splitlines()) == 1
    assert bind.returncode == 0, bind.stderr  # a write is kept, and delivered once the credentials are right
    assert deliver.returncode == 3 and "refused the credentials" in deliver.stderr


def test_a_broker_whose_certificate_is_not_trusted_is_one_clear_line(scram_home, worktrees, tmp_path, monkeypatch):
    """Without the broker's CA the handshake fails: a read says so in one line, a write is
    kept for later (as with any server that cannot be used), and a delivery names the
    failure for each outbox that waits."""
    main, _ = worktrees
    monkeypatch.delenv("BATON_KAFKA_SSL_CA")
    monkeypatch.setenv("BATON_STORE_TIMEOUT", "3")
    results = [run_process(main, *args) for args in (("signals", "--json"), ("bind", "OMN-9"), ("deliver",))]
    signals, bind, deliver = results
    assert signals.returncode == 3 and len(signals.stderr.strip().splitlines()) == 1, signals.stderr
    assert "failed the TLS handshake" in signals.stderr and "certificate" in signals.stderr, signals.stderr
    assert bind.returncode == 0, bind.stderr
    assert deliver.returncode == 3, deliver.stderr
    assert all("failed the TLS handshake" in line for line in deliver.stderr.strip().splitlines()), \
        "one line per outbox that waits, each naming the failure"
    assert PASSWORD not in "".join(r.stdout + r.stderr for r in results)
