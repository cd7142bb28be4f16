"""Recovery in seconds: a worker SIGKILLed mid-correction or mid-recording, restarted at
once, finishes what the dead one held without waiting for a broker timer, and loses
and doubles nothing. Times are printed, not asserted (bench/bench_recovery.py runs 20+
kills of each kind and prints p50 and max); the test asserts the work finishes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.factories import decision, root
from tests.integration.recovery_support import (
    CRASH_STEPS,
    check_recorded_once,
    correction_kills,
    recording_kills,
    table,
)
from tests.integration.wire import publish_all, wait_for_count

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_corrections_interrupted_at_every_step_finish_after_a_restart(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    t = await correction_kills(nats_server.url, mongo_uri, db_name, db, nc, tmp_path,
                               CRASH_STEPS, reps=1)
    print("\n" + table("corrections", t))
    assert t.problems == []
    assert len(t.seconds) == len(CRASH_STEPS)


async def test_recording_interrupted_at_random_points_finishes_after_a_restart(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    t = await recording_kills(nats_server.url, mongo_uri, db_name, db, nc, tmp_path,
                              kills=3, burst=600)
    print("\n" + table("recording", t))
    assert t.problems == []
    assert len(t.seconds) == 3


async def test_a_replica_takes_over_a_dead_replicas_batch_and_transaction(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    """Two replicas record the same stream; one is SIGKILLed mid-burst and not restarted.
    The other ends the dead one's open transaction (its heartbeat stops), records the
    redelivered messages beside its own, and nothing is lost or doubled."""
    env = worker_env(nats_server.url, mongo_uri, db_name, RECORDER_PARENT_WAIT_SECONDS="60")
    a, b = Workers(env, tmp_path / "a.log"), Workers(env, tmp_path / "b.log")
    await a.start(nats_server.url)
    await b.start(nats_server.url)
    js = nc.jetstream(publish_async_max_pending=20_000)
    roots = [root() for _ in range(4)]
    sent = list(roots)
    parents = {r["plan_id"]: [r["decision_id"]] for r in roots}
    for i in range(1200):
        p = roots[i % len(roots)]["plan_id"]
        d = decision(p, parents[p][i % len(parents[p])], "implementation_choice")
        parents[p].append(d["decision_id"])
        sent.append(d)
    try:
        await publish_all(js, sent[:400])
        publishing = asyncio.create_task(publish_all(js, sent[400:]))
        await asyncio.sleep(0.3)
        a.kill()
        await publishing
        assert await wait_for_count(db, "decisions", len(sent), timeout=60) == len(sent), \
            b.log()[-3000:]
        assert await check_recorded_once(db, nc, sent) == []
        assert b.alive
    finally:
        b.stop()
