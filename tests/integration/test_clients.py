"""The client libraries against real servers and `python -m workers` as its own process:
the agent's recorder, the operator's corrections, the subscriber's outcomes."""

from __future__ import annotations

import asyncio

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.building import build_root
from clients.correction_errors import DryRunRefused, InvalidCorrection
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.recording_errors import DecisionRejectedError
from clients.subscriber import outcomes
from contracts.corrections.requests import reverted_choice
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule
from deploy.embedded import ManagedServer
from store.database import Document
from tests.in_process_workers import InProcessWorkers
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
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS,
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
        workers: InProcessWorkers, nats_server: ManagedServer) -> None:
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


async def test_operator_dry_runs_requests_and_follows_a_revert_to_applied(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, impl, tool = await record_tree(rec)
        await rec.wait_all_persisted([root, strategy, impl, tool], timeout=20)
    plan = root.plan_id
    feed = outcomes(nc, statuses={"applied", "failed"}, durable="test-sub", limit=1)
    await feed.open()
    async with CorrectionClient.connect(nats_server.url, requested_by="alice") as ops:
        report = await ops.dry_run(plan, strategy.decision_id, "revert", "Use Postgres")
        assert set(report.decisions_to_invalidate) == {strategy.decision_id,
                                                       impl.decision_id, tool.decision_id}
        assert report.impact.affected_files == ["src/api/limits.py"]
        with pytest.raises(DryRunRefused) as refused:
            await ops.dry_run(plan, new_id(), "revert", "Use Postgres")
        assert refused.value.code == "target_not_found"
        with pytest.raises(InvalidCorrection):
            await ops.dry_run(plan, strategy.decision_id, "revert", "   ")
        cid = await ops.request(plan, strategy.decision_id, "revert", "Use Postgres",
                                chosen_option="Postgres counters table")
        assert await ops.request(plan, strategy.decision_id, "revert", "Use Postgres",
                                 chosen_option="Postgres counters table",
                                 correction_id=cid) == cid
        seen = [e.to_status async for e in ops.follow(cid, plan, timeout=30)]
        assert seen == ["pending", "analyzing", "executing", "applied"]
    # A client that did not send the request still finds the outcome afterwards.
    async with CorrectionClient.connect(nats_server.url) as later:
        outcome = await later.wait_for_outcome(cid, plan, timeout=10)
        await later.cancel(cid, plan, "too late")
    assert outcome.to_status is CorrectionStatus.APPLIED
    replacement = await db.decisions.find_one({"_id": outcome.new_decision_id})
    assert replacement is not None and replacement["chosen_option"] == "Postgres counters table"
    assert await db.corrections.count_documents({}) == 1
    got = [e async for e in feed]
    assert [(e.correction_id, e.to_status) for e in got] == [(cid, CorrectionStatus.APPLIED)]
    refusals = await events(nc, f"corrections.cancel_refused.{plan}", 3.0)
    assert [b["status"] for _, b, _ in refusals] == ["applied"]


async def test_subscriber_redelivers_what_the_loop_did_not_finish(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, *_ = await record_tree(rec)
        await rec.wait_all_persisted([root, strategy], timeout=20)
    feed = outcomes(nc, durable="flaky", statuses=["applied"])
    await feed.open()
    async with CorrectionClient.connect(nats_server.url) as ops:
        cid = await ops.request(root.plan_id, strategy.decision_id, "append", "Add metrics")
        await ops.wait_for_outcome(cid, root.plan_id, timeout=30)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async for event in feed:
            assert event.correction_id == cid
            raise Boom
    again = [e async for e in outcomes(nc, durable="flaky", statuses=["applied"], limit=1)]
    assert [e.correction_id for e in again] == [cid]
    assert again[0].child_plans_spawned


async def test_subscriber_terminates_an_unreadable_event_and_retries_a_failed_one_later(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, *_ = await record_tree(rec)
        await rec.wait_all_persisted([root, strategy], timeout=20)
    feed = outcomes(nc, durable="hostile", statuses=["applied"], backoff=[0.5])
    await feed.open()
    js = nc.jetstream()
    info = await js.consumer_info("CORRECTIONS", "hostile")
    assert info.config.max_deliver == 10
    # A 5 KB bracket body (RecursionError in the parser) ahead of the real outcome.
    await js.publish(f"corrections.events.{root.plan_id}.applied", b"[" * 5000)
    async with CorrectionClient.connect(nats_server.url) as ops:
        cid = await ops.request(root.plan_id, strategy.decision_id, "append", "Add metrics")
        await ops.wait_for_outcome(cid, root.plan_id, timeout=30)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async for _event in feed:
            raise Boom
    start = asyncio.get_running_loop().time()
    again = [e async for e in outcomes(nc, durable="hostile", statuses=["applied"], limit=1,
                                       backoff=[0.5])]
    assert [e.correction_id for e in again] == [cid]
    assert asyncio.get_running_loop().time() - start >= 0.3  # nak'ed with a delay
    info = await js.consumer_info("CORRECTIONS", "hostile")
    assert info.num_ack_pending == 0 and info.num_pending == 0


async def test_following_reads_past_hostile_bytes_on_the_plans_event_subject(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    """`wait_for_outcome` replays `corrections.events.<plan>.*` from the stream's start
    when its client did not send the request: bytes that are no transition, ahead of the
    real ones, are skipped and hold none of them back."""
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, *_ = await record_tree(rec)
        await rec.wait_all_persisted([root, strategy], timeout=20)
    js, subject = nc.jetstream(), f"corrections.events.{root.plan_id}.applied"
    hostile = [b"\xff\xfe", b"[" * 5000, b"[" + b"1," * 200_000 + b"1]",
               b'{"correction_id": "%s", "plan_id": "%s", "to_status": "applied", '
               b'"at": "2026-13-45T99:99:99Z"}' % (new_id().encode(), root.plan_id.encode()),
               b"{}" * 1000]
    for body in hostile:
        await js.publish(subject, body)
    async with CorrectionClient.connect(nats_server.url) as ops:
        cid = await ops.request(root.plan_id, strategy.decision_id, "append", "Add metrics")
    async with CorrectionClient.connect(nats_server.url) as other:  # did not send it
        outcome = await other.wait_for_outcome(cid, root.plan_id, timeout=30)
    assert (outcome.correction_id, outcome.to_status) == (cid, CorrectionStatus.APPLIED)


async def test_operator_reverts_without_guidance_and_a_doomed_retry_is_refused(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    """ADR 0017: `request(..., "revert")` needs no guidance; `retry` of a correction that
    FAILED on a superseded target, or of an applied one, is answered by a RetryRefused."""
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root, strategy, impl, tool = await record_tree(rec)
        await rec.wait_all_persisted([root, strategy, impl, tool], timeout=20)
    plan = root.plan_id
    async with CorrectionClient.connect(nats_server.url, requested_by="alice") as ops:
        with pytest.raises(InvalidCorrection):
            await ops.request(plan, strategy.decision_id, "append")
        cid = await ops.request(plan, strategy.decision_id, "revert")
        applied = await ops.wait_for_outcome(cid, plan, timeout=30)
        assert applied.to_status is CorrectionStatus.APPLIED
        # impl is superseded now: a correction of it FAILS, and retrying cannot help.
        doomed = await ops.request(plan, impl.decision_id, "revert")
        failed = await ops.wait_for_outcome(doomed, plan, timeout=30)
        assert failed.to_status is CorrectionStatus.FAILED
        await ops.retry(doomed, plan, "try again")
        await ops.retry(cid, plan)
    replacement = await db.decisions.find_one({"_id": applied.new_decision_id})
    assert replacement is not None
    assert replacement["chosen_option"] == reverted_choice("Redis INCR with a TTL per window")
    refusals = {b["correction_id"]: b for _, b, _ in
                await events(nc, f"corrections.retry_refused.{plan}", 3.0)}
    assert refusals[cid]["status"] == "applied"
    assert refusals[doomed]["status"] == "failed" and "superseded" in refusals[doomed]["reason"]
    c = await db.corrections.find_one({"_id": doomed})
    assert c is not None and c["status"] == "failed"
