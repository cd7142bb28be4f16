"""The inbound pipeline on every consumer, with the workers running as their own process:
hostile bodies among valid ones, bounded retries ending in a dead letter, consumers
brought to the code's configuration, and the parent wait counted in seconds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from bootstrap.setting_types import Retry
from bootstrap.settings import Settings
from contracts.corrections import subjects as csubjects
from contracts.decisions.subjects import (
    DECISIONS_STREAM,
    RECONCILER_DURABLE,
    RECORDED_PREFIX,
    RECORDER_DURABLE,
)
from contracts.invariants import subjects as isubjects
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer
from services.invariants import InvariantService
from services.recorder_policy import wait_key
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import worker_env
from tests.factories import decision, encode, headers, plan_tree, root, subject
from tests.in_process_workers import InProcessWorkers
from tests.integration.access_support import start_secured
from tests.integration.correction_support import request
from tests.integration.wire import drained, publish_all, until, wait_for_count
from workers.recorder import parent_waits
from workers.streams import ensure_streams

pytestmark = pytest.mark.e2e

APP = "ledger-inbound"
DEEP = b"[" * 5000  # RecursionError in the JSON parser
FAR = "9999-12-31T23:00:00-05:00"  # OverflowError once shifted to UTC


def _env(nats_server: ManagedServer, mongo_uri: str, db_name: str, **extra: str
         ) -> dict[str, str]:
    sep = "&" if "?" in mongo_uri else "?"
    return worker_env(nats_server.url, f"{mongo_uri}{sep}appName={APP}", db_name,
                      CORRECTIONS_RETRY_DELAY="0.2", **extra)


async def _started(nats_server: ManagedServer, mongo_uri: str, db_name: str, tmp_path: Path,
                   **extra: str) -> InProcessWorkers:
    w = InProcessWorkers(_env(nats_server, mongo_uri, db_name, **extra),
                         tmp_path / "workers.log")
    await w.start(nats_server.url)
    return w



async def letters(db: AsyncDatabase[Document], prefix: str) -> list[Document]:
    return await db.dead_letters.find({"_id": {"$regex": f"^{prefix}:"}}).to_list()


async def fail_point(client: AsyncMongoClient[Document], commands: list[str] | None) -> None:
    mode: Any = {"times": 100_000} if commands else "off"
    await client.admin.command({"configureFailPoint": "failCommand", "mode": mode, "data": {
        "failCommands": commands or ["insert"], "errorCode": 8, "appName": APP}})


# --- hostile bodies among valid ones ------------------------------------------------------


async def test_hostile_decisions_are_dead_lettered_alone_and_valid_ones_recorded_once(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    tree = plan_tree(40)
    plan = tree[0]["plan_id"]
    far = decision(plan, tree[0]["decision_id"])
    far["created_at"] = FAR
    # Published before the worker starts, so they arrive in one batch with the valid ones.
    await publish_all(js, tree[:20])
    await js.publish(f"{RECORDED_PREFIX}.{plan}", DEEP, headers={"Nats-Msg-Id": new_id()})
    await js.publish(subject(far), encode(far), headers=headers(far))
    await publish_all(js, tree[20:])
    w = await _started(nats_server, mongo_uri, db_name, tmp_path)
    try:
        assert await wait_for_count(db, "decisions", 40, timeout=30) == 40
        await until(lambda: _count(db.dead_letters, 2))
        await drained(js, DECISIONS_STREAM, RECORDER_DURABLE)
        await asyncio.sleep(0.5)
        assert await db.decisions.count_documents({}) == 40
        dead = await letters(db, DECISIONS_STREAM)
        assert len(dead) == 2
        # Nesting too deep is `unreadable`; a date with no UTC equivalent is a schema
        # error of its field (contracts.shared.timestamps), named so the agent can fix it.
        by_rule = {e["rule"]: e for d in dead for e in d["errors"]}
        assert set(by_rule) == {"unreadable", "schema"}
        assert "too deeply" in by_rule["unreadable"]["message"]
        assert by_rule["schema"]["field"] == "created_at"
        assert "out of range" in by_rule["schema"]["message"]
        assert all(len(d["errors"][0]["message"]) < 500 for d in dead)
        persisted = await js.stream_info(DECISIONS_STREAM)
        # 42 published, 40 persisted events, the root's began event, 2 rejected events:
        # nothing twice.
        assert persisted.state.messages == 85
        assert w.alive
    finally:
        await w.stop()


async def _count(coll: Any, n: int) -> bool:
    return bool(await coll.count_documents({}) >= n)


async def test_hostile_correction_requests_and_cancels_do_not_hold_back_valid_ones(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    valid = [request(new_id(), new_id()) for _ in range(6)]  # targets unknown: FAILED
    far = request(new_id(), new_id())
    far_body = {**json.loads(far.model_dump_json()), "requested_at": FAR}
    for i, r in enumerate(valid):
        await js.publish(f"{csubjects.REQUESTED_PREFIX}.{r.plan_id}",
                         r.model_dump_json().encode(), headers={"Nats-Msg-Id": r.correction_id})
        if i == 2:
            await js.publish(f"{csubjects.REQUESTED_PREFIX}.{r.plan_id}", DEEP)
            await js.publish(f"{csubjects.REQUESTED_PREFIX}.{far.plan_id}",
                             json.dumps(far_body).encode(),
                             headers={"Nats-Msg-Id": far.correction_id})
    await js.publish(f"{csubjects.CANCEL_PREFIX}.{valid[0].plan_id}", DEEP)
    w = await _started(nats_server, mongo_uri, db_name, tmp_path)
    try:
        async def terminal() -> bool:
            n = await db.corrections.count_documents(
                {"status": {"$in": ["failed", "applied", "cancelled"]}})
            return n == len(valid)
        await until(terminal)
        dead = await until(lambda: _at_least(letters(db, csubjects.CORRECTIONS_STREAM), 3))
        assert len(dead) == 3
        assert {d["errors"][0]["rule"] for d in dead} <= {"unreadable", "schema"}
        for durable in (csubjects.CORRECTOR_DURABLE, csubjects.CANCELLER_DURABLE):
            await drained(js, csubjects.CORRECTIONS_STREAM, durable)
        assert await db.corrections.count_documents({}) == len(valid)
        assert w.alive
    finally:
        await w.stop()


async def _at_least(found: Awaitable[list[Document]], n: int) -> list[Document] | None:
    docs = await found
    return docs if len(docs) >= n else None


async def test_hostile_violation_reports_do_not_hold_back_valid_ones(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    svc = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    inv = await svc.add_invariant("no-prod-deletes", "Never delete production data")
    plan = new_id()

    def report(**fields: Any) -> dict[str, Any]:
        return {"violation_id": new_id(), "invariant_id": inv.id, "plan_id": plan,
                "decision_id": None, "severity": "warning", "details": "x", **fields}

    valid = [report() for _ in range(5)]
    far = report(reported_at=FAR)
    subj = f"{isubjects.VIOLATIONS_PREFIX}.{plan}"
    for i, r in enumerate(valid):
        await js.publish(subj, json.dumps(r).encode(), headers={"Nats-Msg-Id": r["violation_id"]})
        if i == 1:
            await js.publish(subj, DEEP)
            await js.publish(subj, json.dumps(far).encode(),
                             headers={"Nats-Msg-Id": far["violation_id"]})
    # A garbage body on the reconciler's subject. Its durable starts at NEW, so one
    # published before the workers start is never delivered to it; garbage that reaches
    # the reconciler beside a valid began event, in one batch:
    # test_invariants_e2e.py::test_hostile_began_events_beside_a_valid_one_...
    await js.publish(f"decisions.began.{plan}", DEEP)
    w = await _started(nats_server, mongo_uri, db_name, tmp_path)
    try:
        assert await wait_for_count(db, "invariant_violations", 5, timeout=30) == 5
        dead = await until(lambda: _at_least(letters(db, isubjects.INVARIANTS_STREAM), 2))
        assert len(dead) == 2
        assert {d["errors"][0]["rule"] for d in dead} <= {"unreadable", "schema"}
        await drained(js, isubjects.INVARIANTS_STREAM, isubjects.VIOLATIONS_DURABLE)
        await drained(js, DECISIONS_STREAM, RECONCILER_DURABLE)
        assert w.alive
    finally:
        await w.stop()


# --- bounded retries ----------------------------------------------------------------------


async def test_a_message_failing_every_delivery_is_dead_lettered_with_each_attempts_error(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        mongo_client: AsyncMongoClient[Document], db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path) -> None:
    extra = {"CONSUMER_MAX_DELIVER": "3", "CONSUMER_BACKOFF": "0.2,0.3"}
    w = await _started(nats_server, mongo_uri, db_name, tmp_path, **extra)
    js = nc.jetstream()
    advisories: list[dict[str, Any]] = []

    async def heard(msg: Any) -> None:
        advisories.append(json.loads(msg.data))

    await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{DECISIONS_STREAM}."
                       f"{RECORDER_DURABLE}", cb=heard)
    expected = _retry(Settings(recorder_parent_wait_seconds=3,
                               consumer_max_deliver=3)).max_deliver
    r = root()
    await fail_point(mongo_client, ["insert"])
    try:
        await publish_all(js, [r])
        await until(lambda: _truthy(advisories), timeout=60)
    finally:
        await fail_point(mongo_client, None)
    try:
        assert advisories[0]["deliveries"] == expected
        seq = advisories[0]["stream_seq"]
        doc = await until(lambda: db.dead_letters.find_one({"_id": f"{DECISIONS_STREAM}:{seq}"}))
        rules = [e["rule"] for e in doc["errors"]]
        assert rules == ["max_deliveries"] * (expected + 1)
        assert all("WriteError" in e["message"] or "OperationFailure" in e["message"]
                   or "error" in e["message"].lower() for e in doc["errors"][1:])
        assert [e["message"].split(" at ")[0] for e in doc["errors"][1:]] == [
            f"delivery {n}" for n in range(1, expected + 1)]
        assert doc["payload"] == encode(r)
        assert await db.decisions.count_documents({}) == 0
        # Its attempts are forgotten right after the dead letter is written (not in the
        # same write: a crash between the two leaves a record dropped once stale).
        await until(lambda: _none(db.delivery_failures))
        await drained(js, DECISIONS_STREAM, RECORDER_DURABLE)
        info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        assert info.delivered.consumer_seq == expected  # delivered MaxDeliver times, no more
        assert w.alive
    finally:
        await w.stop()


def _retry(settings: Settings) -> Retry:
    """The recorder durable's retries: CONSUMER_MAX_DELIVER plus its parent waits."""
    return settings.retry(parent_waits(settings))


