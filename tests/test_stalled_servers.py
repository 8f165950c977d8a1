"""A server that stops answering after it answered (a paused JVM or postmaster, a frozen
host) costs what the budget has left, then answers again once it goes on. The clients read
a connected socket without a limit and no server-side timeout runs while the server is
stopped, so without Baton's own cut a long-running process (the projector, a delivery, the
dashboard) would wait for ever on its next call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests import timing

pytestmark = pytest.mark.servers  # the servers come through getfixturevalue

BUDGET = 2.0


def answered(call: Callable[[], object]) -> tuple[object, float]:
    """What call() returned or raised, and how long it took; a call still waiting after a
    minute is reported as such rather than hanging the test."""
    said: list[object] = []

    def run() -> None:
        try:
            said.append(call())
        except Exception as exc:  # noqa: BLE001 -- what the store raised is the answer
            said.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    return (said[0] if said else "still waiting after 60 s"), time.monotonic() - started


def postgres_store(request: pytest.FixtureRequest) -> tuple[object, Callable[[], object], object]:
    from baton.budget import Budget, postgres_server
    from baton.registry.postgres import PostgresSessionStore

    url = request.getfixturevalue("postgres_url")
    budget = Budget(BUDGET)
    store = PostgresSessionStore(url, timeout=BUDGET, project="shop", gate=budget.gate(postgres_server(url)))
    return budget, lambda: store.get("OMN-1"), request.getfixturevalue("postgres_server")


def bolt_graph(request: pytest.FixtureRequest) -> tuple[object, Callable[[], object], object]:
    from baton.budget import Budget, bolt_server
    from baton.graph.bolt import BoltConflictGraph

    server = request.getfixturevalue("neo4j_server")
    request.getfixturevalue("bolt_uri")  # emptied
    budget = Budget(BUDGET)
    graph = BoltConflictGraph(server.uri, timeout=BUDGET, gate=budget.gate(bolt_server(server.uri)))
    return budget, graph.counted, server


@pytest.mark.parametrize("open_store", [postgres_store, bolt_graph], ids=["postgres", "bolt"])
def test_a_server_that_stops_answering_costs_the_budget_and_answers_once_it_goes_on(request, open_store):
    budget, call, server = open_store(request)
    first, _ = answered(call)  # connects (and makes the schema): the server answered
    assert not isinstance(first, Exception), first
    budget.renew()
    _, healthy = answered(call)
    budget.renew()
    server.pause()
    try:
        said, waited = answered(call)
    finally:
        server.resume()
    reason = str(getattr(said, "reason", said))
    assert f"no answer within the {BUDGET:g} s budget (BATON_STORE_TIMEOUT)" in reason, said
    assert waited < timing.bound(healthy, BUDGET + 0.5), f"{waited:.1f}s (floor {healthy:.2f}s)"

    def answers() -> bool:
        budget.renew()  # the next unit of a long-running process
        answer, _ = answered(call)
        return not isinstance(answer, Exception) and type(answer).__name__ != "Unavailable"

    timing.wait_for(answers, timeout=30, what="the server answering again")
