"""Recovery time after a SIGKILL: corrections and recording, with the default settings.

    python bench/bench_recovery.py [--reps 3] [--kills 20] [--burst 1000]

Starts its own nats-server and secantusd-py (free ports, temp dir). Corrections: for
each of the 7 crash steps, `--reps` times, a worker SIGKILLs itself at that step of a
revert and a fresh one is started at once; the time is from that start to the
correction's terminal event. Recording: `--kills` times, a worker recording a burst
of decisions is SIGKILLed at a random moment and restarted at once; the time is from
the restart to the burst's last persisted event. Prints p50 and max of each (overall
and per step) and anything lost or doubled; exits 1 if anything was.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import nats
from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy.embedded import free_port, start_mongo, start_nats  # noqa: E402
from store.database import ensure_indexes  # noqa: E402
from tests.integration.recovery_support import (  # noqa: E402
    CRASH_STEPS,
    correction_kills,
    recording_kills,
    table,
)


async def main(args: argparse.Namespace) -> int:
    problems = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        mongo = start_mongo(base / "mongo", port=free_port())
        try:
            for kind in ("corrections", "recording"):
                if kind not in args.only:
                    continue
                work = base / kind
                work.mkdir()
                server = start_nats(work, port=free_port())
                client: AsyncMongoClient[dict] = AsyncMongoClient(mongo.url, tz_aware=True)
                nc = await nats.connect(server.url)
                try:
                    db = client[kind]
                    await ensure_indexes(db)
                    if kind == "corrections":
                        t = await correction_kills(server.url, mongo.url, kind, db, nc, work,
                                                   CRASH_STEPS, reps=args.reps)
                    else:
                        t = await recording_kills(server.url, mongo.url, kind, db, nc, work,
                                                  kills=args.kills, burst=args.burst,
                                                  timeout=args.timeout)
                    print(table(kind, t), flush=True)
                    problems += len(t.problems)
                finally:
                    await nc.close()
                    await client.close()
                    server.stop()
        finally:
            mongo.stop()
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="kills per correction step")
    parser.add_argument("--kills", type=int, default=20, help="kills while recording")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--only", nargs="*", default=["corrections", "recording"])
    sys.exit(asyncio.run(main(parser.parse_args())))
