"""A data home's stores as a test needs them beyond the embedded default: every store on
its server (use_servers), and the recall index as Baton left it before projects
(unscope_recall)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

# BATON_STORE_TIMEOUT for a home whose servers are healthy (use_servers, and the fixtures
# postgres_url and bolt_uri): a healthy server on 2 busy cores can take longer than the
# embedded default's 2 s to import its client, connect and answer. The budget bounds the
# wait for a server that is down, and the tests of that set their own (tests/timing.store_budget).
SERVER_BUDGET = 15


def ticket_vectors(index, project: str, task_id: str) -> dict:
    """The ticket's stored vectors, by point id, as the index's points() reads them."""
    return {record.point_id: vector for record, vector in index.points(project) if record.task_id == task_id}


def use_servers(request, monkeypatch, tmp_path: Path, *, qdrant: bool, kafka: bool = True) -> None:
    """Point every store at its server: PostgreSQL, the Bolt server, Kafka (signals and the
    event log with its projector), and (qdrant) qdrant-client, in local mode since no
    Qdrant server can be installed here; with SERVER_BUDGET."""
    monkeypatch.setenv("BATON_STORE_TIMEOUT", str(SERVER_BUDGET))
    monkeypatch.setenv("BATON_DATABASE_URL", request.getfixturevalue("postgres_url"))
    monkeypatch.setenv("BATON_GRAPH_URL", request.getfixturevalue("bolt_uri"))
    if kafka:
        monkeypatch.setenv("BATON_KAFKA_BOOTSTRAP", request.getfixturevalue("kafka_server").bootstrap)
        monkeypatch.setenv("BATON_KAFKA_TOPIC_PREFIX", f"test-{uuid.uuid4().hex[:10]}.")
    if qdrant:
        monkeypatch.setenv("BATON_QDRANT_URL", f"file://{tmp_path / 'qdrant'}")


def unscope_recall(home: Path) -> dict:
    """Make the embedded recall index of home as Baton left it before projects: point ids of
    (ticket, text), payloads without a project, one point per (ticket, text) whichever
    project recorded it first, and no segments (those of before were of another format).
    Returns the vector of each point kept, by its id."""
    import numpy as np

    from baton.recall.embedded import EmbeddedDecisionIndex
    from baton.recall.wire import unscoped_point_id
    from baton.sqlite import write_transaction

    index = EmbeddedDecisionIndex(home / "recall", timeout=5)
    conn = index._db.conn()
    kept: dict = {}
    with write_transaction(conn):
        for seq, payload, vector in conn.execute("SELECT seq, payload, vector FROM vectors ORDER BY seq").fetchall():
            fields = json.loads(payload)
            del fields["project"]
            old = unscoped_point_id(fields["task_id"], fields["text"])
            if old in kept:
                conn.execute("DELETE FROM vectors WHERE seq = ?", (seq,))
                continue
            kept[old] = np.frombuffer(vector, "<f4")
            conn.execute("UPDATE vectors SET project = NULL, point_id = ?, payload = ? WHERE seq = ?",
                         (str(old), json.dumps(fields), seq))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'count'", (str(len(kept)),))
    index.close()
    shutil.rmtree(home / "recall" / "index", ignore_errors=True)
    return kept


def record_touch(store, task_id: str, session_id: str, at, files, *, event_id: str) -> None:
    """Append a files_touched event to a registry without projecting it yet, as `baton touch` does."""
    from baton.registry.wire import files_touched_body

    store.append_body(event_id, task_id, at, "files_touched", files_touched_body(event_id, task_id, session_id, at,
                                                                                  files))
