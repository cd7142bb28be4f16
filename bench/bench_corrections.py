"""Correction cost against subtree size and plan size, and a revert beside a bare
transactional update_many of the same documents.

    python bench/bench_corrections.py [--plans 11000,100000] [--subtrees 10,1000,10000]

Starts its own nats-server and secantusd-py (free ports, temp dir) and one `python -m
workers` process. Plans are loaded straight into the store in bulk (tests/bulk.py, load_plan),
not through NATS, so building a 100,000-decision plan takes seconds: recording speed is
bench_recorder.py's subject, not this one's. Each plan holds one disjoint subtree per
size under its root, beside `plan size` other decisions.

For each (plan, subtree) it prints:
  impact   median time of the level-by-level impact analysis (3 runs, in-process);
  rounds   BFS levels, i.e. query rounds;
  latency  a revert, from publishing the CorrectionRequest to receiving its APPLIED event
           from a plain subscriber (record PENDING, analyze, one transaction superseding
           the subtree, archive manifest, events);
  walk / write  where that latency went, from the correction's history (the worker's
           clock, the same machine's): the worker's impact walk (ANALYZING to
           EXECUTING), and the archive, the transaction and the events (the APPLIED
           entry's time, stamped before them, to the event's arrival);
  bare     right after, on the same server, one transaction setting superseded_by on
           the same documents with update_many and nothing else (no walk, no events,
           no archive), with the workers' client options (majority, journaled): the
           best of `$in` chunks of 50 (the store's) and 500;
  ratio    latency / bare.
The cost follows the subtree: the same subtree costs the same in a plan 100x larger.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
from pymongo import AsyncMongoClient
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import PyMongoError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contracts.corrections.requests import CorrectionRequest  # noqa: E402
from contracts.corrections.states import CorrectionMode  # noqa: E402
from contracts.decisions.artifacts import ArtifactRef  # noqa: E402
from contracts.decisions.context import ContextSnapshot  # noqa: E402
from contracts.decisions.model import Decision  # noqa: E402
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDER_DURABLE  # noqa: E402
from contracts.decisions.types import DecisionType  # noqa: E402
from contracts.shared.ids import new_id  # noqa: E402
from deploy.embedded import free_port, start_mongo, start_nats  # noqa: E402
from store.database import connect, ensure_indexes  # noqa: E402
from store.impact import ImpactReader  # noqa: E402
from tests.bulk import load_plan  # noqa: E402

CONTEXT = ContextSnapshot(hot_context_hash="sha256:" + "ab" * 32, hot_context_ref="s3://c/x")
TYPES = [DecisionType.STRATEGY_CHOICE, DecisionType.IMPLEMENTATION_CHOICE,
         DecisionType.TOOL_INVOCATION, DecisionType.RESOURCE_SELECTION]


def _decision(plan: str, parent: str | None, rng: random.Random, i: int) -> Decision:
    kind = DecisionType.PROMPT_DEFINITION if parent is None else rng.choice(TYPES)
    arts = [ArtifactRef(artifact_path=f"src/m{i}.py", artifact_type="file")] if i % 10 == 0 \
        else []
    return Decision(decision_id=new_id(), plan_id=plan, parent_decision_id=parent,
                    decision_type=kind, question=f"Choice {i}?", chosen_option="option a",
                    context_snapshot=CONTEXT, artifacts_produced=arts)


def _grow(plan: str, top: Decision, size: int, rng: random.Random, *, out: list[Decision],
          start: int) -> None:
    """`size` decisions under `top` (top included), each under a random earlier one of them:
    a bushy tree, depth about log(size), as agents' plans are."""
    nodes = [top]
    out.append(top)
    for i in range(1, size):
        d = _decision(plan, rng.choice(nodes[-200:]).decision_id, rng, start + i)
        nodes.append(d)
        out.append(d)


def build(plan_size: int, subtrees: list[int], seed: int = 1) -> tuple[list[Decision],
                                                                      dict[int, str]]:
    rng = random.Random(seed)
    plan = new_id()
    root = _decision(plan, None, rng, 0)
    out = [root]
    filler = _decision(plan, root.decision_id, rng, 1)
    _grow(plan, filler, plan_size - 1, rng, out=out, start=2)
    targets = {}
    for n, size in enumerate(subtrees):
        top = _decision(plan, root.decision_id, rng, 10_000_000 * (n + 1))
        targets[size] = top.decision_id
        _grow(plan, top, size, rng, out=out, start=10_000_000 * (n + 1))
    return out, targets


