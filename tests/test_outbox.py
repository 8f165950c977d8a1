"""The outbox (baton.outbox) shared by the threads of one process."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from baton.outbox import Outbox


def test_threads_of_one_process_write_and_read_the_outbox_at_once(tmp_path):
    """A read a command stopped waiting for runs on in its own thread and writes the outbox
    (it forgets what the registry holds) while the command keeps its events there: both
    succeed, one transaction after the other (an hour's soak refused a write with "cannot
    start a transaction within a transaction")."""
    outbox = Outbox(tmp_path / "kafka-events-outbox.db", earlier="kafka", timeout=10, store="event log",
                    remember=True)
    start = threading.Barrier(2)

    def keep() -> None:
        start.wait()
        for n in range(300):
            outbox.keep([(f"m{n}", "T-1", "{}")])
            outbox.drop([f"m{n}"])

    def forget() -> None:
        start.wait()
        for _ in range(300):
            outbox.forget_delivered([message_id for message_id, _, _ in outbox.unconfirmed()][:5])

    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(work) for work in (keep, forget)]
        for work in running:
            work.result(timeout=60)  # what it raised, raised here
    outbox.close()
