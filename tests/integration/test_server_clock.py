"""Leases, heartbeats and parent waits are stamped and judged by the database server's
clock (`$$NOW`, store.server_clock): nothing in them reads this process's clock, so the
values stored are the server's time plus the lease, and what counts as expired is what
the server's time says. (tests/integration/test_clock_skew.py runs workers whose clocks
are really off.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from store.database import ID_CHUNK, PLAN_LOCKS, WORKERS, Document
from store.leases import Leases, Taken
from store.workers import WorkerRegistry

pytestmark = pytest.mark.store

MS = timedelta(milliseconds=1)


async def server_now(db: AsyncDatabase[Document]) -> datetime:
    found: datetime = (await db.client.admin.command("hello"))["localTime"]
    return found if found.tzinfo else found.replace(tzinfo=UTC)


async def test_a_lease_expires_a_ttl_after_the_servers_time(db: AsyncDatabase[Document]) -> None:
    leases, plan = Leases(db, 5.0), new_id()
    before = await server_now(db)
    assert await leases.acquire(plan, "a")
    after = await server_now(db)
    doc = await db[PLAN_LOCKS].find_one({"_id": plan})
    assert doc is not None
    assert before + leases.ttl - MS <= doc["expires_at"] <= after + leases.ttl + MS


async def test_an_expired_lease_is_judged_by_the_servers_time(db: AsyncDatabase[Document]
                                                              ) -> None:
    leases, plan, soon = Leases(db, 5.0), new_id(), new_id()
    now = await server_now(db)
    await db[PLAN_LOCKS].insert_many([
        {"_id": plan, "owner": "a", "expires_at": now - timedelta(seconds=1)},
        {"_id": soon, "owner": "a", "expires_at": now + timedelta(seconds=30)}])
    assert await leases.live([plan, soon]) == {soon}
    # Over by the server's clock: taken, from a holder whose lease expired.
    assert await leases.take(plan, "b") is Taken.EXPIRED
    assert not await leases.acquire(soon, "b")  # not yet, whatever the taker's clock says
    assert await leases.take(soon, "b") is Taken.REFUSED
    assert await leases.live([plan, soon]) == {plan, soon}
    assert await leases.take(plan, "b") is Taken.OURS
    await leases.release(plan, "b")
    assert await leases.take(plan, "c", fenced=True) is Taken.FREE


async def test_renewing_many_leases_at_once_renews_only_the_owners(
        db: AsyncDatabase[Document]) -> None:
    """`renew_all` (a replica's recorder partitions, one write per ID_CHUNK): each lease
    still the owner's is pushed a ttl past the server's time; one another took after it
    expired, one released, and one never taken are reported lost and left as they are."""
    leases = Leases(db, 5.0)
    mine = [new_id() for _ in range(ID_CHUNK + 3)]  # more than one write's worth
    taken, released, never = mine[0], mine[1], new_id()
    for lease in mine:
        assert await leases.acquire(lease, "a")
    now = await server_now(db)
    await db[PLAN_LOCKS].update_one({"_id": taken},
                                    {"$set": {"expires_at": now - timedelta(seconds=1)}})
    assert await leases.take(taken, "b") is Taken.EXPIRED
    await leases.release(released, "a")
    theirs = await db[PLAN_LOCKS].find_one({"_id": taken})
    before = await server_now(db)

    renewed = await leases.renew_all([*mine, never, mine[5]], "a")

    after = await server_now(db)
    assert renewed == set(mine[2:])
    async for doc in db[PLAN_LOCKS].find({"_id": {"$in": mine[2:]}}):
        assert doc["owner"] == "a"
        assert before + leases.ttl - MS <= doc["expires_at"] <= after + leases.ttl + MS
    assert await db[PLAN_LOCKS].find_one({"_id": taken}) == theirs
    assert await db[PLAN_LOCKS].count_documents({"_id": {"$in": [released, never]}}) == 0
    assert await leases.renew_all(mine[2:], "a") == set(mine[2:])  # none lost: no read
    assert await leases.renew_all([], "a") == set()


async def test_a_renewal_racing_a_take_over_leaves_one_holder(
        db: AsyncDatabase[Document]) -> None:
    """A replica renewing its leases (`renew_all`) while another takes one of them over
    as it expires, at once: either the renewal wins (the take is refused) or the take
    does (the renewal reports the lease lost); never both, never neither."""
    leases = Leases(db, 5.0)
    for _ in range(20):
        lease, other = new_id(), new_id()
        assert await leases.acquire(lease, "a") and await leases.acquire(other, "a")
        now = await server_now(db)
        await db[PLAN_LOCKS].update_one({"_id": lease},
                                        {"$set": {"expires_at": now - timedelta(seconds=1)}})
        renewed, taken = await asyncio.gather(leases.renew_all([lease, other], "a"),
                                              leases.take(lease, "b"))
        holder = (await db[PLAN_LOCKS].find_one({"_id": lease}) or {}).get("owner")
        assert other in renewed
        if lease in renewed:
            assert taken is Taken.REFUSED and holder == "a"
        else:
            assert taken is Taken.EXPIRED and holder == "b"


async def test_the_heartbeat_and_the_reaping_follow_the_servers_time(
        db: AsyncDatabase[Document]) -> None:
    me = WorkerRegistry(db, "me", lease_seconds=5.0)
    before = await server_now(db)
    await me.heartbeat()
    mine = await db[WORKERS].find_one({"_id": "me"})
    assert mine is not None and mine["lsids"] == [] and mine["pid"] > 0
    assert before - MS <= mine["seen_at"] and mine["started_at"] == mine["seen_at"]
    assert mine["expires_at"] - mine["seen_at"] == me.lease
    await me.heartbeat()  # renewed: started_at kept
    again = await db[WORKERS].find_one({"_id": "me"})
    assert again is not None and again["started_at"] == mine["started_at"]
    now = await server_now(db)
    await db[WORKERS].insert_many([
        {"_id": "dead", "expires_at": now - timedelta(seconds=1), "lsids": []},
        {"_id": "alive", "expires_at": now + timedelta(seconds=30), "lsids": []},
        {"_id": "registering", "lsids": []}])  # noted a session before its first beat
    assert await me.reap() == ["dead"]
    left = {d["_id"] async for d in db[WORKERS].find({}, {"_id": 1})}
    assert left == {"me", "alive", "registering"}
