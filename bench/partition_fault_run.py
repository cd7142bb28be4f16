"""The partitioned recorder under SIGKILLs, graceful stops and joins.

    python bench/partition_fault_run.py [--decisions 10000] [--workers 3] [--partitions 6]
                                        [--rounds 3] [--seed 1]

The stack of bench/cluster_fault_run.py (three nats-server nodes, R3 streams,
secantusd-py) with `--workers` `python -m workers` processes sharing `--partitions`
recorder partitions (RECORDER_PARTITIONS). While agents record and an operator
corrects, each round SIGKILLs a worker and starts it again (it joins), then SIGTERMs
another and starts it again; after each, it waits until every partition is held by a
running worker, evenly, and prints how long that took and who holds what. Then:
nothing lost or doubled (the counts of the other fault runs), and no partition held by
two workers at once, from the lines the workers log when they take and let go of one.
Exits 1 if a promise broke.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_fault_run import arguments, mongo_stack, size_of  # noqa: E402
from tests.integration.partition_faults import partition_fault_run  # noqa: E402


async def main(args: argparse.Namespace) -> int:
    async with mongo_stack(args, "partition_fault_run") as (base, mongo_url, db):
        report = await partition_fault_run(
            base, mongo_url, db, "partition_fault_run", size_of(args),
            workers=args.workers, partitions=args.partitions, rounds=args.rounds)
        print(report.table(), flush=True)
        return 1 if report.problems else 0


if __name__ == "__main__":
    parser = arguments(__doc__ or "")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    sys.exit(asyncio.run(main(parser.parse_args())))
