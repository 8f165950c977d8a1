"""Retention on a year of activity: the data home's size before and after `baton gc`, and
the gc's wall time, beside the size of the part retention keeps built on its own in the same
run (the floor a gc can reach).

A team's year on the embedded default: tickets started every day for 365 days, each bound,
touching files, deciding, completing steps, setting its next action and (all but the last
days' and a few stragglers) ended; their signals; their decisions' vectors in recall
(random unit vectors: what is measured is storage, not the model). The stores are written
through their own interfaces (registry, graph, signals, recall index), at the activity's
own times, then `baton gc` runs as a fresh process, as an operator or the projector runs it.

    .venv/bin/python -m bench.retention [--per-day 20]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

DAYS = 365
FILES = 400  # paths of the repository a ticket's touches are drawn from
REPO = "github.com/acme/shop"
ACTIVE_SHARE = 0.03  # tickets never ended (abandoned, or still worked on)


def size(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def ticket_events(task_id: str, start: datetime, rng: random.Random, *, ends: bool):
    """A ticket's events over its few days, and the signals they emit."""
    from baton.files import FileRef
    from baton.registry.model import (
        Bound,
        DecisionRecorded,
        Ended,
        FilesTouched,
        NextActionSet,
        PhaseChanged,
        Status,
        StepCompleted,
    )
    from baton.signals.model import Signal, SignalPayload, SignalType

    session = f"s-{task_id}"
    at = start
    events, signals, decisions = [], [], []

    def later(hours: float) -> datetime:
        nonlocal at
        at += timedelta(hours=hours * rng.random())
        return at

    def common() -> dict:
        return {"event_id": uuid.uuid4(), "task_id": task_id, "session_id": session, "at": later(2)}

    events.append(Bound(**common(), agent="claude", repo=REPO, worktree_path=f"/work/{task_id}", branch=task_id))
    signals.append(Signal(signal_id=uuid.uuid4(), signal_type=SignalType.ticket_claimed, task_id=task_id,
                          session_id=session, repo=REPO, emitted_at=at, payload=SignalPayload()))
    events.append(PhaseChanged(**common(), phase="implementing"))
    for _ in range(rng.randint(5, 15)):
        files = [FileRef(REPO, f"src/module_{rng.randrange(FILES)}.py") for _ in range(rng.randint(1, 3))]
        events.append(FilesTouched(**common(), files=files))
    for n in range(rng.randint(1, 4)):
        text = f"{task_id}: keep the {rng.choice(['ledger', 'cart', 'refund', 'invoice'])} in table {n}"
        event = DecisionRecorded(**common(), text=text, context="it must survive restarts", repo=REPO)
        events.append(event)
        decisions.append(event)
        signals.append(Signal(signal_id=uuid.uuid4(), signal_type=SignalType.decision_recorded, task_id=task_id,
                              session_id=session, repo=REPO, emitted_at=at, payload=SignalPayload(reason=text)))
    for n in range(rng.randint(2, 6)):
        events.append(StepCompleted(**common(), text=f"step {n} of {task_id} done"))
    events.append(NextActionSet(**common(), text=f"review {task_id}"))
    for _ in range(rng.randint(2, 8)):
        signals.append(Signal(signal_id=uuid.uuid4(), signal_type=SignalType.files_changed, task_id=task_id,
                              session_id=session, repo=REPO, emitted_at=later(4),
                              payload=SignalPayload(file_paths=[f"src/module_{rng.randrange(FILES)}.py"])))
    if ends:
        events.append(Ended(**common(), status=Status.completed))
        signals.append(Signal(signal_id=uuid.uuid4(), signal_type=SignalType.ticket_completed, task_id=task_id,
                              session_id=session, repo=REPO, emitted_at=at,
                              payload=SignalPayload(reason=f"{task_id} completed")))
    return events, signals, decisions