async def wait_ready(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for _ in range(300):
        try:
            if ((await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)).num_waiting or 0):
                break
        except Exception:  # not created yet
            pass
        await asyncio.sleep(0.1)
    await nc.close()


@dataclass
class Reverted:
    latency: float
    superseded: int
    correction_id: str
    requested_at: datetime
    """The bench's clock when it published the request."""


async def revert_latency(nc: nats.NATS, plan_id: str, target: str) -> Reverted:
    """Seconds from publishing a revert to its APPLIED event; and how many it superseded."""
    sub = await nc.subscribe(f"corrections.events.{plan_id}.*")
    req = CorrectionRequest(plan_id=plan_id, decision_id=target, mode=CorrectionMode.REVERT,
                            guidance="bench revert", requested_by="bench")
    t0, requested_at = time.perf_counter(), datetime.now(UTC)
    await nc.jetstream().publish(f"corrections.requested.{plan_id}",
                                 req.model_dump_json().encode(),
                                 headers={"Nats-Msg-Id": req.correction_id})
    while True:
        body = json.loads((await sub.next_msg(timeout=600)).data)
        if body["correction_id"] == req.correction_id and body["to_status"] in (
                "applied", "failed"):
            break
    latency = time.perf_counter() - t0
    await sub.unsubscribe()
    assert body["to_status"] == "applied", body
    # The list itself holds the first 100.
    return Reverted(latency, body["superseded_count"], req.correction_id, requested_at)


async def stages(client: AsyncMongoClient[dict[str, object]], db_name: str,
                 reverted: Reverted) -> tuple[float, float]:
    """The worker's walk (ANALYZING to EXECUTING) and what came after the walk (the
    APPLIED entry's time to the event's arrival), in seconds, from the stored history."""
    doc = await client[db_name]["corrections"].find_one({"_id": reverted.correction_id})
    assert doc is not None
    history: list[dict[str, Any]] = doc["history"]  # type: ignore[assignment]
    at = {str(h["to_status"]): h["at"] for h in history}
    walk = (at["executing"] - at["analyzing"]).total_seconds()
    after = reverted.latency - (at["applied"] - reverted.requested_at).total_seconds()
    return walk, after


BARE_CHUNKS = (50, 500)
"""`$in` list sizes the bare update_many is timed with. Not every ID in one list: on the
embedded server one `$in` of 10,000 IDs ran 563 s and timed out (the store never sends
more than ID_CHUNK)."""


