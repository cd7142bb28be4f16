"""What a search costs on a large ledger, and what its tokens cost the recorder.

    python bench/bench_search.py [--decisions 100000] [--runs 10] [--cost-decisions 5000]

Starts its own secantusd-py (free port, temp dir) and, in one run:

- the tokens' cost to recording: the same `--cost-decisions` documents written with a
  bare insert_many (chunks of 1,000, every index of the decisions collection) with
  their search_tokens and without them, decisions per second each and the ratio; and
  the client's CPU time making the tokens;
- search latency, p50 and p99 over `--runs`, through the read port the CLI and the
  console use (services/search.py), on `--decisions` decisions in plans of 100 (varied
  words, types, agents, artifact paths and times, loaded straight through the store's
  document mapping): one common word, two words, a rare word, a type, an agent, a
  folder, an agent in the last hour (checked in the service), a plan status, a word
  nothing has beside a common one (the scan bound), and the first page unfiltered.

Timings on a shared machine are noisy: note the load average printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.decisions.model import Decision  # noqa: E402
from contracts.decisions.plan_states import PlanStatus  # noqa: E402
from contracts.decisions.search import SearchFilter, search_tokens  # noqa: E402
from contracts.decisions.types import DecisionType  # noqa: E402
from deploy.embedded import free_port, start_mongo  # noqa: E402
from services.search import search  # noqa: E402
from store.database import DECISIONS, PLANS, connect, ensure_indexes  # noqa: E402
from store.decisions import to_document  # noqa: E402
from store.mongo_store import MongoStore  # noqa: E402
from tests.factories import decision, root  # noqa: E402

PLAN_SIZE = 100
CHUNK = 1000
WORDS = [f"{stem}{i}" for i in range(300) for stem in ("cache", "queue", "retry")]
AGENTS = [f"agent-{i}" for i in range(20)]
TYPES = [t for t in DecisionType if t is not DecisionType.PROMPT_DEFINITION]
NOW = datetime.now(UTC)


def _text(rng: random.Random, n: int) -> str:
    return "Use the " + " ".join(rng.choice(WORDS) for _ in range(n)) + " approach"


def plan_docs(rng: random.Random, index: int) -> list[Decision]:
    """One plan of PLAN_SIZE decisions, a tree three wide, created over the last days."""
    first = root()
    first["created_at"] = NOW - timedelta(hours=index % 96)
    out = [Decision.model_validate({**first, "sequence_number": 0})]
    for i in range(1, PLAN_SIZE):
        raw = decision(first["plan_id"], out[(i - 1) // 3].decision_id,
                       rng.choice(TYPES).value, question=_text(rng, 4),
                       chosen_option=_text(rng, 3), rationale=_text(rng, 6),
                       agent={"name": rng.choice(AGENTS)},
                       created_at=NOW - timedelta(hours=index % 96, minutes=i % 60),
                       artifacts_produced=[{"artifact_path": f"src/mod{rng.randrange(50)}/"
                                            f"f{rng.randrange(20)}.py",
                                            "artifact_type": "file"}])
        out.append(Decision.model_validate({**raw, "sequence_number": i}))
    return out


async def insert_rate(db: Any, docs: list[dict[str, Any]]) -> float:
    await ensure_indexes(db)
    start = time.perf_counter()
    for i in range(0, len(docs), CHUNK):
        await db[DECISIONS].insert_many(docs[i:i + CHUNK])
    return len(docs) / (time.perf_counter() - start)


async def token_cost(client: Any, decisions: list[Decision]) -> list[str]:
    start = time.process_time()
    for d in decisions:
        search_tokens(d, None)
    making = (time.process_time() - start) / len(decisions) * 1000
    with_tokens = [to_document(d) for d in decisions]
    bare = [{k: v for k, v in doc.items() if k != "search_tokens"} for doc in with_tokens]
    per = statistics.mean(len(doc["search_tokens"]) for doc in with_tokens)
    plain = await insert_rate(client["cost_without"], bare)
    tokened = await insert_rate(client["cost_with"], with_tokens)
    return [f"tokens' cost to recording ({len(decisions):,} decisions, bare insert_many in "
            f"chunks of {CHUNK}, every index; {per:.1f} tokens per decision):",
            f"  without search_tokens {plain:9.0f} decisions/s",
            f"  with search_tokens    {tokened:9.0f} decisions/s   ({tokened / plain:.2f}x)",
            f"  making the tokens     {making:9.3f} s of client CPU per 1,000 decisions"]


async def latency(runs: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float, int]:
    times, found = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        page = await call()
        times.append(time.perf_counter() - start)
        found = len(page.hits)
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times), p99, found


def queries(sample: Decision) -> list[tuple[str, SearchFilter, PlanStatus | None]]:
    word = sample.question.split()[2]
    pair = " ".join(sample.question.split()[2:4])
    agent = sample.agent.name if sample.agent else AGENTS[0]
    return [
        ("one word", SearchFilter(text=word), None),
        ("two words", SearchFilter(text=pair), None),
        ("a rare word", SearchFilter(text="invoices"), None),
        ("a type", SearchFilter(decision_type=DecisionType.TOOL_INVOCATION), None),
        ("an agent", SearchFilter(agent=agent), None),
        ("a folder", SearchFilter(path="src/mod7/"), None),
        ("an agent, last hour", SearchFilter(agent=agent, since=NOW - timedelta(hours=1)),
         None),
        ("a word, plan completed", SearchFilter(text=word), PlanStatus.COMPLETED),
        ("common word + absent word", SearchFilter(text=f"{word} zzabsent"), None),
        ("no filter", SearchFilter(), None),
    ]


def _searching(reads: MongoStore, where: SearchFilter, status: PlanStatus | None
               ) -> Callable[[], Awaitable[Any]]:
    return lambda: search(reads, where, status=status)


async def main(decisions: int, runs: int, cost_decisions: int) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_mongo(Path(tmp), port=free_port())
        try:
            client = connect(server.url)
            sample_plans = [plan_docs(rng, i) for i in range(max(1, cost_decisions // PLAN_SIZE))]
            cost = await token_cost(client, [d for p in sample_plans for d in p])
            db = client["bench"]
            await ensure_indexes(db)
            load_start = time.perf_counter()
            sample: Decision | None = None
            for i in range(max(1, decisions // PLAN_SIZE)):
                docs = plan_docs(rng, i)
                if i == 3:  # a rare word, in one decision
                    docs[5] = docs[5].model_copy(update={"question": "Ship the invoices?"})
                await db[DECISIONS].insert_many([to_document(d, "h", 0) for d in docs])
                await db[PLANS].insert_one({"_id": docs[0].plan_id, "next_sequence": PLAN_SIZE,
                                            "status": "active",
                                            "root_decision_id": docs[0].decision_id})
                sample = sample or docs[1]
            loaded = time.perf_counter() - load_start
            assert sample is not None
            reads = MongoStore(db)
            rows = []
            for name, where, status in queries(sample):
                rows.append((name, *await latency(runs, _searching(reads, where, status))))
            await client.close()
        finally:
            server.stop()
    print(f"search bench: {decisions:,} decisions in plans of {PLAN_SIZE} (SecantusDB, loaded "
          f"in {loaded:.0f} s), first page of 50, {runs} runs; load average "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"  {'query':<28} {'p50 ms':>9} {'p99 ms':>9} {'found':>6}")
    for name, p50, p99, found in rows:
        print(f"  {name:<28} {p50 * 1000:9.1f} {p99 * 1000:9.1f} {found:6d}")
    print("\n".join(cost))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cost-decisions", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.decisions, args.runs, args.cost_decisions))
