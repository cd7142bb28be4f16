"""A NATS cluster loses nodes under load: nothing acknowledged is lost or doubled.

    python bench/cluster_fault_run.py [--decisions 10000] [--agents 4] [--workers 2]
                                      [--correction-plans 8] [--seed 1]

Starts three nats-server processes from deploy/nats-server.conf unedited (a JetStream
cluster on loopback, `sync_interval: always`, the roles of deploy/nats-auth.conf),
secantusd-py, and `--workers` worker processes given every server URL with
STREAM_PROFILE=production (R3 streams). While `--agents` agent clients publish the
decisions (one PubAck awaited at a time, retried by the client) and an operator client
requests reverts, appends and cancels, it kill -9s the DECISIONS stream's leader at a
quarter of the load and starts it again, then at 60% the CORRECTIONS leader (a
follower when that is the node killed first). Then it counts from MongoDB and from the
streams: sent / acknowledged / recorded / lost / duplicates, the faults (what was killed
when, time to a new leader, time until every replica was current), and corrections
requested / terminal / double-terminal, per-plan overlaps and order. Exits 1 if any
promise broke. The same run, smaller, is the `cluster` test
(tests/integration/test_scale_faults.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from pymongo.asynchronous.database import AsyncDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy.embedded import free_port, start_mongo  # noqa: E402
from store.database import Document, connect, ensure_indexes  # noqa: E402
from tests.integration.scale_support import Size, cluster_fault_run  # noqa: E402


def size_of(args: argparse.Namespace) -> Size:
    return Size(decisions=args.decisions, agents=args.agents,
                plans_per_agent=args.plans_per_agent, correction_plans=args.correction_plans,
                spacing=args.spacing, seed=args.seed, drain_timeout=args.drain_timeout)


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=4, help="agent clients publishing")
    parser.add_argument("--plans-per-agent", type=int, default=3)
    parser.add_argument("--correction-plans", type=int, default=8,
                        help="plans that get 5 corrections each (one of them cancelled)")
    parser.add_argument("--spacing", type=float, default=2.0,
                        help="seconds between rounds of correction requests")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="keep the servers' data and every log under DIR")
    return parser


@contextlib.asynccontextmanager
async def mongo_stack(args: argparse.Namespace, name: str
                      ) -> AsyncIterator[tuple[Path, str, AsyncDatabase[Document]]]:
    """A temp dir (or one kept under --keep), a secantusd-py in it and database `name`
    with its indexes: what both fault-run scripts start before their NATS cluster."""
    kept = contextlib.nullcontext(tempfile.mkdtemp(dir=args.keep)) if args.keep else None
    with kept or tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if args.keep:
            print(f"servers' data and logs kept in {base}", flush=True)
        mongo = start_mongo(base / "mongo", port=free_port())
        client = connect(mongo.url)
        try:
            db = client[name]
            await ensure_indexes(db)
            yield base, mongo.url, db
        finally:
            await client.close()
            mongo.stop()


async def main(args: argparse.Namespace) -> int:
    async with mongo_stack(args, "cluster_fault_run") as (base, mongo_url, db):
        report = await cluster_fault_run(base, mongo_url, db, "cluster_fault_run",
                                         size_of(args), workers=args.workers,
                                         faults=not args.no_faults)
        print(report.table(), flush=True)
        return 1 if report.problems else 0


if __name__ == "__main__":
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--no-faults", action="store_true",
                        help="the same load with nothing killed (the control)")
    sys.exit(asyncio.run(main(parser.parse_args())))
