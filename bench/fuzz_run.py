"""The long fuzz run: hostile input on every inbound subject, mixed among valid messages.

    python bench/fuzz_run.py [--rounds 40] [--per-round 25] [--plans 5] [--seed 1]

Starts its own nats-server and secantusd-py (free ports, temp dir) and a `python -m
workers` process, then runs the same harness as tests/fuzz (more rounds, a seed of
your choosing, so each seed explores other inputs) and prints what the servers hold:
sent / recorded / dead-lettered / duplicates / redeliveries, the largest dead letter
and event, and every promise that was broken. Exits 1 if any was.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy.embedded import die_with_parent, free_port, start_mongo, start_nats  # noqa: E402
from store.database import ensure_indexes  # noqa: E402
from tests.conftest import wait_for_consumer  # noqa: E402
from tests.fuzz import harness  # noqa: E402


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        mongo = start_mongo(base / "mongo", port=free_port())
        nats_server = start_nats(base / "nats", port=free_port())
        env = {**os.environ, "NATS_URL": nats_server.url, "MONGODB_URI": mongo.url,
               "MONGODB_DB": "fuzz", "RECORDER_PARENT_WAIT_SECONDS": "3",
               "PYTHONPATH": str(ROOT)}
        log_path = base / "workers.log"
        proc = subprocess.Popen([sys.executable, "-m", "workers"], cwd=ROOT, env=env,  # noqa: ASYNC220 - started once, before the run
                                stdout=log_path.open("ab"), stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)
        client: AsyncMongoClient[dict] = AsyncMongoClient(mongo.url, tz_aware=True)
        nc = await nats.connect(nats_server.url)
        try:
            db = client["fuzz"]
            await ensure_indexes(db)
            await wait_for_consumer(nats_server.url, proc, log_path)
            started = time.perf_counter()
            tally = await harness.run(nc, db, rounds=args.rounds, per_round=args.per_round,
                                      n_plans=args.plans, seed=args.seed,
                                      drain_timeout=args.drain_timeout)
            elapsed = time.perf_counter() - started
            alive = proc.poll() is None
            print(tally.table())
            print(f"{'elapsed (s)':<32}  {elapsed:.1f}")
            print(f"{'worker alive':<32}  {alive}")
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(tally.kinds.items()))
            print(f"kinds: {kinds}")
            broken = harness.check(tally, workers_alive=alive)
            for b in broken:
                print(f"BROKEN: {b}")
            print("all promises held" if not broken else f"{len(broken)} promise(s) broken")
            return 1 if broken else 0
        finally:
            await nc.close()
            await client.close()
            proc.terminate()
            proc.wait(30)
            nats_server.stop()
            mongo.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--per-round", type=int, default=25)
    parser.add_argument("--plans", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
