"""10,000 decisions across 10 plans from a plain nats-py client: every one recorded once,
with or without the worker being SIGKILLed midway."""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from deploy.embedded import ManagedServer
from store.database import Document
from store.decisions import from_document
from tests.conftest import Workers, worker_env
from tests.factories import plan_tree
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import events, publish_all, wait_for_count

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PLANS, PER_PLAN = 10, 1_000
TOTAL = PLANS * PER_PLAN


def interleaved_plans() -> list[dict[str, Any]]:
    """Ten trees, published round robin: parents before children within each plan."""
    trees = [plan_tree(PER_PLAN, seed=s) for s in range(PLANS)]
    return [tree[i] for i in range(PER_PLAN) for tree in trees]


async def check_recorded(db: AsyncDatabase[Document], nc: nats.NATS,
                         sent: list[dict[str, Any]], *, dense: bool) -> None:
    docs = [d async for d in db["decisions"].find()]
    assert len(docs) == TOTAL
    by_id = {d["_id"]: d for d in docs}
    assert set(by_id) == {d["decision_id"] for d in sent}
    for d in sent[:: max(1, TOTAL // 500)]:  # fields equal to what was sent (a spread sample)
        stored = by_id[d["decision_id"]]
        model = from_document(stored)
        sent_fields = set(d)
        assert model.model_dump(mode="json", include=sent_fields) == \
            Decision.model_validate(json.loads(json.dumps(d))).model_dump(
                mode="json", include=sent_fields)
    per_plan: dict[str, list[int]] = defaultdict(list)
    for doc in docs:
        per_plan[doc["plan_id"]].append(doc["sequence_number"])
    assert len(per_plan) == PLANS
    for seqs in per_plan.values():
        assert len(seqs) == len(set(seqs)) == PER_PLAN
        if dense:
            assert sorted(seqs) == list(range(PER_PLAN))
    # Parents always got lower sequence numbers than their children.
    for doc in docs[:: max(1, TOTAL // 500)]:
        parent = doc["parent_decision_id"]
        if parent:
            assert by_id[parent]["sequence_number"] < doc["sequence_number"]
    persisted = await events(nc, "decisions.persisted.>", settle=2.0)
    counts = Counter(ev["decision_id"] for _, ev, _ in persisted)
    assert len(counts) == TOTAL and max(counts.values()) == 1
    assert await db["dead_letters"].count_documents({}) == 0


async def test_ten_thousand_decisions_recorded_exactly_once(
        workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    sent = interleaved_plans()
    await publish_all(nc.jetstream(), sent)
    assert await wait_for_count(db, "decisions", TOTAL, timeout=240) == TOTAL
    await check_recorded(db, nc, sent, dense=True)


async def test_sigkill_midway_loses_and_doubles_nothing(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name,
                           RECORDER_ACK_WAIT_SECONDS="3",
                           RECORDER_PARENT_WAIT_SECONDS="60"), tmp_path / "workers.log")
    await w.start(nats_server.url)
    sent = interleaved_plans()
    publishing = asyncio.create_task(publish_all(nc.jetstream(), sent))
    try:
        reached = await wait_for_count(db, "decisions", TOTAL // 3, timeout=120)
        assert reached >= TOTAL // 3, w.log()[-3000:]
        w.kill()
        killed_at = await db["decisions"].count_documents({})
        assert killed_at < TOTAL, "killed too late to prove anything"
        await publishing
        await w.start(nats_server.url)
        assert await wait_for_count(db, "decisions", TOTAL, timeout=240) == TOTAL
        # Sequence numbers are taken in the same transaction as the insert, so even a
        # kill leaves them dense.
        await check_recorded(db, nc, sent, dense=True)
    finally:
        w.stop()
