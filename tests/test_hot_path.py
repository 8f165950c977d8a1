"""`baton touch` runs in an agent's PostToolUse hook: it must stay light, as every hook must.
The import set of the touch and of each hook is pinned below."""

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

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
# The same, also saying on stderr which modules the command imported.
PROBE_IMPORTS = """
import sys
before = set(sys.modules)
from baton.skills.frontends.cli import main
try:
    code = main(sys.argv[1:])
finally:
    new = {m if m.startswith("baton.") else m.split(".")[0] for m in set(sys.modules) - before} - {"baton"}
    print("IMPORTS", " ".join(sorted(m for m in new if not m.startswith("_"))), file=sys.stderr)
    made = {f"{name}.{key}" for name, module in list(sys.modules.items()) if name.startswith("baton.")
            for key, value in vars(module).items()
            if isinstance(value, type) and "__dataclass_fields__" in vars(value) and value.__module__ == name}
    print("DATACLASSES", " ".join(sorted(made)), file=sys.stderr)
heavy = sorted(m for m in ("pydantic", "numpy", "torch", "qdrant_client", "tokenizers",
                           "confluent_kafka", "neo4j", "psycopg") if m in sys.modules)
print("HEAVY", ",".join(heavy))
sys.exit(code)
"""

def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# What each hot path may import beyond the interpreter's own start: libraries by their
# top-level name, Baton's modules by their full name (private modules left out). A module
# new on one of these paths fails the tests below until it is added here on purpose.
TOUCH_IMPORTS = names("""
    ast baton.backend baton.budget baton.clock baton.deadline baton.errors baton.files baton.graph baton.graph.base
    baton.graph.conflicts baton.graph.sqlite baton.health baton.home baton.ids baton.masking baton.outcome baton.phases
    baton.registry
    baton.projects baton.graph.projects baton.pydantic_plugins
    baton.registry.base baton.registry.sqlite baton.registry.wire baton.shown_text baton.signals
    baton.signals.base baton.signals.sqlite baton.signals.wire baton.skills baton.skills.core
    baton.skills.core.binding baton.skills.core.commit baton.skills.core.overlaps baton.skills.core.signalling
    baton.skills.core.write_report baton.skills.frontends baton.skills.frontends.cli
    baton.skills.frontends.invocation baton.skills.runtime baton.skills.runtime.command_words
    baton.skills.runtime.settings baton.skills.runtime.sink
    baton.skills.runtime.stores baton.skills.runtime.unit baton.skills.services baton.skills.services.touch
    baton.skills.services.unit
    baton.sqlite baton.store_names baton.trust baton.write_queue collections copy dataclasses datetime dis fcntl
    inspect json linecache math opcode shlex sqlite3 threading token tokenize typing weakref
""")
# A ticket's overlaps' signal ids: uuid5's text, derived with hashlib alone (the uuid module
# imports platform: 5 ms of a fresh process on Python 3.11).
OVERLAP_IMPORTS = names("hashlib")
HOOK_IMPORTS = names("""
    ast baton.backend baton.budget baton.clock baton.deadline baton.errors baton.files baton.git baton.graph
    baton.graph.base baton.graph.conflicts baton.health baton.home baton.ids baton.masking baton.outcome baton.phases
    baton.registry baton.projects baton.pydantic_plugins
    baton.registry.base baton.registry.sqlite baton.registry.wire baton.shown_text baton.signals
    baton.signals.base baton.skills baton.skills.core baton.skills.core.binding baton.skills.frontends
    baton.skills.frontends.cli baton.skills.frontends.hooks baton.skills.frontends.invocation
    baton.skills.runtime.agent_sessions baton.skills.runtime baton.skills.runtime.agents
    baton.skills.runtime.command_words baton.skills.runtime.settings baton.skills.runtime.sink
    baton.skills.runtime.stores baton.skills.runtime.unit baton.skills.services baton.skills.services.unit
    baton.sqlite baton.store_names baton.trust baton.write_queue collections copy dataclasses datetime dis fcntl
    inspect json linecache math opcode shlex sqlite3 threading token tokenize typing weakref
""")
HOOK_PATH_IMPORTS = {
    "post-tool-use": HOOK_IMPORTS | OVERLAP_IMPORTS | names("""
        array baton.graph.sqlite baton.graph.projects baton.signals.sqlite baton.signals.wire baton.skills.core.commit
        baton.processes baton.skills.core.overlaps baton.skills.core.signalling
        baton.skills.core.write_report baton.skills.frontends.briefing baton.skills.services
        baton.skills.services.touch hashlib
    """),
    # The check before an edit: the graph's file index, the leases by their anchors' index
    # (pathspec, which imports typing_extensions, only when one may cover the file), and (an
    # overlap found) the holders' notes from the registry's stored JSON; never the signal or
    # event models, even with the agent's own touches not projected yet.
    "pre-tool-use": HOOK_IMPORTS | names("""
        baton.graph.sqlite baton.graph.projects baton.skills.services baton.skills.services.pre_edit
        baton.skills.services.leases baton.skills.core.path_patterns pathspec typing_extensions
    """),
    "user-prompt-submit": HOOK_IMPORTS | names("""
        array baton.signals.sqlite baton.signals.wire baton.processes baton.skills.core.overlaps
        baton.skills.frontends.briefing baton.skills.services baton.skills.services.news
    """),
    "stop": HOOK_IMPORTS | names("""
        locale select selectors signal subprocess array atexit baton.locks baton.outbox
        baton.skills.core.checkpoints baton.skills.core.commit
        baton.processes baton.skills.core.overlaps baton.skills.core.write_report
        baton.skills.core.batons_own baton.skills.handoff baton.skills.handoff.files baton.skills.services
        baton.skills.services.checkpoint baton.skills.services.end_of_turn baton.skills.services.touch bisect bz2
        hashlib lzma random shutil socket tempfile zlib base64 baton.skills.runtime.provider_refs binascii cryptography
        hmac struct
    """),
    "session-end": HOOK_IMPORTS | names("""
        baton.graph.sqlite baton.graph.projects locale select selectors signal subprocess
        baton.locks baton.outbox baton.processes baton.skills.core.commit baton.skills.core.overlaps
        baton.skills.core.write_report baton.skills.core.batons_own baton.skills.handoff baton.skills.handoff.files
        baton.skills.services baton.skills.services.end_of_turn baton.skills.services.touch bisect bz2 hashlib lzma
        random shutil tempfile zlib
    """),
    "session-start": HOOK_IMPORTS | names("""
        annotated_types array atexit base64 baton.graph.sqlite baton.graph.projects baton.locks baton.recall
        baton.processes locale platform select selectors signal subprocess
        baton.recall.base
        baton.recall.embedded baton.recall.embedding baton.recall.fusion baton.recall.keywords baton.recall.queue
        baton.recall.search baton.recall.segments baton.recall.ticket_queries baton.recall.wire
        baton.registry.apply baton.registry.model baton.signals.model baton.signals.sqlite baton.signals.wire
        baton.skills.core.commit baton.skills.core.indexing baton.skills.core.interrupted
        baton.skills.core.batons_own baton.skills.core.overlaps baton.skills.core.signalling
        baton.skills.core.stage_authority
        baton.skills.core.stages baton.skills.core.ticket_query baton.skills.core.write_report
        baton.skills.frontends.briefing
        baton.skills.handoff baton.skills.handoff.checks baton.skills.handoff.document
        baton.skills.handoff.files baton.skills.handoff.journal baton.skills.handoff.probe_policy
        baton.skills.handoff.probe_signing baton.skills.handoff.probes baton.skills.handoff.verify
        baton.skills.handoff.write baton.skills.services
        baton.skills.services.decision_age
        baton.skills.services.bind baton.skills.services.compatibility baton.skills.services.handoff
        baton.skills.runtime.provider_refs baton.skills.services.checkpoint baton.skills.services.continuation
        baton.skills.services.recover baton.skills.services.resume baton.skills.services.stage baton.types cryptography
        binascii bisect bz2 calendar concurrent contextvars csv ctypes decimal email fractions hashlib heapq
        hmac importlib logging lzma mmap numbers numpy pickle pydantic pydantic_core queue quopri random secrets
        shutil socket string struct sysconfig tempfile textwrap traceback typing_extensions typing_inspection uuid
        zipfile zlib zoneinfo
    """),
}


