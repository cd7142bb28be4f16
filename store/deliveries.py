"""What the inbound pipeline remembers about a stream message across its deliveries.

- `delivery_failures`: one document per stream message that failed at least once,
  {_id: "<stream>:<seq>", consumer, count, attempts: [{delivered, error, at}]}, the
  last MAX_ATTEMPTS_KEPT attempts only. When JetStream gives up on the message
  (MaxDeliver), its dead letter lists these errors; then the document is removed. The
  worker that settles a message after a failure removes it too; what another worker
  settled is removed a day after its last failure (at a worker's start).
- `parent_waits`: {_id: "<stream>:<seq>", since, seen, waited_ms} for a decision whose
  parent was not stored when it was first judged: the recorder's parent wait is counted
  in seconds, not in deliveries, so deliveries spent in a database outage do not
  count. `waited_ms` adds up the gaps between sightings (`seen`), each counted as at
  most the policy's wait_gap_max_seconds: a longer gap is an outage, a hand-over or
  the server's clock stepping forward, and counting it whole once dead-lettered
  acknowledged decisions whose parents were merely behind. The times are the database
  server's (`$$NOW`, ADR 0027), so a recorder that takes over from one whose clock
  disagrees counts the same wait. Written only for messages that wait; left behind
  once decided (small, and swept by `forget_older_than`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from store.database import DELIVERY_FAILURES, PARENT_WAITS, Document, find_by_ids
from store.dead_letters import DUPLICATE_KEY
from store.server_clock import NOW, millis
from store.translate import translate_errors

MAX_ATTEMPTS_KEPT = 25
"""Attempts kept per message (the most recent); MaxDeliver is normally below it."""


@dataclass(frozen=True, slots=True)
class Attempt:
    delivered: int
    error: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Failure:
    key: str          # "<stream>:<seq>"
    consumer: str
    attempt: Attempt


@translate_errors
class DeliveryFailures:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[DELIVERY_FAILURES]

    async def record(self, failures: Sequence[Failure]) -> None:
        """Append each attempt (one bulk write); a redelivered attempt is not doubled."""
        if not failures:
            return
        try:
            await self._write(failures)
        except BulkWriteError as exc:
            # The attempt was already recorded (its filter missed, the upsert collided).
            if any(e.get("code") != DUPLICATE_KEY for e in exc.details.get("writeErrors", [])):
                raise

    async def _write(self, failures: Sequence[Failure]) -> None:
        await self._coll.bulk_write([
            UpdateOne(
                {"_id": f.key, "attempts.delivered": {"$ne": f.attempt.delivered}},
                {"$setOnInsert": {"consumer": f.consumer},
                 "$set": {"last_at": f.attempt.at},
                 "$inc": {"count": 1},
                 "$push": {"attempts": {"$each": [{
                     "delivered": f.attempt.delivered, "error": f.attempt.error,
                     "at": f.attempt.at}], "$slice": -MAX_ATTEMPTS_KEPT}}},
                upsert=True)
            for f in failures], ordered=False)

    async def attempts(self, key: str) -> list[Attempt]:
        doc = await self._coll.find_one({"_id": key})
        if doc is None:
            return []
        return [Attempt(a["delivered"], a["error"], a["at"]) for a in doc.get("attempts", [])]

    async def exhausted(self, consumer: str, max_deliver: int) -> list[str]:
        """Keys of the consumer's messages that failed at least `max_deliver` times."""
        cursor = self._coll.find({"consumer": consumer, "count": {"$gte": max_deliver}},
                                 {"_id": 1})
        return [d["_id"] async for d in cursor]

    async def forget(self, key: str) -> None:
        await self._coll.delete_one({"_id": key})

    async def forget_many(self, keys: Sequence[str]) -> None:
        """Messages that succeeded after failing: their failures no longer matter."""
        if keys:
            await self._coll.delete_many({"_id": {"$in": list(keys)}})

    async def forget_older_than(self, consumer: str, cutoff: datetime) -> int:
        """Failures of messages that settled elsewhere (another worker acked them)."""
        res = await self._coll.delete_many({"consumer": consumer, "last_at": {"$lt": cutoff}})
        return res.deleted_count


@translate_errors
class ParentWaits:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[PARENT_WAITS]

    async def waited(self, keys: Iterable[str], gap_max: float) -> dict[str, float]:
        """Seconds each message has waited by the server's clock (0 for the new ones):
        one write adds the gap since `seen` (at most `gap_max`, never below 0) to
        `waited_ms` and stamps `seen`, both from `$$NOW`; then one read. (The dates go
        through `$toLong`: store.server_clock.)"""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        now = millis(NOW)
        gap = {"$subtract": [now, millis({"$ifNull": ["$seen", NOW]})]}
        step = {"$min": [int(gap_max * 1000), {"$max": [0, gap]}]}
        stamp = [{"$set": {"since": {"$ifNull": ["$since", NOW]}, "seen": NOW,
                           "waited_ms": {"$add": [{"$ifNull": ["$waited_ms", 0]}, step]}}}]
        await self._coll.bulk_write([UpdateOne({"_id": k}, stamp, upsert=True)
                                     for k in wanted], ordered=False)
        found = await find_by_ids(self._coll, wanted, {"waited_ms": 1})
        return {d["_id"]: float(d["waited_ms"]) / 1000 for d in found}

    async def forget_older_than(self, cutoff: datetime) -> int:
        res = await self._coll.delete_many({"since": {"$lt": cutoff}})
        return res.deleted_count
