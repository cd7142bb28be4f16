"""Partitioned recording end to end: two `python -m workers` processes with six
partitions share them three and three, every plan is stored in the partition
nats-server's mapping gives it, and what a reader past the stream sees (the recorder's
checks, a dead letter) speaks of the subject the agent published to."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.partitions import partition_of
from deploy.embedded import ManagedServer
from store.database import PLAN_LOCKS, Document
from tests.conftest import Workers, worker_env
from tests.factories import plan_tree
from tests.integration.wire import publish_all, publish_raw, until, wait_for_count

pytestmark = pytest.mark.e2e

PARTITIONS = 6


async def spread(db: AsyncDatabase[Document]) -> list[int]:
    held = Counter([d["owner"] async for d in db[PLAN_LOCKS].find(
        {"_id": {"$regex": "^role:recorder-"}})])
    return sorted(held.values())


async def test_two_workers_record_six_partitions_three_each(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    env = worker_env(nats_server.url, mongo_uri, db_name,
                     RECORDER_PARTITIONS=str(PARTITIONS))
    ws = [Workers(env, tmp_path / f"w{i}.log") for i in range(2)]
    try:
        for w in ws:
            await w.start(nats_server.url)
        assert await until(lambda: _even(db), timeout=30) == [3, 3]
        trees = [plan_tree(8, seed=s) for s in range(12)]
        js = nc.jetstream()
        await publish_all(js, [t[i] for i in range(8) for t in trees])
        plan = trees[0][0]["plan_id"]
        await publish_raw(js, f"decisions.recorded.{plan}", b"{not json",
                          {"Nats-Msg-Id": "not-json-1"})
        assert await wait_for_count(db, "decisions", 96) == 96
        assert await wait_for_count(db, "dead_letters", 1) == 1
        for t in trees:  # each plan numbered densely, in the order it was published
            seqs = {d["_id"]: d["sequence_number"] async for d in db.decisions.find(
                {"plan_id": t[0]["plan_id"]})}
            assert [seqs[d["decision_id"]] for d in t] == list(range(8))
        info = await js.stream_info("DECISIONS", subjects_filter="decisions.recorded.>")
        assert set(info.state.subjects or {}) == {
            f"decisions.recorded.{partition_of(p, PARTITIONS)}.{p}"
            for p in {t[0]["plan_id"] for t in trees}}
        letter = await db.dead_letters.find_one({})
        assert letter is not None and letter["subject"] == f"decisions.recorded.{plan}"
        assert len({partition_of(t[0]["plan_id"], PARTITIONS) for t in trees}) > 1
    finally:
        for w in ws:
            assert w.stop() == 0
    left = await db[PLAN_LOCKS].find({"_id": {"$regex": "^role:"}}).to_list()
    assert left == [], left


async def _even(db: AsyncDatabase[Document]) -> list[int] | None:
    got = await spread(db)
    return got if got == [3, 3] else None


async def test_a_new_partition_count_drains_what_the_old_one_stored(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """One partition (the `recorder` durable), stopped with a backlog; restarted with
    six: the backlog in the old durable is recorded too, beside what comes after."""
    one = Workers(worker_env(nats_server.url, mongo_uri, db_name), tmp_path / "one.log")
    await one.start(nats_server.url)
    assert one.stop() == 0
    js = nc.jetstream()
    tree = plan_tree(40, seed=3)
    await publish_all(js, tree[:20])  # stored unpartitioned, for the `recorder` durable
    six = Workers(worker_env(nats_server.url, mongo_uri, db_name,
                             RECORDER_PARTITIONS=str(PARTITIONS)), tmp_path / "six.log")
    await six.start(nats_server.url)
    try:
        await publish_all(js, tree[20:])  # stored in the plan's partition
        assert await wait_for_count(db, "decisions", 40) == 40
        seqs = sorted([d["sequence_number"] async for d in db.decisions.find({})])
        assert seqs == list(range(40))
        assert await db.dead_letters.count_documents({}) == 0
        old = await js.consumer_info("DECISIONS", "recorder")
        assert not old.num_pending and not old.num_ack_pending
        assert "holds role:recorder:" in six.log()  # it drained the old durable
    finally:
        assert six.stop() == 0
