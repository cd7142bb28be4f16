"""Leases (collection `plan_locks`, its stored name): one holder at a time. A plan's lease
lets one runner at a time work its corrections; the `role:recorder` lease lets one
replica at a time run the recorder (workers/leading.py).

A lease is a document {_id: plan_id, owner, expires_at}. Taking it is one
findAndModify that matches only a free or expired lease; when the lease is held, the
upsert collides with the existing _id and the server refuses it, so two replicas can
never both believe they hold it. A holder that dies simply lets it expire.
While a runner holds a plan's lease a heartbeat renews it (`renew`, conditional on the
owner), so a long impact walk or archive copy never loses it; every correction
transaction also renews it conditionally on its owner (`fence`), so a runner that
stalled past its expiry (its heartbeat stalled with it) cannot commit over its successor.

Every expiry is stamped and judged by the database server's clock (store.server_clock,
ADR 0027): no method takes a time, so a worker whose clock is off can neither write a
lease that is already over nor take one that is still running.

A recorder partition's lease is taken `fenced`: once the lease is the taker's, it also
becomes the last taker in the lease's fence record (collection `lease_fences`), and every
batch the holder writes updates that record, in the batch's transaction, on the
condition that it is still the last taker (`fence_lease`). A batch and a take-over
thus write one record, and the database orders them: a holder that stalled past its
expiry and wakes up with a batch in hand finds the record another's (LeaseLost) and
writes nothing; a take-over's write of the record waits for a batch in flight to end,
so every batch of the old holder commits before the new holder pulls. The record is
apart from the lease, so renewals never wait on a batch's transaction nor make one start
over, and in a collection of its own, so no other reader or writer meets the batches'
writes to it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.shared.persistence import LeaseFence
from store.database import LEASE_FENCES, PLAN_LOCKS, Document, id_chunks
from store.errors import LeaseLost
from store.server_clock import after_now, expired, unexpired
from store.translate import translate_errors


class Taken(StrEnum):
    """How a take of a lease went (`Leases.take`)."""

    REFUSED = "refused"   # another holds it
    FREE = "free"         # nobody held it (never taken, or released)
    OURS = "ours"         # already the taker's: renewed
    EXPIRED = "expired"   # taken over from a holder whose lease ran out: it died or
    #                       stalled, with whatever it was doing left unsettled


@translate_errors
class Leases:
    def __init__(self, db: AsyncDatabase[Document], ttl_seconds: float) -> None:
        self._coll = db[PLAN_LOCKS]
        self._fences = db[LEASE_FENCES]
        self.ttl = timedelta(seconds=ttl_seconds)

    def _stamp(self, owner: str) -> list[dict[str, Any]]:
        """The update pipeline that makes `owner` the holder until now + ttl (server's now)."""
        return [{"$set": {"owner": {"$literal": owner}, "expires_at": after_now(self.ttl)}}]

    async def acquire(self, plan_id: str, owner: str, *, fenced: bool = False) -> bool:
        """Take the lease if it is free, expired or already `owner`'s (`take`)."""
        return await self.take(plan_id, owner, fenced=fenced) is not Taken.REFUSED

    async def take(self, plan_id: str, owner: str, *, fenced: bool = False) -> Taken:
        """Take the lease if it is free, expired or already `owner`'s, and say which it
        was. `fenced`: then make `owner` the last taker in its fence record (the writes
        under it call `fence_lease`)."""
        free_or_ours = {"$or": [{"$eq": ["$owner", {"$literal": owner}]},
                                expired("expires_at")]}
        try:
            before = await self._coll.find_one_and_update(
                {"_id": plan_id, "$expr": free_or_ours}, self._stamp(owner), upsert=True)
        except DuplicateKeyError:
            return Taken.REFUSED
        if fenced:
            # After the lease: a taker that dies in between leaves the record to the
            # previous taker, who remains the only one that can write under it; one
            # that fails to write it gives the lease back, to be taken again whole.
            try:
                await self._fences.update_one({"_id": plan_id}, {"$set": {"owner": owner}},
                                              upsert=True)
            except BaseException:
                with contextlib.suppress(Exception):
                    await self.release(plan_id, owner)
                raise
        if before is None:
            return Taken.FREE
        return Taken.OURS if before.get("owner") == owner else Taken.EXPIRED

    async def renew(self, plan_id: str, owner: str) -> bool:
        """Push the expiry on if the lease is still `owner`'s; False once it is not."""
        res = await self._coll.update_one({"_id": plan_id, "owner": owner}, self._stamp(owner))
        return res.matched_count == 1

    async def renew_all(self, lease_ids: Sequence[str], owner: str) -> set[str]:
        """`renew` for several leases at once: those of `lease_ids` still `owner`'s, each
        renewed. One write per ID_CHUNK leases, and one read only when some lease was
        lost, instead of a write per lease: a replica holding many recorder partitions
        renews them all every third of the lease's length, and on secantusd-py each
        renewal waits behind any transaction's statement in progress (docs/benchmarks.md,
        "One statement at a time"). A multi-document update is not a write the driver
        retries: one cut by a failover fails the round (workers.leading), and the next
        round, a third of the lease later, renews again."""
        return {lease for found in await asyncio.gather(
            *(self._renew_chunk(chunk, owner) for chunk in id_chunks(lease_ids)))
            for lease in found}

    async def _renew_chunk(self, lease_ids: list[str], owner: str) -> set[str]:
        mine = {"_id": {"$in": lease_ids}, "owner": owner}
        res = await self._coll.update_many(mine, self._stamp(owner))
        if res.matched_count == len(lease_ids):
            return set(lease_ids)
        # A lease the update did not match is another's (or gone) and cannot become
        # this owner's again without a take; one it matched was just renewed, so it
        # cannot have been taken since: the holder read now is the one the write saw.
        return {str(d["_id"]) async for d in self._coll.find(mine, {"_id": 1})}

    async def release(self, plan_id: str, owner: str) -> None:
        await self._coll.delete_one({"_id": plan_id, "owner": owner})

    async def fence(self, plan_id: str, owner: str, session: AsyncClientSession) -> None:
        """Renew inside a transaction; raise LeaseLost (aborting it) if no longer ours."""
        res = await self._coll.update_one({"_id": plan_id, "owner": owner},
                                          self._stamp(owner), session=session)
        if res.matched_count != 1:
            raise LeaseLost(plan_id, owner)

    async def live(self, plan_ids: list[str]) -> set[str]:
        """Which of these plans have a lease that has not expired: a runner is on them."""
        cursor = self._coll.find({"_id": {"$in": plan_ids}, "expires_at": {"$type": "date"},
                                  "$expr": unexpired("expires_at")}, {"_id": 1})
        return {str(d["_id"]) async for d in cursor}

    async def holder(self, plan_id: str) -> str | None:
        doc = await self._coll.find_one({"_id": plan_id})
        return str(doc["owner"]) if doc else None


async def fence_lease(db: AsyncDatabase[Document], f: LeaseFence,
                      session: AsyncClientSession) -> None:
    """`f` inside the session's transaction: a write to the lease's fence record if
    `f.owner` was its last taker (`Leases.acquire(fenced=True)`), else LeaseLost (the
    transaction aborts). A write, not a read, so that a take-over committing meanwhile
    conflicts with it instead of passing unseen."""
    res = await db[LEASE_FENCES].update_one({"_id": f.lease, "owner": f.owner},
                                            {"$inc": {"writes": 1}}, session=session)
    if res.matched_count != 1:
        raise LeaseLost(f.lease, f.owner)