async def _none(coll: Any) -> bool:
    return bool(await coll.count_documents({}) == 0)


async def _truthy(xs: list[Any]) -> bool:
    return bool(xs)


async def test_an_existing_consumer_is_brought_to_the_codes_settings_on_start(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    await js.add_consumer(DECISIONS_STREAM, ConsumerConfig(
        durable_name=RECORDER_DURABLE, filter_subject=f"{RECORDED_PREFIX}.*",
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL, ack_wait=30,
        max_deliver=12, max_ack_pending=1000, backoff=[30, 60, 120]))
    # The code wants DeliverPolicy.NEW here, which the server cannot change: a warning.
    await js.add_consumer(DECISIONS_STREAM, ConsumerConfig(
        durable_name=RECONCILER_DURABLE, filter_subject="decisions.persisted.*",
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL, ack_wait=30,
        max_deliver=-1))
    w = await _started(nats_server, mongo_uri, db_name, tmp_path, CONSUMER_MAX_DELIVER="7")
    try:
        rec = await js.consumer_info(DECISIONS_STREAM, RECONCILER_DURABLE)
        assert rec.config.max_deliver == 7 and rec.config.deliver_policy == DeliverPolicy.ALL
        assert "cannot update: deliver_policy" in w.log()
        info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        want = _retry(Settings(recorder_parent_wait_seconds=3, consumer_max_deliver=7))
        assert info.config.max_deliver == want.max_deliver
        # No BackOff on the recorder (workers.recorder.RecorderConsumer says why): the
        # one an older version set is removed.
        assert not info.config.backoff
        assert info.config.ack_wait == Settings().recorder_ack_wait_seconds
        assert info.config.max_ack_pending == 20_000
        assert "updated" in w.log()
    finally:
        await w.stop()


# --- the parent wait is counted in seconds ---------------------------------------------------


async def test_a_database_outage_longer_than_the_parent_wait_rejects_no_child(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        mongo_client: AsyncMongoClient[Document], db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path) -> None:
    # RECORDER_PARENT_WAIT_SECONDS is 3 (worker_env); the outage lasts 5 s, during which
    # the child is delivered about 25 times (backoff 0.2 s).
    w = await _started(nats_server, mongo_uri, db_name, tmp_path,
                       CONSUMER_MAX_DELIVER="200", CONSUMER_BACKOFF="0.2")
    js = nc.jetstream()
    r = root()
    child = decision(r["plan_id"], r["decision_id"])
    try:
        await fail_point(mongo_client, ["find", "aggregate"])
        try:
            await publish_all(js, [child])
            await asyncio.sleep(5.0)
        finally:
            await fail_point(mongo_client, None)
        await asyncio.sleep(1.0)  # the child now waits, from here on, in seconds
        await publish_all(js, [r])
        assert await wait_for_count(db, "decisions", 2, timeout=20) == 2
        assert await db.dead_letters.count_documents({}) == 0
        await drained(js, DECISIONS_STREAM, RECORDER_DURABLE)
        info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        # The child's failures are forgotten once it was recorded.
        await until(lambda: _none(db.delivery_failures))
        # Many more deliveries than a 3 s wait takes: the outage's did not count.
        assert info.delivered.consumer_seq > _retry(
            Settings(recorder_parent_wait_seconds=3, consumer_max_deliver=0)).max_deliver
    finally:
        await w.stop()


async def test_a_chain_whose_children_came_first_is_woken_level_by_level(
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """A chain of 12 published deepest first: every child waits, its backoff grows past
    a second; then the root. Each level is woken once its parent is stored
    (workers.parent_wakes), so after the root the chain takes about one delivery per
    decision; each level waiting out its own backoff took several each, one level after
    another. Every role with its own user and the shipped permissions
    (deploy/nats-auth.conf): the worker's wakes are naks on its own consumer's ack
    subjects, and the server refuses nothing."""
    secured = start_secured(tmp_path / "nats")
    sep = "&" if "?" in mongo_uri else "?"
    w = InProcessWorkers(worker_env(secured.url("worker"), f"{mongo_uri}{sep}appName={APP}",
                                    db_name, RECORDER_PARENT_WAIT_SECONDS="60"),
                         tmp_path / "workers.log")
    agent = worker = None
    chain = [root()]
    for _ in range(11):
        chain.append(decision(chain[0]["plan_id"], chain[-1]["decision_id"]))
    try:
        await w.start(secured.url("worker"))
        agent = await nats.connect(secured.url("agent"), inbox_prefix="_INBOX_agent")
        worker = await nats.connect(secured.url("worker"), inbox_prefix="_INBOX_worker")
        js, watch = agent.jetstream(), worker.jetstream()
        # Hostile bodies among the waiting children, in their batches: dead-lettered
        # alone, nobody's wake.
        hostile = [DEEP, b"\xff\xfe not json", json.dumps({"parent_decision_id": [1] * 5000,
                                                          "created_at": FAR}).encode()]
        for i, d in enumerate(reversed(chain[1:])):
            await js.publish(subject(d), encode(d), headers=headers(d))
            if i < len(hostile):
                await js.publish(subject(d), hostile[i], headers={"Nats-Msg-Id": new_id()})

        async def all_waiting() -> bool:
            return await db.parent_waits.count_documents({"waited_ms": {"$gte": 1500}}) == 11
        await until(all_waiting, 20)
        before = (await watch.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)).delivered
        started = asyncio.get_running_loop().time()
        await publish_all(js, chain[:1])
        assert await wait_for_count(db, "decisions", 12, timeout=30) == 12
        print(f"\nthe chain of 12 recorded {asyncio.get_running_loop().time() - started:.2f} s "
              "after its root was published")
        await drained(watch, DECISIONS_STREAM, RECORDER_DURABLE)
        after = (await watch.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)).delivered
        assert after.consumer_seq - before.consumer_seq <= 2 * 12, (before, after)
        rules = [e["rule"] async for dl in db.dead_letters.find() for e in dl["errors"][:1]]
        assert len(rules) == len(hostile) and "parent_exists" not in rules, rules
        assert secured.violations() == []
    finally:
        for conn in (agent, worker):
            if conn is not None:
                await conn.close()
        await w.stop()
        secured.server.stop()


