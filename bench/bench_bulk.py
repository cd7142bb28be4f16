"""What a bulk dry run costs: the whole filter previewed over many plans.

    python bench/bench_bulk.py [--plans 500] [--runs 3]

Starts its own secantusd-py (free port, temp dir), loads `--plans` plans of 5 decisions
(tests/integration/bulk_support.py: each makes the same bad choice twice, the second
inside the first's subtree), and times, p50 and max over `--runs`, through the service
the CLI and the console use (services/bulk_preview.py): finding the matches alone (the
search, page after page), then the whole preview (matches, one impact walk per match,
conflicts, the sum) for one match per plan, two per plan (a revert skips the covered
half) and two per plan as an append. No operator identity: the scope check reads no
plan records here.

Timings on a shared machine are noisy: note the load average printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.bulk.model import BulkFilter  # noqa: E402
from contracts.corrections.states import CorrectionMode  # noqa: E402
from contracts.decisions.types import DecisionType  # noqa: E402
from contracts.shared.ids import new_id  # noqa: E402
from deploy.embedded import free_port, start_mongo  # noqa: E402
from services.bulk_preview import find_matches, preview  # noqa: E402
from store.database import connect, ensure_indexes  # noqa: E402
from store.mongo_store import MongoStore  # noqa: E402
from tests.integration.bulk_support import load_plans  # noqa: E402

BOUND = 10_000
SCAN_MAX = 2000


async def timed(runs: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    times, last = [], None
    for _ in range(runs):
        start = time.perf_counter()
        last = await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times), last


def cases() -> list[tuple[str, BulkFilter, CorrectionMode]]:
    both = BulkFilter(text="leftpad yanked")
    one = BulkFilter(text="leftpad yanked", decision_type=DecisionType.TOOL_INVOCATION)
    return [("revert, 1 match per plan", one, CorrectionMode.REVERT),
            ("revert, 2 per plan (conflicts)", both, CorrectionMode.REVERT),
            ("append, 2 per plan", both, CorrectionMode.APPEND)]


async def main(plans: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_mongo(Path(tmp), port=free_port())
        try:
            client = connect(server.url)
            db = client["bench"]
            await ensure_indexes(db)
            start = time.perf_counter()
            await load_plans(db, plans)
            loaded = time.perf_counter() - start
            reads = MongoStore(db)
            rows = []
            for name, where, mode in cases():
                f50, fmax, hits = await timed(runs, lambda w=where: find_matches(
                    reads, w, BOUND, SCAN_MAX))
                p50, pmax, matched = await timed(runs, lambda w=where, m=mode: preview(
                    reads, w, m, batch_id=new_id(), identity=None, bound=BOUND,
                    scan_max=SCAN_MAX, max_decisions=10_000))
                p = matched.preview
                rows.append((name, len(hits), p.to_request, p.conflicts_count,
                             p.affected_decisions, f50, fmax, p50, pmax))
            await client.close()
        finally:
            server.stop()
    print(f"bulk dry run bench: {plans} plans of 5 decisions (SecantusDB, loaded in "
          f"{loaded:.0f} s), {runs} runs; load average "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"  {'case':<32} {'matches':>7} {'request':>7} {'conflicts':>9} {'reach':>6} "
          f"{'find p50 s':>10} {'find max':>8} {'preview p50 s':>13} {'max':>6} "
          f"{'ms/match':>8}")
    for name, n, req, conf, reach, f50, fmax, p50, pmax in rows:
        print(f"  {name:<32} {n:7d} {req:7d} {conf:9d} {reach:6d} {f50:10.2f} {fmax:8.2f} "
              f"{p50:13.2f} {pmax:6.2f} {p50 / n * 1000:8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plans", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.plans, args.runs))