# Baton's modules the first `baton bind` of a new data home may import: the first command a
# user meets, within interpreter + 250 ms (bench/first_commands.py). Its events are kept as a
# touch's are, projected at the registry's next read: neither pydantic nor the registry's
# models, nor the text renderings (the handoff's modules), the redactor (no free text in a
# plain bind's events), the take-over (a ticket nobody holds) or recall.
BIND_IMPORTS = names("""
    baton.backend baton.budget baton.clock baton.deadline baton.errors baton.files baton.git baton.graph
    baton.graph.base baton.graph.conflicts baton.graph.projects baton.graph.sqlite baton.health baton.home baton.ids
    baton.locks baton.masking baton.outbox baton.outcome baton.phases baton.processes baton.projects
    baton.pydantic_plugins baton.registry baton.registry.base baton.registry.sqlite baton.registry.wire
    baton.shown_text baton.signals baton.signals.base baton.signals.sqlite baton.signals.wire baton.skills
    baton.skills.core baton.skills.core.batons_own baton.skills.core.binding baton.skills.core.checkpoints
    baton.skills.core.commit baton.skills.core.environment baton.skills.core.signalling
    baton.skills.core.stage_authority baton.skills.core.write_report baton.skills.frontends
    baton.skills.frontends.answers baton.skills.frontends.cli baton.skills.frontends.invocation baton.skills.runtime
    baton.skills.runtime.agents baton.skills.runtime.command_words baton.skills.runtime.settings
    baton.skills.runtime.sink baton.skills.runtime.stores baton.skills.runtime.unit baton.skills.services
    baton.skills.services.bind baton.skills.services.checkpoint baton.skills.services.unit baton.sqlite
    baton.store_names baton.trust baton.write_queue
""")

