"""The plans collection: PlanRecords beside the recorder's per-plan sequence counters.

A plan document is created by whichever comes first: the recorder reserving sequence
numbers (counter only, status active) or an append creating a child plan (the full
record, counter already past its root's sequence 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.plan_states import PLAN_LIFECYCLE, PlanStatus
from contracts.decisions.plans import MAX_PLAN_DEPTH, PlanRecord, ancestry
from store.database import (
    CORRECTION_ATTEMPTS,
    CORRECTIONS,
    DECISIONS,
    OUTBOX,
    PLANS,
    Document,
)
from store.errors import ResourceNotFoundError, RestrictViolation
from store.transactions import run_in_transaction
from store.translate import translate_errors

RECORD_FIELDS = frozenset(PlanRecord.model_fields) - {"plan_id"}


def from_document(doc: Document) -> PlanRecord:
    fields = {k: v for k, v in doc.items() if k in RECORD_FIELDS}
    return PlanRecord.model_validate({**fields, "plan_id": doc["_id"]})


class ParentLinks(Protocol):
    """Where parent links read before are kept (a dict, or a store.cache.LRUCache)."""

    def __contains__(self, plan_id: object) -> bool: ...
    def __getitem__(self, plan_id: str) -> str: ...
    def __setitem__(self, plan_id: str, parent: str) -> None: ...


def _top(plan: str, cache: ParentLinks, links: dict[str, str | None]) -> str:
    """The top of the chain `cache` knows above `plan` (itself if none), noting each link
    it follows in `links`; a cycle or MAX_PLAN_DEPTH links end it."""
    seen = {plan}
    while plan in cache and len(seen) <= MAX_PLAN_DEPTH:
        links[plan] = parent = cache[plan]
        if parent in seen:
            break
        plan = parent
        seen.add(plan)
    return plan


async def _read_parents(db: AsyncDatabase[Document], plans: set[str],
                        parent_of: dict[str, str | None], cache: ParentLinks,
                        session: AsyncClientSession | None) -> None:
    """One query: the recorded parent of each of `plans` into `parent_of` (None: none),
    and those that have one into `cache`."""
    docs = await db[PLANS].find({"_id": {"$in": sorted(plans)}},
                                {"parent_plan_id": 1}, session=session).to_list()
    found = {d["_id"]: d.get("parent_plan_id") for d in docs}
    for plan in plans:
        read = found.get(plan)
        parent_of[plan] = read if isinstance(read, str) else None
        if isinstance(read, str):
            cache[plan] = read


async def plan_ancestors(db: AsyncDatabase[Document], plan_ids: Iterable[str],
                         known: ParentLinks | None = None,
                         session: AsyncClientSession | None = None
                         ) -> dict[str, tuple[str, ...]]:
    """plan_id -> its ancestors (parent first), for the plans among `plan_ids` that have
    a parent, from `parent_plan_id` on the plan documents.

    `known` holds parent links read before: a parent, once recorded, never changes, so
    only the plans at the top of a known chain are read again (a top-level plan may be
    claimed later, so "no parent" is never remembered). Usually one query on `_id`; one
    more per level of a chain seen for the first time. New links are added to `known`."""
    cache: ParentLinks = known if known is not None else {}
    parent_of: dict[str, str | None] = {}   # read by this call
    links: dict[str, str | None] = {}       # every link used, read or remembered
    wanted = list(dict.fromkeys(plan_ids))
    frontier = {_top(p, cache, links) for p in wanted}
    for _ in range(MAX_PLAN_DEPTH):
        frontier -= parent_of.keys()
        if not frontier:
            break
        await _read_parents(db, frontier, parent_of, cache, session)
        frontier = {_top(parent, cache, links) for p in frontier
                    if (parent := parent_of[p]) is not None}
    links.update(parent_of)
    return {p: chain for p in wanted if (chain := ancestry(p, links))}


@translate_errors
class PlanRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._coll = db[PLANS]

    async def get(self, plan_id: str) -> PlanRecord | None:
        doc = await self._coll.find_one({"_id": plan_id})
        return from_document(doc) if doc else None

    async def ancestors(self, plan_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return await plan_ancestors(self._db, plan_ids)

    async def owner(self, plan_id: str) -> str | None:
        """The principal whose signed root started the plan (None: unsigned, or unknown)."""
        doc = await self._coll.find_one({"_id": plan_id}, {"owner": 1})
        owner = doc.get("owner") if doc else None
        return owner if isinstance(owner, str) else None

    async def statuses(self, plan_ids: Iterable[str]) -> dict[str, PlanStatus]:
        """plan_id -> status, for the plans that have a document (a readable status)."""
        ids = list(dict.fromkeys(plan_ids))
        out: dict[str, PlanStatus] = {}
        async for d in self._coll.find({"_id": {"$in": ids}}, {"status": 1}):
            try:
                out[d["_id"]] = PlanStatus(d.get("status", PlanStatus.ACTIVE.value))
            except ValueError:
                continue
        return out

    async def children(self, plan_id: str) -> list[PlanRecord]:
        return [from_document(d) async for d in self._coll.find({"parent_plan_id": plan_id})]

    async def insert_child(self, record: PlanRecord, next_sequence: int,
                           session: AsyncClientSession) -> None:
        """A child plan an append spawned: it is its parent plan's owner's and delegates'
        (read in the same transaction), whose runtime records its decisions."""
        doc: Document = record.model_dump(mode="python", exclude={"plan_id"})
        parent = await self._coll.find_one({"_id": record.parent_plan_id},
                                           {"owner": 1, "delegates": 1}, session=session)
        if parent and parent.get("owner"):
            doc |= {"owner": parent["owner"], "delegates": parent.get("delegates") or []}
        await self._coll.insert_one({"_id": record.plan_id, **doc,
                                     "next_sequence": next_sequence}, session=session)

    async def roll_back(self, plan_ids: Sequence[str], correction_id: str, now: datetime,
                        session: AsyncClientSession) -> None:
        """Mark plans rolled_back; a child plan never recorded gets a record saying so.
        Bumps each plan's epoch: a recorder batch that read the plan before this commits
        conflicts with it or plans again (store.batch_facts)."""
        # Only from a state the plan lifecycle allows it from (contracts.decisions.plans): a plan
        # already rolled back keeps who did it and when. A document without a status (a
        # plan known only by its counter) is active: `None` in `$in` matches it.
        sources = [*(st.value for st in PLAN_LIFECYCLE.sources(PlanStatus.ROLLED_BACK)), None]
        for plan_id in plan_ids:
            done = await self._coll.update_one(
                {"_id": plan_id, "status": {"$in": sources}},
                {"$set": {"status": PlanStatus.ROLLED_BACK.value,
                          "rolled_back_by": correction_id, "rolled_back_at": now},
                 "$inc": {"epoch": 1}}, session=session)
            if done.matched_count or await self._coll.find_one(
                    {"_id": plan_id}, {"_id": 1}, session=session):
                continue
            await self._coll.insert_one(
                {"_id": plan_id, "status": PlanStatus.ROLLED_BACK.value,
                 "rolled_back_by": correction_id, "rolled_back_at": now, "epoch": 1,
                 "created_at": now, "next_sequence": 0}, session=session)

    async def delete(self, plan_id: str) -> None:
        """Delete a plan with its decisions, corrections, attempts and pending events.

        Refused (RestrictViolation) if an attempt of *another* plan names one of its
        decisions: that attempt's audit trail would lose its decision.
        """
        await run_in_transaction(self._db.client, lambda s: self._delete(plan_id, s))

    async def _delete(self, plan_id: str, s: AsyncClientSession) -> None:
        plan = await self._coll.find_one({"_id": plan_id}, {"_id": 1}, session=s)
        has_decisions = await self._db[DECISIONS].find_one({"plan_id": plan_id}, {"_id": 1},
                                                          session=s)
        if plan is None and has_decisions is None:
            raise ResourceNotFoundError("plan", plan_id)
        ids = [d["_id"] async for d in self._db[DECISIONS].find(
            {"plan_id": plan_id}, {"_id": 1}, session=s)]
        foreign = [a["_id"] async for a in self._db[CORRECTION_ATTEMPTS].find(
            {"plan_id": {"$ne": plan_id},
             "$or": [{"original_decision_id": {"$in": ids}}, {"new_decision_id": {"$in": ids}}]},
            {"_id": 1}, session=s)] if ids else []
        if foreign:
            raise RestrictViolation(f"plan {plan_id}", foreign)
        corrections = [c["_id"] async for c in self._db[CORRECTIONS].find(
            {"plan_id": plan_id}, {"_id": 1}, session=s)]
        await self._db[CORRECTION_ATTEMPTS].delete_many({"plan_id": plan_id}, session=s)
        if corrections:
            await self._db[OUTBOX].delete_many({"correction_id": {"$in": corrections}},
                                               session=s)
        await self._db[CORRECTIONS].delete_many({"plan_id": plan_id}, session=s)
        await self._db[DECISIONS].delete_many({"plan_id": plan_id}, session=s)
        await self._coll.delete_one({"_id": plan_id}, session=s)
