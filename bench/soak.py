"""Baton as a team runs it, for a bounded time: 8 agent processes and (on servers) a
projector, each server and the projector killed once, and random CLI commands killed with
SIGKILL mid-flight. Then it checks that every acknowledged write is present exactly once,
every decision is searchable, and no Baton process is left running, and prints the run's
figures: operations, refusals, p50 and p99 per command, the time to heal, and (on servers)
the acknowledged touches missing from the conflict graph and the signals and events found
more than once on Kafka.

    .venv/bin/python -m bench.soak [--mode embedded|servers|both] [--seconds 90] [--agents 8] [--load]
                                   [--resident] [--cycle SECONDS]

The hour's soak: --mode servers --seconds 3600 --agents 16 --resident --cycle 300 (the
projector and the resident killed and one server restarted every five minutes; the resident
and the projector held to memory growth under 10% after the first ten minutes; each
command's p99 printed per ten minutes).

--load keeps the machine busy for the run's duration: a CPU burner per core and a loop of
small writes each flushed with fsync, in the scratch directory (bounded: they stop with the
run). Refused writes are the commands that exited with an error (a store unavailable: exit
3); lost ones, the acknowledged writes the checks do not find.

The soak itself is tests/soak.py: tests/test_soak.py runs a shorter one of each mode and asserts
the same checks.
"""

from __future__ import annotations

import argparse
import sys

from tests.soak import report, soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["embedded", "servers", "both"], default="both")
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", action="store_true", help="keep both cores and the disk busy during the run")
    parser.add_argument("--resident", action="store_true", help="the commands go through the resident process")
    parser.add_argument("--cycle", type=float, help="kill the projector and the resident and restart a server "
                                                    "every CYCLE seconds, not each once")
    args = parser.parse_args()
    failed = False
    for mode in (["embedded", "servers"] if args.mode == "both" else [args.mode]):
        result = soak(mode, args.seconds, args.agents, args.seed, load=args.load, resident=args.resident,
                      cycle=args.cycle)
        print(report(result) + "\n", flush=True)
        failed |= bool(result["problems"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
