"""Several worker processes under SIGKILLs and a SIGTERM, then a throughput curve.

    python bench/workers_fault_run.py [--decisions 10000] [--workers 3] [--kills 6]
                                      [--seed 1] [--burst 2000] [--reps 3] [--no-curve]

The stack of bench/cluster_fault_run.py (three nats-server nodes, R3 streams,
secantusd-py) with `--workers` `agents workers` processes (`python -m workers`, as the
`Workers` fixture starts them). While the agents' decisions and the operator's
corrections flow, and while the recorder still has a backlog, a random worker is
SIGKILLed every 2 to 5 s (`--kills` times) and started again 0 to 1.5 s later.
Then: nothing lost or doubled (the same counts as the cluster run), each plan's
corrections never ran at the same time and ran in arrival order (from the stored
history); a SIGTERM of a worker during a second load finishes
its batches, exits 0, and the recorder's consumer redelivers nothing (its deliveries
minus the messages it had to deliver, before and after). Exits 1 if a promise broke.

Then, on the same stack, the throughput curve: decisions/s recorded with 1, 2, ...
`--workers` worker processes, each the median of `--reps` bursts of `--burst`
decisions (publish to the last one in MongoDB). Every process runs on the same
machine: on 2 cores, more worker processes share the cores with the servers, the
publisher and each other, so the curve says what that machine allows, not what more
machines would. Say whether the machine was otherwise quiet (`--label`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_fault_run import arguments, mongo_stack, size_of  # noqa: E402
from tests.integration.scale_support import (  # noqa: E402
    curve_table,
    throughput_curve,
    workers_fault_run,
)


async def main(args: argparse.Namespace) -> int:
    async with mongo_stack(args, "workers_fault_run") as (base, mongo_url, db):
        report, stack = await workers_fault_run(
            base, mongo_url, db, "workers_fault_run", size_of(args),
            workers=args.workers, kills=args.kills)
        try:
            print(report.table(), flush=True)
            if not args.no_curve:
                curve = await throughput_curve(stack, db, args.burst, args.reps)
                load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                print(curve_table(curve, args.burst,
                                  f"{args.label}; load average at the end {load}"),
                      flush=True)
        finally:
            await stack.stop()
        return 1 if report.problems else 0


if __name__ == "__main__":
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3, help="worker processes")
    parser.add_argument("--kills", type=int, default=6, help="SIGKILLs during the load")
    parser.add_argument("--burst", type=int, default=2000, help="decisions per timed burst")
    parser.add_argument("--reps", type=int, default=3, help="bursts per worker count")
    parser.add_argument("--no-curve", action="store_true")
    parser.add_argument("--label", default="2 cores shared with the servers and the "
                        "publisher", help="how loaded the machine was, for the table")
    sys.exit(asyncio.run(main(parser.parse_args())))