OUTAGE_WAIT = 15.0
"""The parent wait of the next test: longer than the gap bound (10 s), so one gap counted
whole or as the bound tells apart."""


@pytest.mark.slow
async def test_a_child_already_waiting_outlives_an_outage_longer_than_its_wait(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        mongo_client: AsyncMongoClient[Document], db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path) -> None:
    """The child waits for its parent, then the database fails every read for 16 s, longer
    than the 15 s parent wait: the gap between two of its sightings counts as at most the
    gap bound (services.recorder_policy), so it is not dead-lettered when the database is
    back, and its parent, published then, is its parent still. (Counting the gap whole
    dead-lettered it at its first sighting after the outage; a recorder stopped as long,
    or the server's clock stepping forward, did the same.)"""
    w = await _started(nats_server, mongo_uri, db_name, tmp_path,
                       CONSUMER_MAX_DELIVER="200", CONSUMER_BACKOFF="0.2",
                       RECORDER_PARENT_WAIT_SECONDS=str(OUTAGE_WAIT))
    js = nc.jetstream()
    r = root()
    child = decision(r["plan_id"], r["decision_id"])
    try:
        ack = await js.publish(subject(child), encode(child), headers=headers(child))
        key = wait_key(ack.seq)
        await until(lambda: db.parent_waits.find_one({"_id": key}), 10)
        await fail_point(mongo_client, ["find", "aggregate"])
        try:
            await asyncio.sleep(1.0)  # a batch in flight settles
            before = await db.parent_waits.find_one({"_id": key})
            assert before is not None
            await asyncio.sleep(OUTAGE_WAIT + 1 - 1.0)
        finally:
            await fail_point(mongo_client, None)

        async def judged_again() -> bool:
            seen = await db.parent_waits.find_one({"_id": key, "seen": {"$ne": before["seen"]}})
            return seen is not None or await db.dead_letters.count_documents({}) > 0
        await until(judged_again, 20)
        assert await db.dead_letters.count_documents({}) == 0
        await publish_all(js, [r])
        assert await wait_for_count(db, "decisions", 2, timeout=20) == 2
        assert await db.dead_letters.count_documents({}) == 0
        after = await db.parent_waits.find_one({"_id": key})
        assert after is not None and after["waited_ms"] < OUTAGE_WAIT * 1000
    finally:
        await w.stop()


