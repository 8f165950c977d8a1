"""`baton touch` runs in an agent's PostToolUse hook: it must stay light."""

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime

from pydantic import TypeAdapter

from baton.files import FileRef
from baton.registry.model import Event
from baton.registry.wire import files_touched_body

PROBE = """
import sys
from baton.skills.frontends.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("pydantic", "numpy", "torch", "qdrant_client", "tokenizers",
                           "confluent_kafka", "neo4j", "psycopg", "cryptography") if m in sys.modules)
print("HEAVY", ",".join(heavy))
sys.exit(code)
"""


def test_touch_imports_nothing_heavy(home, worktrees, cli):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/a.py", "src/c.py")
    cli(main, "touch", "src/a.py")
    # No overlap, an overlap already signalled, and a new overlap (its signal built and stored).
    for path, warned in (("src/b.py", False), ("src/a.py", False), ("src/c.py", True)):
        result = subprocess.run([sys.executable, "-c", PROBE, "touch", path], cwd=main, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "HEAVY \n" in result.stdout
        assert ("Warning: OMN-2 also touching src/a.py, src/c.py" in result.stdout) is warned, result.stdout
    code, out, _ = cli(main, "signals", "--task", "OMN-1", "--json")
    stored = [s for s in json.loads(out) if s["signal_type"] == "conflict_detected"]
    assert [s["payload"]["file_paths"] for s in stored] == [["src/a.py"], ["src/a.py", "src/c.py"]]


def test_the_hand_built_conflict_signal_is_the_model_signal():
    from baton.graph.conflicts import FileConflict, conflict_signal_id
    from baton.signals.model import Signal
    from baton.skills.core.binding import ActiveTask
    from baton.skills.core.signalling import conflict_signal

    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    conflict = FileConflict(other_task_id="OMN-2", shared_files=["github.com/a/b:src/ü.py"],
                            signal_id=conflict_signal_id("OMN-1", "OMN-2", ["github.com/a/b:src/ü.py"]))
    wire = conflict_signal(conflict, ActiveTask("OMN-1", "s1", "touch"), [FileRef("github.com/a/b", "src/ü.py")], at)
    model = Signal.model_validate_json(wire.to_json())
    assert model.signal_id == conflict.signal_id and model.emitted_at == at
    assert model.payload.file_paths == ["src/ü.py"] and model.payload.related_task_id == "OMN-2"
    assert model.subjects() == wire.subjects()
    assert json.loads(model.to_json()) == {**json.loads(wire.to_json()), "emitted_at": "2026-11-01T12:00:00.123456Z"}


def test_touch_imports_no_server_client_when_servers_are_configured(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    servers = {"BATON_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "BATON_GRAPH_URL": "bolt://127.0.0.1:1",
               "BATON_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    result = subprocess.run([sys.executable, "-c", PROBE, "touch", "src/a.py"], cwd=main, capture_output=True,
                            text=True, env={**os.environ, **servers})
    assert result.returncode == 0, result.stderr
    assert "HEAVY \n" in result.stdout, "the touch is kept locally; no server is contacted from the hook"


def test_the_hand_built_touch_event_is_the_model_event():
    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    event_id = str(uuid.uuid4())
    files = [FileRef("github.com/a/b", "src/ü.py"), FileRef("", "/tmp/x")]
    body = files_touched_body(event_id, "OMN-1", "s1", at, files)
    event = TypeAdapter(Event).validate_json(body)
    assert event.type == "files_touched" and event.files == files and event.at == at
    assert json.loads(TypeAdapter(Event).dump_json(event)) == {**json.loads(body), "at": "2026-11-01T12:00:00.123456Z"}


def test_decide_imports_nothing_heavy(home, worktrees, cli):
    """`baton decide` keeps to the hook's budget: no pydantic, no recall library, on the
    embedded default and with servers configured (whose clients it never needs)."""
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    result = subprocess.run([sys.executable, "-c", PROBE, "decide", "Keep carts in PostgreSQL", "--context", "why"],
                            cwd=main, capture_output=True, text=True)
    assert result.returncode == 0 and "HEAVY \n" in result.stdout, result.stdout + result.stderr
    servers = {"BATON_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "BATON_GRAPH_URL": "bolt://127.0.0.1:1",
               "BATON_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    result = subprocess.run([sys.executable, "-c", PROBE, "decide", "Decided while the servers are far"], cwd=main,
                            capture_output=True, text=True, env={**os.environ, **servers})
    assert result.returncode == 0 and "HEAVY \n" in result.stdout, result.stdout + result.stderr
    resumed = json.loads(cli(main, "resume", "OMN-1", "--json")[1])
    decisions = resumed["session"]["decisions"]
    assert [(d["text"], d.get("context")) for d in decisions] == [("Keep carts in PostgreSQL", "why")]
    signals = json.loads(cli(main, "signals", "--task", "OMN-1", "--json")[1])
    reasons = [s["payload"]["reason"] for s in signals if s["signal_type"] == "decision_recorded"]
    assert reasons == ["Keep carts in PostgreSQL"]


def test_the_hand_built_decision_is_the_model_decision():
    from baton.recall.base import DecisionRecord
    from baton.recall.wire import decision_payload, decision_point_id
    from baton.registry.wire import decision_recorded_body
    from baton.signals.model import Signal, derived_signal_id
    from baton.signals.wire import SignalType, WireSignal

    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    event_id = str(uuid.uuid4())
    body = decision_recorded_body(event_id, "OMN-1", "s1", at, "Keep carts in PostgreSQL ü", "restarts",
                                  "github.com/a/b")
    event = TypeAdapter(Event).validate_json(body)
    assert (event.type, event.text, event.context, event.repo, event.at) == \
        ("decision_recorded", "Keep carts in PostgreSQL ü", "restarts", "github.com/a/b", at)
    assert json.loads(TypeAdapter(Event).dump_json(event)) == {**json.loads(body), "at": "2026-11-01T12:00:00.123456Z"}
    payload = decision_payload("OMN-1", "s1", event.text, event.context, at.isoformat(), event.repo)
    record = DecisionRecord.model_validate_json(payload)
    assert record.point_id == decision_point_id("OMN-1", event.text)
    assert json.loads(record.model_dump_json()) == json.loads(payload)
    wire = WireSignal(signal_id=derived_signal_id(SignalType.decision_recorded, event_id),
                      signal_type=SignalType.decision_recorded, task_id="OMN-1", session_id="s1", repo="r",
                      emitted_at=at,
                      file_paths=(), related_task_id=None, reason=event.text)
    model = Signal.model_validate_json(wire.to_json())
    assert model.subjects() == wire.subjects() == ["task:OMN-1"]
