"""Workers whose clocks disagree: leases, heartbeats and the parent wait run on the
database server's clock, so a worker 6 s behind and one 6 s ahead of a normal one reap
nobody, steal no lease and cut no wait short, while a worker that really died is still
reaped within its lease and its successor counts the waits it left from where they began.

The clocks are offset with libfaketime (Debian's `faketime` package; `.ci/run` installs
it): the whole worker process, every `datetime.now()` and `time.time()` in it, runs 6 s
behind or ahead; its monotonic clock is left alone, as a real skewed machine's is.
"""

from __future__ import annotations

import asyncio
import glob
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from deploy.embedded import ManagedServer
from services.recorder_policy import wait_key
from store.database import Document
from tests.conftest import Workers
from tests.factories import decision, encode, headers, root, subject
from tests.integration.cli_support import seed_plan
from tests.integration.recovery_support import env
from tests.integration.wire import publish_all, until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE = 5.0
"""The default WORKER_ / CORRECTIONS_ / RECORDER_LEASE_SECONDS: shorter than the skew."""
PARENT_WAIT = 15.0
SKEW = 6
TROUBLE = ("stopped beating", "lease on plan", "passed to another replica", "LeaseLost",
           "parent not found")
"""What a worker logs when it reaps another, loses a plan's or the recorder's lease, or
gives up on a parent."""


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    return found[0]


