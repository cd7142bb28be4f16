"""What finding a record by the last characters of its ID costs, beside a whole ID, and
what a filtered plan list costs.

    python bench/bench_lookup.py [--decisions 20000] [--plans 200] [--runs 5]

Starts its own secantusd-py (free port, temp dir), writes `--plans` plans holding
`--decisions` decisions in all straight through the store's document mapping, then
times, through the read port the CLI and the console use (services/id_lookup.py,
services/plan_list.py):

- a whole ID (looked up by `_id`); an 8-character suffix of a decision (the decisions
  scanned by an anchored regular expression: no index serves a suffix) and of a plan
  (only the plan documents scanned); a suffix nothing ends with, of any kind (every
  collection scanned to its end);
- the plan list's first page, unfiltered, and filtered by text (one regular expression
  over the roots) and by a status no plan has (every root read, SCAN_MAX at most).

Timings on a shared machine are noisy: medians over `--runs`, in one run for the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.decisions.model import Decision  # noqa: E402
from contracts.decisions.plan_states import PlanStatus  # noqa: E402
from contracts.shared.views import IdKind, RootFilter  # noqa: E402
from deploy.embedded import free_port, start_mongo  # noqa: E402
from services.id_lookup import resolve  # noqa: E402
from services.plan_list import find_plans  # noqa: E402
from store.database import DECISIONS, PLANS, connect, ensure_indexes  # noqa: E402
from store.decisions import to_document  # noqa: E402
from store.mongo_store import MongoStore  # noqa: E402
from tests.factories import decision, root  # noqa: E402


def plan_docs(size: int) -> list[Decision]:
    first = root()
    out = [Decision.model_validate({**first, "artifacts_produced": [],
                                    "sequence_number": 0})]
    for i in range(1, size):
        raw = decision(first["plan_id"], out[(i - 1) // 3].decision_id, "strategy_choice")
        out.append(Decision.model_validate({**raw, "artifacts_produced": [],
                                            "sequence_number": i}))
    return out


async def median(runs: int, call: Callable[[], Awaitable[Any]]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def main(decisions: int, plans: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_mongo(Path(tmp), port=free_port())
        try:
            client = connect(server.url)
            db = client["bench"]
            await ensure_indexes(db)
            per_plan = max(1, decisions // plans)
            written: list[Decision] = []
            for _ in range(plans):
                docs = plan_docs(per_plan)
                await db[DECISIONS].insert_many([to_document(d, "h", 0) for d in docs])
                await db[PLANS].insert_one({"_id": docs[0].plan_id, "next_sequence": len(docs),
                                            "status": "active",
                                            "root_decision_id": docs[0].decision_id})
                written += docs
            reads = MongoStore(db)
            target = written[len(written) // 2].decision_id
            rows = [
                ("whole decision ID (by _id)", await median(runs, lambda: reads.decisions.get(
                    target))),
                ("decision by 8-char suffix", await median(runs, lambda: resolve(
                    reads, target[-8:], {IdKind.DECISION}))),
                ("plan by 8-char suffix", await median(runs, lambda: resolve(
                    reads, written[0].plan_id[-8:], {IdKind.PLAN}))),
                ("any kind, nothing ends with it", await median(
                    runs, lambda: reads.views.ids_ending("ZZZZZZZZ"))),
                ("plan list, first 50", await median(runs, lambda: find_plans(reads))),
                ("plan list, --text", await median(runs, lambda: find_plans(
                    reads, RootFilter(text="rate limiting")))),
                ("plan list, --status abandoned", await median(runs, lambda: find_plans(
                    reads, status=PlanStatus.ABANDONED))),
            ]
            await client.close()
        finally:
            server.stop()
    print(f"{len(written):,} decisions in {plans} plans (SecantusDB), median of {runs}")
    whole = rows[0][1]
    for name, seconds in rows:
        print(f"  {name:<32} {seconds * 1000:9.1f} ms  {seconds / whole:8.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.decisions, args.plans, args.runs))