# The dataclasses the touch and the post-tool-use hook may define: a frozen dataclass costs a
# fresh process about 1 ms to define (its methods are generated and compiled), so the hot
# paths' records are NamedTuples. FileRef is validated inside pydantic's event models.
HOT_DATACLASSES = names("""
    baton.files.FileRef baton.outcome.Found baton.outcome.NotFound baton.outcome.Unavailable
    baton.skills.core.write_report.WriteReport baton.skills.services.touch.TouchReport
""")


def dataclasses_made(result: subprocess.CompletedProcess) -> set[str]:
    """The dataclasses Baton's modules defined in the PROBE_IMPORTS's command."""
    line = [line for line in result.stderr.splitlines() if line.startswith("DATACLASSES")][-1]
    return set(line.split()[1:])


def imported(result: subprocess.CompletedProcess) -> set[str]:
    """What the PROBE_IMPORTS's command imported (its last IMPORTS line)."""
    line = [line for line in result.stderr.splitlines() if line.startswith("IMPORTS")][-1]
    return set(line.split()[1:])


def unpinned(result: subprocess.CompletedProcess, pinned: frozenset[str] | set[str]) -> list[str]:
    return sorted(imported(result) - pinned)


def test_touch_imports_nothing_heavy(home, worktrees, cli):
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(second, "bind", "OMN-2")

    def probe(path: str) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-c", PROBE_IMPORTS, "touch", path], cwd=main, capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        assert "HEAVY \n" in result.stdout
        return result

    alone = probe("src/z.py")  # a ticket without overlaps: no signal id to derive
    assert {"baton.recall.keywords", "baton.recall.fusion", "numpy", "uuid", "platform"}.isdisjoint(
        TOUCH_IMPORTS | OVERLAP_IMPORTS)
    assert not unpinned(alone, TOUCH_IMPORTS), f"new on the touch's path: {unpinned(alone, TOUCH_IMPORTS)}"
    cli(second, "touch", "src/a.py", "src/c.py")
    cli(main, "touch", "src/a.py")
    # No new overlap, an overlap already signalled, and a new overlap (its signal built and stored).
    for path, warned in (("src/b.py", False), ("src/a.py", False), ("src/c.py", True)):
        result = probe(path)
        assert ("Warning: OMN-2 also touching src/a.py, src/c.py" in result.stdout) is warned, result.stdout
        pinned = TOUCH_IMPORTS | OVERLAP_IMPORTS
        assert not unpinned(result, pinned), f"new on the touch's path: {unpinned(result, pinned)}"
        assert dataclasses_made(result) <= HOT_DATACLASSES, sorted(dataclasses_made(result) - HOT_DATACLASSES)
    code, out, _ = cli(main, "signals", "--task", "OMN-1", "--json")
    stored = [s for s in json.loads(out) if s["signal_type"] == "conflict_detected"]
    assert [s["payload"]["file_paths"] for s in stored] == [["src/a.py"], ["src/a.py", "src/c.py"]]