async def test_a_dry_run_with_a_hostile_body_is_answered(
        workers: InProcessWorkers, nc: nats.NATS) -> None:
    plan = new_id()
    reply = await nc.request(f"{csubjects.DRYRUN_PREFIX}.{plan}", DEEP, timeout=10)
    body = json.loads(reply.data)
    assert body["error"] == "invalid_request" and body["plan_id"] == plan
    assert len(reply.data) < 2000
    assert workers.alive


async def test_a_batch_slower_than_the_ack_wait_is_not_redelivered_under_its_worker(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        mongo_client: AsyncMongoClient[Document], db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path) -> None:
    w = await _started(nats_server, mongo_uri, db_name, tmp_path,
                       RECORDER_ACK_WAIT_SECONDS="1.5")
    js = nc.jetstream()
    r = root()
    await mongo_client.admin.command({
        "configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {
            "failCommands": ["insert"], "blockConnection": True, "blockTimeMS": 4000,
            "appName": APP}})
    try:
        await publish_all(js, [r])
        assert await wait_for_count(db, "decisions", 1, timeout=20) == 1
        await drained(js, DECISIONS_STREAM, RECORDER_DURABLE)
        info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
        assert info.delivered.consumer_seq == 1  # in-progress acks kept it ours
    finally:
        await fail_point(mongo_client, None)
        await w.stop()