async def bare_update(client: AsyncMongoClient[dict[str, object]], db_name: str,
                      ids: list[str]) -> dict[str, float]:
    """Seconds of one transaction setting superseded_by on `ids` with update_many, per
    `$in` chunk size: the floor a revert of those documents stands on."""
    coll = client[db_name]["decisions"]
    out = {}
    for chunk in BARE_CHUNKS:
        size = chunk
        marker = new_id()

        async def body(session: AsyncClientSession, size: int = size, marker: str = marker
                       ) -> None:
            for i in range(0, len(ids), size):
                await coll.update_many({"_id": {"$in": ids[i:i + size]}},
                                       {"$set": {"superseded_by": marker,
                                                 "superseded_by_correction": marker}},
                                       session=session)

        t0 = time.perf_counter()
        try:
            async with client.start_session() as session:
                await session.with_transaction(body)
            out[str(chunk)] = time.perf_counter() - t0
        except PyMongoError as exc:  # e.g. past the server's transaction lifetime
            print(f"# bare update_many, chunks of {chunk}: {type(exc).__name__} "
                  f"after {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            out[str(chunk)] = float("nan")
    return out


async def measure(mongo_url: str, nats_url: str, db_name: str, plan_sizes: list[int],
                  subtree_sizes: list[int]) -> list[Row]:
    # The workers' own client options (w: majority, j: true, majority reads): the bare
    # update asks for the durability the revert's transaction asks for.
    client: AsyncMongoClient[dict[str, object]] = connect(mongo_url)
    rows = []
    try:
        db = client[db_name]
        await ensure_indexes(db)
        await wait_ready(nats_url)
        nc = await nats.connect(nats_url)
        reader = ImpactReader(db)
        for plan_size in plan_sizes:
            # A subtree larger than the plan around it would not be "inside" it.
            sizes = [s for s in subtree_sizes if s <= plan_size]
            decisions, targets = build(plan_size, sizes)
            t0 = time.perf_counter()
            await load_plan(db, decisions)
            print(f"# plan of {len(decisions):,} decisions loaded in "
                  f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
            for size in sizes:
                times, rounds = [], 0
                for _ in range(3):
                    t0 = time.perf_counter()
                    walk = await reader.walk(targets[size])
                    times.append(time.perf_counter() - t0)
                    rounds = walk.rounds
                    assert len(walk.affected) == size
                reverted = await revert_latency(nc, decisions[0].plan_id, targets[size])
                assert reverted.superseded == size
                walked, written = await stages(client, db_name, reverted)
                ids = await superseded_ids(client, db_name, targets[size])
                bare = await bare_update(client, db_name, ids)
                rows.append(Row(len(decisions), size, statistics.median(times), rounds,
                                reverted.latency, walked, written, bare))
                # As it comes (a long run on a loaded machine shows where it is).
                print(f"# {rows[-1].line()}", file=sys.stderr, flush=True)
        await nc.close()
    finally:
        await client.close()
    return rows


@dataclass
class Row:
    plan: int
    subtree: int
    impact: float
    rounds: int
    latency: float
    walked: float
    written: float
    bare: dict[str, float]

    def line(self) -> str:
        bare = " / ".join(f"{v:.2f}" for v in self.bare.values())
        stages = f"{self.walked:.2f} / {self.written:.2f}"
        return (f"{self.plan:>10,} | {self.subtree:>8,} | {self.impact:>10.3f} | "
                f"{self.rounds:>6} | {self.latency:>18.3f} | {stages:>13} | {bare:>26} | "
                f"{self.latency / self.best_bare:>5.2f}")

    @property
    def best_bare(self) -> float:
        done = [v for v in self.bare.values() if not math.isnan(v)]  # nan: it failed
        return min(done) if done else float("nan")


async def superseded_ids(client: AsyncMongoClient[dict[str, object]], db_name: str,
                         target: str) -> list[str]:
    """What the revert of `target` superseded: the documents its replacement names."""
    coll = client[db_name]["decisions"]
    new = await coll.find_one({"corrects_decision_id": target}, {"_id": 1})
    assert new is not None
    return [str(d["_id"]) async for d in coll.find({"superseded_by": new["_id"]}, {"_id": 1})]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", default="11000,100000")
    ap.add_argument("--subtrees", default="10,1000,10000")
    args = ap.parse_args()
    plan_sizes = [int(x) for x in args.plans.split(",")]
    subtree_sizes = [int(x) for x in args.subtrees.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-corrections-"))
    mongo = start_mongo(tmp, port=free_port())
    natsd = start_nats(tmp, port=free_port())
    env = {**os.environ, "NATS_URL": natsd.url, "MONGODB_URI": mongo.url, "MONGODB_DB": "bench",
           "ARCHIVE_ROOT": str(tmp / "archive"), "PYTHONPATH": str(ROOT)}
    with (tmp / "workers.log").open("ab") as log:
        worker = subprocess.Popen([sys.executable, "-m", "workers"], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        rows = asyncio.run(measure(mongo.url, natsd.url, "bench", plan_sizes, subtree_sizes))
    finally:
        worker.terminate()
        worker.wait(30)
        natsd.stop()
        mongo.stop()
    print(f"\n{'plan size':>10} | {'subtree':>8} | {'impact (s)':>10} | {'rounds':>6} | "
          f"{'revert latency (s)':>18} | {'walk / write':>13} | {'bare update_many (s)':>26} | "
          f"{'ratio':>5}")
    print(f"{'-' * 10}-+-{'-' * 8}-+-{'-' * 10}-+-{'-' * 6}-+-{'-' * 18}-+-{'-' * 13}-+-"
          f"{'-' * 26}-+-{'-' * 5}")
    for r in rows:
        print(r.line())
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"bare: one transaction of update_many, `$in` chunks of "
          f"{' / '.join(str(c) for c in BARE_CHUNKS)} IDs; ratio: revert latency "
          "over the fastest of them")


if __name__ == "__main__":
    main()