def test_a_first_bind_imports_only_its_pinned_modules(home, worktrees):
    """The first bind of a new data home, then a bind of the same worktree again (which asks
    whether another run holds the ticket): Baton's modules each imports are pinned
    (BIND_IMPORTS): the first imports no heavy library, the second pydantic (it reads the
    ticket's session, the first bind's events projected on the way)."""
    main, _ = worktrees
    assert not home.exists()
    again = names("baton.skills.runtime.agent_sessions baton.skills.services.news baton.skills.services.takeover "
                  "baton.registry.apply baton.registry.model baton.types")
    for pinned, heavy in ((BIND_IMPORTS, ""), (BIND_IMPORTS | again, "pydantic")):
        result = subprocess.run([sys.executable, "-c", PROBE_IMPORTS, "bind", "OMN-1"], cwd=main,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert f"HEAVY {heavy}\n" in result.stdout, result.stdout
        ours = {m for m in imported(result) if m.startswith("baton.")}
        assert not ours - pinned, f"new on the bind's path: {sorted(ours - pinned)}"


def test_a_bind_stores_its_events_as_the_models_write_them(home, worktrees, cli):
    """A bind keeps its events unprojected, built without pydantic: stored as the bytes their
    models write (as when they were projected at once), the ticket active in the graph at
    once, and the session projected by the next read."""
    import sqlite3

    from baton.registry.wire import event_adapter, event_of

    main, second = worktrees
    assert cli(main, "bind", "OMN-1", "--agent", "claude-code")[0] == 0
    with sqlite3.connect(home / "registry.db") as conn:
        rows = conn.execute("SELECT type, body, applied FROM events ORDER BY rowid").fetchall()
    assert [kind for kind, _, _ in rows] == ["bound", "run_started", "checkpoint_taken"]
    assert all(applied == 0 for _, _, applied in rows)
    for kind, body, _ in rows[:2]:  # the checkpoint's record was kept so before
        assert event_adapter().dump_json(event_of(kind, body)).decode() == body
    with sqlite3.connect(home / "graph.db") as conn:
        assert conn.execute("SELECT task_id, status FROM tasks").fetchall() == [("github.com/acme/shop\x1fOMN-1",
                                                                                   "active")]
    assert cli(second, "touch", "src/a.py")[0] != 0  # the second worktree is bound to nothing yet
    # The prompt hook reads the ticket's scope from the unprojected events: still no pydantic.
    prompt = json.loads((Path(__file__).parent / "fixtures" / "claude_hooks" / "user_prompt_submit.json").read_text())
    prompt["cwd"] = str(main)
    hooked = subprocess.run([sys.executable, "-c", PROBE, "hook", "user-prompt-submit"], input=json.dumps(prompt),
                            cwd=main, capture_output=True, text=True)
    assert hooked.returncode == 0 and "HEAVY \n" in hooked.stdout, hooked.stdout + hooked.stderr
    resumed = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]
    assert (resumed["status"], resumed["agent"], resumed["branch"]) == ("active", "claude-code", "main")