def offset(base: dict[str, str], seconds: int) -> dict[str, str]:
    """The worker's environment with its wall clock `seconds` off."""
    return {**base, "LD_PRELOAD": libfaketime(), "FAKETIME": f"{seconds:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


async def server_now(db: AsyncDatabase[Document]) -> datetime:
    hello = await db.client.admin.command("hello")
    found: datetime = hello["localTime"]
    return found if found.tzinfo else found.replace(tzinfo=UTC)


@dataclass
class Watch:
    """What the workers and the recorder's lease looked like, sampled every 0.2 s."""

    db: AsyncDatabase[Document]
    missing: list[str] = field(default_factory=list)
    recorder_owners: list[str] = field(default_factory=list)

    async def run(self, expected: set[int]) -> None:
        while True:
            pids = {d.get("pid") async for d in self.db.workers.find({}, {"pid": 1})}
            self.missing += [f"worker pid {p} gone" for p in expected - pids]
            lease = await self.db.plan_locks.find_one({"_id": "role:recorder"})
            owner = str(lease["owner"]) if lease else "(none)"
            if not self.recorder_owners or self.recorder_owners[-1] != owner:
                self.recorder_owners.append(owner)
            await asyncio.sleep(0.2)


async def worker_id_of(db: AsyncDatabase[Document], w: Workers) -> str:
    assert w.proc is not None
    pid = w.proc.pid

    async def registered() -> Any:
        return await db.workers.find_one({"pid": pid})
    return str((await until(registered))["_id"])


async def applied(db: AsyncDatabase[Document], correction_id: str) -> bool:
    found = await db.corrections.find_one({"_id": correction_id})
    return found is not None and found["status"] == "applied"


@dataclass
class Crew:
    behind: Workers
    normal: Workers
    ahead: Workers
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def all(self) -> dict[str, Workers]:
        return {"behind": self.behind, "normal": self.normal, "ahead": self.ahead}

    async def start(self, db: AsyncDatabase[Document], nats_url: str) -> None:
        """The one behind first: it takes the recorder's lease."""
        for name, w in self.all.items():
            await w.start(nats_url)
            self.ids[name] = await worker_id_of(db, w)


async def side_by_side(crew: Crew, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    """Three leases' worth of ordinary work with the three clocks side by side: a plan
    recorded, a revert applied, a decision that waited 3 s for its parent."""
    watch = Watch(db)
    watcher = asyncio.create_task(watch.run({w.proc.pid for w in crew.all.values() if w.proc}))
    try:
        started = time.monotonic()
        tree = await seed_plan(nc.jetstream(), db, size=12)
        plan = await db.plans.find_one({"_id": tree[0]["plan_id"]})
        assert plan is not None
        lag = (await server_now(db) - plan["created_at"]).total_seconds()
        assert lag > SKEW - 2, f"the recorder's clock is not behind ({lag:.1f}s): no skew"
        cid = await CorrectionClient(nc).request(tree[0]["plan_id"], tree[1]["decision_id"],
                                                 "revert")
        await until(lambda: applied(db, cid), 30)
        late_root = root()
        child = decision(late_root["plan_id"], late_root["decision_id"])
        await publish_all(nc.jetstream(), [child])  # waits for its parent...
        await asyncio.sleep(3)
        await publish_all(nc.jetstream(), [late_root])  # ...which comes 3 s later
        await until(lambda: db.decisions.find_one({"_id": child["decision_id"]}), 30)
        await asyncio.sleep(max(0.0, 3 * LEASE - (time.monotonic() - started)))
    finally:
        watcher.cancel()
    assert watch.missing == [], watch.missing[:5]
    assert watch.recorder_owners == [crew.ids["behind"]], "the recorder's lease changed hands"
    assert await db.correction_attempts.count_documents({"correction_id": cid}) == 1


async def a_real_death(crew: Crew, db: AsyncDatabase[Document], nc: nats.NATS) -> float:
    """The worker behind dies holding the recorder's lease and a decision waiting for its
    parent; the one ahead reaps it within its lease, takes the recorder's lease when it
    expires and counts the wait from where it began. Returns the seconds to the reaping."""
    crew.normal.stop()  # a clean stop: it leaves, nobody reaps it
    orphan_root = root()
    orphan = decision(orphan_root["plan_id"], orphan_root["decision_id"])
    ack = await nc.jetstream().publish(subject(orphan), encode(orphan), headers=headers(orphan))
    key = wait_key(ack.seq)
    await until(lambda: db.parent_waits.find_one({"_id": key}), 10)
    killed_at = await server_now(db)
    kill_clock = time.monotonic()
    crew.behind.kill()

    async def reaped() -> bool:
        return await db.workers.find_one({"_id": crew.ids["behind"]}) is None
    await until(reaped, 3 * LEASE)
    reap_seconds = time.monotonic() - kill_clock

    async def judged_by_successor() -> bool:
        lease = await db.plan_locks.find_one({"_id": "role:recorder"})
        wait = await db.parent_waits.find_one({"_id": key, "seen": {"$gt": killed_at}})
        return bool(lease and lease["owner"] == crew.ids["ahead"] and wait)
    await until(judged_by_successor, PARENT_WAIT)
    await publish_all(nc.jetstream(), [orphan_root])
    await until(lambda: db.decisions.find_one({"_id": orphan["decision_id"]}), PARENT_WAIT)
    return reap_seconds


async def test_workers_with_skewed_clocks_reap_nobody_and_steal_nothing(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    base = env(nats_server.url, mongo_uri, db_name, tmp_path,
               RECORDER_PARENT_WAIT_SECONDS=str(PARENT_WAIT))
    (tmp_path / "artifacts").mkdir()
    crew = Crew(Workers(offset(base, -SKEW), tmp_path / "behind.log"),
                Workers(base, tmp_path / "normal.log"),
                Workers(offset(base, +SKEW), tmp_path / "ahead.log"))
    try:
        await crew.start(db, nats_server.url)
        await side_by_side(crew, db, nc)
        reap_seconds = await a_real_death(crew, db, nc)
        print(f"\nthe dead worker was reaped {reap_seconds:.1f}s after its SIGKILL "
              f"(its lease: {LEASE:g}s)")
        assert reap_seconds <= LEASE + 3, reap_seconds
        assert await db.dead_letters.count_documents({}) == 0, \
            [d["errors"] async for d in db.dead_letters.find()]
        dead = crew.ids["behind"]
        for name, w in crew.all.items():
            troubles = [line for line in w.log().splitlines()
                        if any(t in line for t in TROUBLE)
                        and not (name == "ahead" and "stopped beating" in line and dead in line)]
            assert troubles == [], f"{name}: {troubles[:3]}"
    finally:
        for w in crew.all.values():
            w.stop()
