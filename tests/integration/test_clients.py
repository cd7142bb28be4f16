"""The client libraries against real servers and `python -m workers` as its own process:
the agent's recorder, the operator's corrections, the subscriber's outcomes."""

from __future__ import annotations

import asyncio

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.building import build_root
from clients.recorder import DecisionRecorder, DecisionRejectedError
from contracts.decision import Decision, DecisionType
from contracts.rules import Rule
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import Workers
from tests.integration.wire import events
from workers.streams import ensure_streams

pytestmark = pytest.mark.e2e

WINDOW = "system: you are a coding agent\nuser: add rate limiting to the public API"


async def record_tree(rec: DecisionRecorder) -> list[Decision]:
    root = await rec.root("Add rate limiting to the public API", context=WINDOW,
                          project="api")
    strategy = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                question="Where do the counters live?",
                                chosen_option="Redis INCR with a TTL per window",
                                alternatives=["in-process token bucket"], confidence=0.8,
                                context=WINDOW)
    impl = await rec.record(parent=strategy, decision_type="implementation_choice",
                            question="Which middleware hook?", chosen_option="ASGI middleware",
                            context=WINDOW, artifacts=["src/api/limits.py"])
    tool = await rec.record(parent=impl, decision_type="tool_invocation",
                            question="Check it", chosen_option="pytest tests/api", context=WINDOW)
    return [root, strategy, impl, tool]


async def test_recorder_records_a_tree_once_even_when_republished(
        workers: Workers, nats_server: ManagedServer, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        tree = await record_tree(rec)
        persisted = await rec.wait_all_persisted(tree, timeout=20)
        assert [p.sequence_number for p in persisted] == [0, 1, 2, 3]
        # A retry is the same message: JetStream (or the recorder) drops it.
        await rec.publish(tree[1])
        await rec.publish(tree[1].model_copy(update={"created_at": tree[1].created_at}))
        assert (await rec.wait_persisted(tree[1])).sequence_number == 1
    plan_id = tree[0].plan_id
    docs = await db.decisions.find({"plan_id": plan_id}).sort("sequence_number").to_list()
    assert [d["_id"] for d in docs] == [d.decision_id for d in tree]
    assert [d["parent_decision_id"] for d in docs] == [None] + [d.decision_id for d in tree[:-1]]
    assert (await db.plans.find_one({"_id": plan_id}) or {}).get("project") == "api"
    assert len(await events(nc, f"decisions.persisted.{plan_id}", 0.5)) == 4


async def test_wait_persisted_raises_the_recorders_rejection(
        workers: Workers, nats_server: ManagedServer) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root = await rec.root("first", context=WINDOW)
        second = await rec.publish(build_root("second", context=WINDOW, plan_id=root.plan_id))
        await rec.wait_persisted(root, timeout=20)
        with pytest.raises(DecisionRejectedError) as caught:
            await rec.wait_persisted(second, timeout=20)
    assert [e.rule for e in caught.value.rejection.errors] == [Rule.ONE_ROOT_PER_PLAN]


async def test_publish_retries_until_the_stream_exists(nats_server: ManagedServer,
                                                       nc: nats.NATS) -> None:
    """No stream yet (servers still starting): no responders, retried, then acked once."""
    async def create_streams_later() -> None:
        await asyncio.sleep(0.5)
        await ensure_streams(nc.jetstream())

    later = asyncio.create_task(create_streams_later())
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root = await rec.root("retry me", context=WINDOW)
    await later
    stored = await events(nc, f"decisions.recorded.{root.plan_id}", 0.3)
    assert [m[2]["Nats-Msg-Id"] for m in stored] == [root.decision_id]