def build(home: Path, tickets: list[tuple[str, datetime, bool]], seed: int, *,
          signals_since: datetime | None = None) -> None:
    """Write the tickets' activity into an embedded data home through the stores (signals
    emitted since signals_since only, when given)."""
    from baton.graph.base import TicketRecord
    from baton.recall.base import DecisionRecord
    from baton.recall.embedded import EmbeddedDecisionIndex
    from baton.registry.model import FilesTouched
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    rng = random.Random(seed)
    vectors = np.random.default_rng(seed)
    stores = Stores(Settings.from_env({"BATON_HOME": str(home), "BATON_BACKGROUND_INDEXING": "off"}),
                    projection=apply_events)
    index = EmbeddedDecisionIndex(home / "recall", timeout=30)
    try:
        for start in range(0, len(tickets), 50):
            events, signals, decisions = [], [], []
            for task_id, began, ends in tickets[start:start + 50]:
                more = ticket_events(task_id, began, rng, ends=ends)
                events += more[0]
                signals += more[1]
                decisions += more[2]
            sessions = stores.registry.append(events)
            stores.graph.record_many([TicketRecord(
                task_id, session.status.value,
                list({f.key: f for e in events if e.task_id == task_id and isinstance(e, FilesTouched)
                      for f in e.files}.values()), session.last_activity, session_id=f"s-{task_id}")
                for task_id, session in sessions.items()])
            stores.signals.publish([s for s in signals if signals_since is None or s.emitted_at >= signals_since])
            matrix = vectors.standard_normal((len(decisions), 384)).astype("float32")
            index.upsert([DecisionRecord(project=stores.project, task_id=d.task_id, session_id=d.session_id,
                                         text=d.text, context=d.context, recorded_at=d.at.isoformat(), repo=REPO)
                          for d in decisions], matrix)
    finally:
        index.close()
        stores.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-day", type=int, default=20, help="tickets started per day (default 20)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    now = datetime.now(UTC)
    rng = random.Random(args.seed)
    tickets = []
    for day in range(DAYS, 0, -1):
        for n in range(args.per_day):
            began = now - timedelta(days=day, hours=rng.random() * 20)
            ends = day > 3 and rng.random() > ACTIVE_SHARE
            tickets.append((f"T{day:03d}-{n:02d}", began, ends))
    # What retention keeps (the defaults: ended sessions 90 days after their last activity,
    # signals 30 days): every ticket still active, and those started within the last 90
    # days (a ticket runs for at most a few days, so this takes those that ended since);
    # the signals of the last 30 days.
    kept = [t for t in tickets if not t[2] or t[1] > now - timedelta(days=90)]
    from baton.sqlite import scrub

    with tempfile.TemporaryDirectory(prefix="baton-retention-") as scratch:
        year, floor = Path(scratch) / "year", Path(scratch) / "kept"
        started = time.perf_counter()
        build(year, tickets, args.seed)
        built = time.perf_counter() - started
        build(floor, kept, args.seed, signals_since=now - timedelta(days=30))
        for path in floor.rglob("*.db"):
            scrub(path, timeout=30)  # compact, as a gc leaves what it rebuilt
        before = size(year)
        env = {**os.environ, "BATON_HOME": str(year), "BATON_RESIDENT": "off", "BATON_BACKGROUND_INDEXING": "off"}
        started = time.perf_counter()
        gc = subprocess.run([sys.executable, "-m", "baton.skills.frontends.cli", "gc", "--json"], env=env,
                            capture_output=True, text=True, check=True)
        took = time.perf_counter() - started
        after = size(year)
        import json

        report = json.loads(gc.stdout)
        print(f"a year of activity: {len(tickets):,} tickets ({args.per_day} a day for {DAYS} days, "
              f"{sum(not t[2] for t in tickets)} never ended), built in {built:.1f} s")
        print(f"{'data home':<44}{'size':>12}")
        print(f"{'before gc':<44}{megabytes(before):>12}")
        print(f"{'after gc':<44}{megabytes(after):>12}")
        print(f"{'floor: what retention keeps, built alone':<44}{megabytes(size(floor)):>12}  "
              f"({len(kept):,} tickets)")
        print(f"gc: {took:.2f} s wall (a fresh process); removed {len(report['sessions']):,} ended sessions, "
              f"{report['signals']:,} signals, {report['decisions']:,} decisions from recall")
        for name in ("registry.db", "signals.db", "graph.db", "recall/vectors.db"):
            print(f"  {name:<24}{megabytes((year / name).stat().st_size):>12} after gc, "
                  f"{megabytes((floor / name).stat().st_size):>12} floor")


if __name__ == "__main__":
    main()