def test_a_bind_killed_at_any_point_leaves_one_run_and_the_next_bind_whole(home, worktrees, cli):
    """kill -9 of a first bind at points through its work (its events kept unprojected, the
    graph, the checkpoint): what it acknowledged is there, and the next bind and read find one
    ticket, active, its first run started once."""
    import signal
    import sqlite3
    import time

    main, _ = worktrees
    probe = "import sys; from baton.skills.frontends.cli import main; sys.exit(main(sys.argv[1:]))"
    for delay in (0.15, 0.3, 0.5, 0.8, 1.2):
        child = subprocess.Popen([sys.executable, "-c", probe, "bind", "OMN-1"], cwd=main,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        said = child.communicate(timeout=60)[0].decode()
        if said.startswith("Bound"):  # acknowledged before the kill: its events are stored
            with sqlite3.connect(home / "registry.db") as conn:
                assert conn.execute("SELECT count(*) FROM events WHERE type = 'bound'").fetchone()[0] >= 1
    assert cli(main, "bind", "OMN-1")[0] == 0
    resumed = json.loads(cli(main, "resume", "OMN-1", "--json")[1])["session"]
    assert resumed["status"] == "active"
    with sqlite3.connect(home / "registry.db") as conn:
        runs = conn.execute("SELECT DISTINCT event_id FROM events WHERE type = 'run_started'").fetchall()
    assert len(runs) == 1


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
    assert str(model.signal_id) == conflict.signal_id and model.emitted_at == at
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
    from baton.signals.model import Signal, derived_signal_id
    from baton.signals.wire import SignalType, WireSignal
    from baton.skills.core.commit import wire_event

    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    event_id = str(uuid.uuid4())
    body = wire_event("decision_recorded", "OMN-1", "s1", at, event_id=event_id, text="Keep carts in PostgreSQL ü",
                      context="restarts", repo="github.com/a/b", inherited_from=None, replaces=[]).body
    event = TypeAdapter(Event).validate_json(body)
    assert (event.type, event.text, event.context, event.repo, event.at) == \
        ("decision_recorded", "Keep carts in PostgreSQL ü", "restarts", "github.com/a/b", at)
    assert json.loads(TypeAdapter(Event).dump_json(event)) == {**json.loads(body), "at": "2026-11-01T12:00:00.123456Z"}
    payload = decision_payload("github.com/a/b", "OMN-1", "s1", event.text, event.context, at.isoformat(), event.repo)
    record = DecisionRecord.model_validate_json(payload)
    assert record.project == "github.com/a/b"
    assert record.point_id == decision_point_id("github.com/a/b", "OMN-1", event.text)
    assert json.loads(record.model_dump_json()) == json.loads(payload)
    wire = WireSignal(signal_id=str(derived_signal_id(SignalType.decision_recorded, event_id)),
                      signal_type=SignalType.decision_recorded, task_id="OMN-1", session_id="s1", repo="r",
                      emitted_at=at,
                      file_paths=(), related_task_id=None, reason=event.text)
    model = Signal.model_validate_json(wire.to_json())
    assert model.subjects() == wire.subjects() == ["task:OMN-1"]


def test_each_hook_imports_only_its_pinned_modules(home, worktrees, cli, tmp_path, monkeypatch):
    """Each Claude Code hook as Claude Code runs it (a fresh process, the payload on stdin),
    in each of its cases: a module its pin does not name fails here (pydantic and numpy are
    only session-start's, which resumes). The check before an edit imports pathspec only for
    a file a lease may cover (OMN-2's src/db/**)."""
    fixtures = Path(__file__).parent / "fixtures" / "claude_hooks"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    main, second = worktrees
    cli(second, "bind", "OMN-2")
    assert cli(second, "claim", "src/db/**", "--exclusive")[0] == 0
    cli(second, "touch", "src/a.py", "src/c.py")
    cli(second, "decide", "Keep carts in PostgreSQL")
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/a.py")
    cli(main, "decide", "Lock cart rows optimistically")

    def payload(name: str, *, file: str | None = None, session: str = "s1", before: bool = False) -> str:
        event = json.loads((fixtures / f"{name}.json").read_text())
        event["cwd"], event["session_id"] = str(main), session
        if file is not None:
            event["tool_input"]["file_path"] = event["tool_response"]["filePath"] = str(main / file)
        if before:  # the PreToolUse payload: the tool has not run, so there is no response
            event["hook_event_name"] = "PreToolUse"
            del event["tool_response"], event["duration_ms"]
        return json.dumps(event)

    runs = [("session-start", payload("session_start_startup")),
            ("pre-tool-use", payload("post_tool_use_edit", file="src/e.py", before=True)),  # nobody else's
            ("pre-tool-use", payload("post_tool_use_edit", file="src/c.py", before=True)),  # OMN-2's: a warning
            ("post-tool-use", payload("post_tool_use_edit", file="src/e.py")),  # no other ticket's file
            ("post-tool-use", payload("post_tool_use_edit", file="src/c.py")),  # a new conflict
            # OMN-2's exclusive lease (ask), read with the touches just recorded still unprojected
            ("pre-tool-use", payload("post_tool_use_edit", file="src/db/x.py", before=True)),
            # Copilot's bash tool, its command's words writing into that lease: the same check
            ("pre-tool-use", json.dumps({"sessionId": "s3", "cwd": str(main), "toolName": "bash",
                                         "toolArgs": {"command": "cd src && sed -i s/a/b/ db/x.py 2>/dev/null"}})),
            ("user-prompt-submit", payload("user_prompt_submit", session="s2")),  # news to tell
            ("user-prompt-submit", payload("user_prompt_submit", session="s2")),  # nothing new
            ("stop", payload("stop")), ("stop", payload("stop")), ("session-end", payload("session_end"))]
    checks = []
    for name, body in runs:
        result = subprocess.run([sys.executable, "-c", PROBE_IMPORTS, "hook", name], input=body, cwd=main,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "baton:" not in result.stderr, result.stderr
        assert not unpinned(result, HOOK_PATH_IMPORTS[name]), \
            f"new on the {name} hook's path: {unpinned(result, HOOK_PATH_IMPORTS[name])}"
        if name != "session-start":
            assert {"pydantic", "numpy"}.isdisjoint(imported(result)), name
        if name == "post-tool-use":
            assert dataclasses_made(result) <= HOT_DATACLASSES, sorted(dataclasses_made(result) - HOT_DATACLASSES)
        if name == "pre-tool-use":
            checks.append(result)
    assert ["pathspec" in imported(result) for result in checks] == [False, False, True, True]
    assert all('"permissionDecision": "ask"' in result.stdout for result in checks[2:]), checks[2].stdout


def test_a_random_uuid_is_what_uuid4_gives():
    """The hot paths make their event ids without the uuid module: the same form and bits."""
    import uuid

    from baton.ids import random_uuid

    made = {random_uuid() for _ in range(2000)}
    assert len(made) == 2000
    for text in made:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_name_uuid_text_is_what_uuid5_gives():
    """A touch's conflict ids and the wire signals' are derived without the uuid module: the same text."""
    import uuid

    from baton.ids import BATON_NAMESPACE, CONFLICT_NAMESPACE, name_uuid, name_uuid_text

    for namespace in (CONFLICT_NAMESPACE, BATON_NAMESPACE, str(uuid.uuid4())):
        for name in ("", "OMN-1:OMN-2:src/a.py", "decision_recorded:ü" * 40, str(uuid.uuid4())):
            assert name_uuid_text(namespace, name) == str(uuid.uuid5(uuid.UUID(namespace), name))
            assert name_uuid_text(namespace, name) == str(name_uuid(namespace, name))


def test_the_touch_without_options_is_what_the_parser_answers(home, monkeypatch):
    """`baton touch PATH...` skips argparse: the same arguments as the parser would give."""
    from baton.skills.frontends import cli

    parsed = cli._parser("touch").parse_args(["touch", "a.py", "b/c.py"])
    given = {}
    handler = lambda args, stores: given.update(vars(args)) or 0  # noqa: E731
    monkeypatch.setattr(cli._BY_NAME["touch"], "handler", handler)
    assert cli.main(["touch", "a.py", "b/c.py"]) == 0
    assert given.pop("invocation").argv == ("touch", "a.py", "b/c.py")  # main's own, beside the arguments
    assert given == vars(parsed)


def test_the_hand_built_activity_event_is_the_model_event():
    from baton.skills.core.commit import wire_event

    at = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)
    wire = wire_event("activity_recorded", "OMN-1", "s1", at)
    event = TypeAdapter(Event).validate_json(wire.body)
    assert (event.type, event.task_id, event.session_id, event.at, str(event.event_id)) == \
        ("activity_recorded", "OMN-1", "s1", at, wire.event_id)
    dumped = json.loads(TypeAdapter(Event).dump_json(event))
    assert dumped == {**json.loads(wire.body), "at": "2026-11-01T12:00:00.123456Z"}


def test_the_parser_of_one_command_is_that_command_of_the_whole_parser():
    """A command builds only its own arguments' parser: each is the one the whole parser has."""
    from baton.skills.frontends.cli import _parser

    def described(parser) -> list:
        def actions(p) -> list:
            out = []
            for action in p._actions:
                out.append((type(action).__name__, action.dest, tuple(action.option_strings), action.nargs,
                            action.default, action.choices if not isinstance(action.choices, dict) else None,
                            action.required))
                if isinstance(action.choices, dict):  # nested subcommands (handoff verify)
                    out += [(name, actions(sub)) for name, sub in action.choices.items()]
            return out
        return actions(parser)

    whole = _parser()._subparsers._group_actions[0].choices
    for name, sub in whole.items():
        alone = _parser(name)._subparsers._group_actions[0].choices
        assert list(alone) == [name]
        assert described(alone[name]) == described(sub), name
