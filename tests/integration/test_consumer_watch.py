"""A worker's durable deleted, changed or replaced under it is re-created from where it
stopped: nothing that arrived meanwhile is skipped, and the watch says what happened.

The first tests drive one watch against a real nats-server; the last ones delete the
corrector's and the reconciler's durables under running workers (`python -m workers`)
and show a revert still applied and new roots still reconciled, with /readyz failing
until the durable is back.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from clients.operator import CorrectionClient
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.subjects import RECONCILER_DURABLE
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer, free_port
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.conftest import Workers, worker_env
from tests.factories import root
from tests.integration.correction_support import chain_plan
from tests.integration.wire import publish_all, wait_for_count
from workers.consumer_watch import ConsumerWatch, watch_durable

STREAM = "WATCHED"
FILTER = "watched.*"


def declared(deliver: DeliverPolicy = DeliverPolicy.ALL) -> ConsumerConfig:
    return ConsumerConfig(durable_name="keeper", filter_subject=FILTER,
                          ack_policy=AckPolicy.EXPLICIT, deliver_policy=deliver, ack_wait=5)


async def publish(js: nats.js.JetStreamContext, *bodies: str) -> None:
    for b in bodies:
        await js.publish("watched.a", b.encode())


async def take(js: nats.js.JetStreamContext, n: int) -> list[str]:
    """The next `n` messages of the durable, acknowledged."""
    sub = await js.pull_subscribe_bind(durable="keeper", stream=STREAM)
    got: list[str] = []
    while len(got) < n:
        for m in await sub.fetch(n - len(got), timeout=5):
            await m.ack_sync()
            got.append(m.data.decode())
    await sub.unsubscribe()
    return got


@pytest.fixture
async def js(nc: nats.NATS) -> nats.js.JetStreamContext:
    j = nc.jetstream()
    await j.add_stream(StreamConfig(name=STREAM, subjects=["watched.>"]))
    return j


async def watch(js: nats.js.JetStreamContext, deliver: DeliverPolicy = DeliverPolicy.ALL
                ) -> ConsumerWatch:
    w = await watch_durable(js, STREAM, declared(deliver), every=3600)
    await w.stop()  # the tests call check() themselves
    return w


@pytest.mark.parametrize("deliver", [DeliverPolicy.ALL, DeliverPolicy.NEW])
async def test_a_deleted_durable_comes_back_from_where_it_stopped(
        js: nats.js.JetStreamContext, deliver: DeliverPolicy,
        caplog: pytest.LogCaptureFixture) -> None:
    if deliver is DeliverPolicy.NEW:
        await publish(js, "before")  # a NEW durable never sees it, before or after
    w = await watch(js, deliver)
    await publish(js, "1", "2")
    assert await take(js, 2) == ["1", "2"]
    await w.check()
    await js.delete_consumer(STREAM, "keeper")
    await publish(js, "3", "4")  # while it is gone
    with caplog.at_level(logging.ERROR):
        await w.check()
    assert "keeper" in caplog.text and "is missing" in caplog.text
    assert w.problem is not None and "keeper" in w.problem
    assert await take(js, 2) == ["3", "4"]
    await w.check()
    assert w.problem is None and w.recreated == 1


async def test_a_changed_filter_is_put_back_and_what_it_skipped_is_delivered(
        js: nats.js.JetStreamContext) -> None:
    w = await watch(js)
    await publish(js, "1")
    assert await take(js, 1) == ["1"]
    await w.check()
    # Someone narrows the filter: what it no longer matches is passed over.
    await js.add_consumer(STREAM, ConsumerConfig(
        durable_name="keeper", filter_subject="watched.b", ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL, ack_wait=5))
    await publish(js, "2", "3")
    await js.publish("watched.b", b"b")
    assert await take(js, 1) == ["b"]  # the floor moves past 2 and 3
    await w.check()
    assert w.problem is not None and "filter_subject" in w.problem
    got = await take(js, 3)
    assert got[:2] == ["2", "3"]  # and b again: acknowledged after the last good floor


async def test_a_durable_created_again_by_someone_else_is_replaced(
        js: nats.js.JetStreamContext) -> None:
    w = await watch(js)
    await publish(js, "1")
    assert await take(js, 1) == ["1"]
    await w.check()
    await js.delete_consumer(STREAM, "keeper")
    await publish(js, "2")
    await js.add_consumer(STREAM, declared(DeliverPolicy.NEW))  # would skip "2"
    await w.check()
    assert w.problem is not None and "replaced" in w.problem
    assert await take(js, 1) == ["2"]


async def test_two_replicas_noticing_at_once_agree_on_one_durable(
        js: nats.js.JetStreamContext) -> None:
    a, b = await watch(js), await watch(js)
    await js.delete_consumer(STREAM, "keeper")
    await asyncio.gather(a.check(), b.check())
    await asyncio.gather(a.check(), b.check())
    await asyncio.gather(a.check(), b.check())
    assert a.problem is None and b.problem is None
    assert a.recreated + b.recreated <= 2


async def readyz(addr: str) -> tuple[int, str]:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.decode(errors="replace").partition("\r\n\r\n")
    return int(head.split()[1]), body


async def not_ready_naming(addr: str, durable: str, timeout: float = 20) -> str:
    async with asyncio.timeout(timeout):
        while True:
            status, body = await readyz(addr)
            if status == 503 and durable in body:
                return body
            await asyncio.sleep(0.1)


async def ready(addr: str, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if (await readyz(addr))[0] == 200:
                return
            await asyncio.sleep(0.2)


@pytest.mark.e2e
async def test_workers_bring_back_the_corrector_and_the_reconciler_under_load(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str, db: AsyncDatabase[Document],
        db_name: str, tmp_path: Path) -> None:
    url = nats_server.url
    addr = f"127.0.0.1:{free_port()}"
    w = Workers(worker_env(url, mongo_uri, db_name, HEALTH_ADDR=addr), tmp_path / "w.log")
    await w.start(url)
    try:
        await ready(addr)
        js = nc.jetstream()
        # The corrector deleted by a worker-credentialed admin: an operator's revert
        # still ends APPLIED, and /readyz says what happened until it is back.
        decisions = await chain_plan(db, 3)
        await js.delete_consumer("CORRECTIONS", "corrector")
        body = await not_ready_naming(addr, "corrector")
        assert "missing" in json.loads(body)["checks"]["consumers"]
        async with CorrectionClient(nc, requested_by="alice") as ops:
            cid = await ops.request(decisions[0].plan_id, decisions[1].decision_id, "revert",
                                    "Use Postgres", chosen_option="Postgres")
            outcome = await ops.wait_for_outcome(cid, decisions[0].plan_id, timeout=60)
        assert outcome.to_status is CorrectionStatus.APPLIED
        await ready(addr)
        # The reconciler's durable deleted while new roots are persisted: each still
        # gets its plan's invariant_enforced decision.
        invariants = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
        await invariants.add_invariant("no-prod-deletes", "Never delete production data")
        await js.delete_consumer("DECISIONS", RECONCILER_DURABLE)
        plans = [new_id() for _ in range(5)]
        await publish_all(js, [root(p) for p in plans])
        for p in plans:
            assert await wait_for_count(db, "decisions", 2, query={"plan_id": p},
                                        timeout=30) == 2
        await ready(addr)
    finally:
        w.stop()
    log = w.log()
    assert "consumer corrector on CORRECTIONS is missing" in log
    assert f"consumer {RECONCILER_DURABLE} on DECISIONS is missing" in log
