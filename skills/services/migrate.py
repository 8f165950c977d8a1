"""Copy the embedded data set into the configured servers.

Every copy is idempotent: registry events keep their ids (a replay is skipped), graph
writes are MERGEs, decision points keep their ids. Running it twice changes nothing. Each
copy is of the project's records (baton.projects), decision points included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice

from baton.errors import BadInput
from baton.files import FileRef
from baton.skills.core.indexing import heal_unscoped
from baton.skills.runtime.stores import Stores

BATCH = 500
EMBEDDED_REGISTRY = "embedded session registry"  # the source of a migration, beside the configured one


@dataclass
class MigrationReport:
    copied: dict[str, str] = field(default_factory=dict)


def migrate(target: Stores) -> MigrationReport:
    """Copy registry events, graph touches and decision points from the embedded stores of
    the same data home into whichever of them target configures with a server."""
    on_servers = target.on_servers()
    if not on_servers:
        raise BadInput("no server configured: set BATON_DATABASE_URL, BATON_GRAPH_URL or BATON_QDRANT_URL")
    source = target.embedded()
    report = MigrationReport()
    try:
        sessions = source.registry.list_sessions(include_inactive=True).unwrap(EMBEDDED_REGISTRY)
        if "registry" in on_servers:
            copied = 0
            for session in sessions:
                events = source.registry.events(session.task_id).unwrap(EMBEDDED_REGISTRY) or []
                for start in range(0, len(events), BATCH):
                    target.budget.renew()  # a copy takes many commands' worth of server time
                    target.registry.append(events[start:start + BATCH])
                copied += len(events)
            report.copied["registry"] = f"{copied} events of {len(sessions)} tickets"
        if "graph" in on_servers:
            for session in sessions:
                target.budget.renew()
                target.graph.record(session.task_id, session.status.value,
                                    [FileRef(repo=t.repo, path=t.path) for t in session.files.values()],
                                    session.last_activity, depends_on=session.depends_on)
            report.copied["graph"] = f"{len(sessions)} tickets"
        if "recall" in on_servers:
            index, copied = target.decision_index(), 0
            embedded = source.decision_index()
            try:
                if embedded.unscoped_count():
                    # Decisions indexed before projects: stored again in their projects first.
                    heal_unscoped(source, embedded)
                points = embedded.points(target.project, BATCH)
                while batch := list(islice(points, BATCH)):
                    target.budget.renew()
                    index.upsert(*zip(*batch, strict=True))
                    copied += len(batch)
            finally:
                embedded.close()
                index.close()
            report.copied["recall"] = f"{copied} decisions"
    finally:
        source.close()
    return report
