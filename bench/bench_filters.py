"""What a filter's shape costs on the embedded server: one document by `_id`, alone and
beside other conditions, in a collection of `--docs` documents.

    python bench/bench_filters.py [--docs 1000,20000] [--reads 20]

Starts its own secantusd-py (free port, temp dir). For each collection size it prints
the median milliseconds of a `find_one` and of an `update_one` per filter shape. On
SecantusDB a logical operator (`$or`, `$and`, `$nor`, `$expr`) anywhere at the top of a
filter makes it read every document, `_id` or not, while field predicates (`$in`,
`$not`, null) beside `_id` keep to the one document: the store writes its filters on
the recording path as field predicates, or reads by `_id` first (store/batch_insert.py,
store/holds.py, store/batch_rare_facts.py). MongoDB uses the `_id` index for every
shape here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy.embedded import free_port, start_mongo  # noqa: E402

NOW = datetime.now(UTC)
EITHER = [{"spawned_at": None}, {"spawned_at": {"$lte": NOW}}]
SHAPES: dict[str, Callable[[str], dict[str, Any]]] = {
    "_id": lambda i: {"_id": i},
    "_id, field null": lambda i: {"_id": i, "spawned_at": None},
    "_id, field $in [null, x]": lambda i: {"_id": i, "owner": {"$in": [None, "a"]}},
    "_id, field $not $gt": lambda i: {"_id": i, "spawned_at": {"$not": {"$gt": NOW}}},
    "_id, $or": lambda i: {"_id": i, "$or": EITHER},
    "_id, $and [$or]": lambda i: {"_id": i, "$and": [{"$or": EITHER}]},
    "_id, $expr": lambda i: {"_id": i, "$expr": {"$eq": ["$version", 0]}},
}


async def timed(coll: Any, shape: Callable[[str], dict[str, Any]], ids: list[str], *,
                update: bool) -> float:
    """Median milliseconds of one find_one (or update_one) per ID."""
    times = []
    for i in ids:
        t0 = time.perf_counter()
        if update:
            await coll.update_one(shape(i), {"$inc": {"n": 1}})
        else:
            await coll.find_one(shape(i))
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def measure(url: str, sizes: list[int], reads: int) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, tz_aware=True)
    try:
        print(f"{'documents':>9} | {'filter':<26} | {'find_one ms':>11} | {'update_one ms':>13}")
        print("-" * 70)
        for n in sizes:
            coll = client["bench_filters"][f"plans_{n}"]
            await coll.insert_many([{"_id": f"p{i:07d}", "spawned_at": None, "owner": None,
                                     "version": 0} for i in range(n)])
            for name, shape in SHAPES.items():
                ids = [f"p{(i * 7919) % n:07d}" for i in range(reads)]
                find = await timed(coll, shape, ids, update=False)
                update = await timed(coll, shape, ids, update=True)
                print(f"{n:>9,} | {name:<26} | {find:>11.2f} | {update:>13.2f}", flush=True)
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", default="1000,20000")
    ap.add_argument("--reads", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_mongo(Path(tmp), port=free_port())
        try:
            asyncio.run(measure(server.url, [int(x) for x in args.docs.split(",")],
                                args.reads))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
