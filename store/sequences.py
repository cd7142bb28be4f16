"""A plan's counter document (in `plans`): its decisions' sequence numbers and the head of
its record chain (contracts.trust.chain), both taken inside the writing transaction.

Numbers are never reused and stay dense even if a writer dies, and every writer of a
plan's records (a recorder batch, a correction's step, a violation's report or
resolution) writes this one document in its transaction, conditional on what it read:
two writers of one plan conflict at the database, never fork the chain. A revert also
bumps the plan's correction epoch here, so a recorder batch and a revert of one plan
conflict too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection

from contracts.decisions.plan_states import PlanStatus
from contracts.trust.chain import Head, Link
from store.database import Document
from store.errors import ConcurrentChange

COUNTER_FIELDS = ("next_sequence", "chain_length", "chain_head")
COUNTER_PROJECTION = {name: 1 for name in (*COUNTER_FIELDS, "epoch", "status", "owner")}


class CounterMoved(Exception):
    """A plan's counter is not what the write was computed from: compute it again."""


@dataclass(frozen=True, slots=True)
class Counter:
    """A plan's counter as a write leaves it: the next sequence number and the chain."""

    next_sequence: int = 0
    chain: Head = field(default_factory=Head)

    @classmethod
    def of(cls, doc: Mapping[str, Any] | None) -> Counter:
        return cls(int((doc or {}).get("next_sequence") or 0), Head.of(doc))

    def as_document(self) -> Document:
        """What the counter document holds of it (and what a guess at it filters on)."""
        return {"next_sequence": self.next_sequence, **self.chain.as_fields()}


def counter_filter(doc: Mapping[str, Any] | None) -> Document:
    """Matches the counter exactly as it was read (a missing field as missing)."""
    return {name: (doc or {}).get(name) for name in COUNTER_FIELDS}


async def read_counters(plans: AsyncCollection[Document], plan_ids: list[str],
                        session: AsyncClientSession) -> dict[str, Document | None]:
    """The counter documents of `plan_ids` (None: no document yet), in one round trip."""
    if len(plan_ids) == 1:
        found = [d] if (d := await plans.find_one({"_id": plan_ids[0]}, COUNTER_PROJECTION,
                                                  session=session)) else []
    else:
        found = await plans.find({"_id": {"$in": plan_ids}}, COUNTER_PROJECTION,
                                 session=session).to_list()
    by_id = {d["_id"]: d for d in found}
    return {p: by_id.get(p) for p in plan_ids}


async def write_counters(plans: AsyncCollection[Document],
                         writes: Mapping[str, tuple[Document | None, Counter]],
                         now: datetime, session: AsyncClientSession) -> None:
    """Set each plan's counter to its new value, conditional on the one it was computed
    from (a plan without a document gets one): one round trip. CounterMoved if another
    writer changed one since."""
    ops = [({"_id": p, **counter_filter(before)},
            {"$set": after.as_document(), "$setOnInsert": _new_plan(now)}, before is None)
           for p, (before, after) in writes.items()]
    if len(ops) == 1:
        [(where, update, upsert)] = ops
        res = await plans.update_one(where, update, upsert=upsert, session=session)
        done = res.matched_count + (1 if res.upserted_id is not None else 0)
    else:
        bulk = await plans.bulk_write([UpdateOne(where, update, upsert=upsert)
                                       for where, update, upsert in ops],
                                      ordered=True, session=session)
        done = bulk.matched_count + bulk.upserted_count
    if done != len(ops):
        raise CounterMoved(f"{len(ops) - done} plan counter(s) changed since they were read")


async def write_guessed(plans: AsyncCollection[Document], plan_id: str, guess: Counter,
                        after: Counter, session: AsyncClientSession) -> Document:
    """`write_counters` for one plan whose counter is known from this process's own last
    write: read and written in one round trip. Returns the document as it was (for the
    caller's epoch and owner checks); CounterMoved if it is not the guess."""
    before: Document | None = await plans.find_one_and_update(
        {"_id": plan_id, **guess.as_document()}, {"$set": after.as_document()},
        return_document=ReturnDocument.BEFORE, projection=COUNTER_PROJECTION,
        session=session)
    if before is None:
        raise CounterMoved(f"plan {plan_id}'s counter moved since this process wrote it")
    return before


def _new_plan(now: datetime) -> Document:
    return {"created_at": now, "status": PlanStatus.ACTIVE.value}


async def reserve_sequences(plans: AsyncCollection[Document], plan_id: str, count: int,
                            now: datetime, session: AsyncClientSession, *,
                            bump_epoch: bool = False) -> int:
    """Take `count` sequence numbers of a plan; the first one. For the correction
    transaction: a revert passes `bump_epoch`, and every recorder batch that read the plan
    before the revert committed then plans again (store.batch_facts)."""
    inc = {"next_sequence": count, **({"epoch": 1} if bump_epoch else {})}
    before: Document | None = await plans.find_one_and_update(
        {"_id": plan_id}, {"$inc": inc, "$setOnInsert": _new_plan(now)},
        upsert=True, return_document=ReturnDocument.BEFORE,
        projection={"next_sequence": 1}, session=session)
    return int(before.get("next_sequence", 0)) if before else 0


class PlanChains:
    """The chains of the plans one transaction (a correction's step, a violation's report
    or resolution) adds records to: each head read once, advanced per record, and written
    back by `save` conditional on what was read, so a concurrent writer of the same plan
    is a conflict (ConcurrentChange, and the step runs again) rather than a fork."""

    def __init__(self, plans: AsyncCollection[Document], session: AsyncClientSession,
                 now: datetime) -> None:
        self._plans = plans
        self._session = session
        self._now = now
        self._read: dict[str, Document | None] = {}
        self._heads: dict[str, Head] = {}

    async def link(self, plan_id: str, kind: str, record_id: str,
                   content: Mapping[str, Any]) -> Link:
        """The next link of `plan_id`'s chain for this record."""
        if plan_id not in self._heads:
            doc = await self._plans.find_one({"_id": plan_id}, {"chain_length": 1,
                                                                "chain_head": 1},
                                             session=self._session)
            self._read[plan_id] = doc
            self._heads[plan_id] = Head.of(doc)
        link = self._heads[plan_id].link(plan_id, kind, record_id, content)
        self._heads[plan_id] = self._heads[plan_id].after(link)
        return link

    async def save(self) -> None:
        for plan_id, head in self._heads.items():
            before = self._read[plan_id]
            res = await self._plans.update_one(
                {"_id": plan_id, "chain_length": (before or {}).get("chain_length"),
                 "chain_head": (before or {}).get("chain_head")},
                {"$set": head.as_fields(), "$setOnInsert": _new_plan(self._now)},
                upsert=before is None, session=self._session)
            if res.matched_count + (1 if res.upserted_id is not None else 0) != 1:
                raise ConcurrentChange(f"plan {plan_id}'s record chain moved since it was "
                                       "read in this transaction")
