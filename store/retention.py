"""Retention in MongoDB: which plans a policy finds due, their families, and removing a
family's records in one transaction (contracts.retention.policies).

Every read is bounded by the caller's batch; a family is removed in one transaction
with the line of the retention log that says so (`retention_log`: the policy, the
plans, the counts, the export file), so a family is either wholly there or wholly gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import MAX_PLAN_DEPTH
from contracts.retention.erasure import erasure_update
from contracts.retention.policies import Action, Policy, Records
from store.database import (
    COMMENTS,
    CORRECTION_ATTEMPTS,
    CORRECTIONS,
    DEAD_LETTERS,
    DECISION_HOLDS,
    DECISIONS,
    INVARIANT_VIOLATIONS,
    PARENT_WAITS,
    PLAN_LOCKS,
    PLAN_USES,
    PLANS,
    Document,
)
from store.transactions import run_in_transaction
from store.translate import translate_errors

RETENTION_LOG = "retention_log"
BY_PLAN = (DECISIONS, CORRECTIONS, CORRECTION_ATTEMPTS, INVARIANT_VIOLATIONS,
           DECISION_HOLDS, COMMENTS, PARENT_WAITS, DEAD_LETTERS)
"""The collections whose documents belong to a plan by `plan_id`."""
SINCE = {PlanStatus.ROLLED_BACK: "rolled_back_at", PlanStatus.COMPLETED: "ended_at",
         PlanStatus.ABANDONED: "ended_at", PlanStatus.ACTIVE: "created_at"}
"""From when a plan's age counts, by its status."""
ERASED_MARK = "retained.erased_at"


def due_queries(policy: Policy, cut: datetime) -> list[Document]:
    """One query per status the policy covers, each served by the plans' `by_status`
    index: not one `$or` of them, which SecantusDB answers by reading every plan, for
    every page of a sweep (ADR 0038)."""
    queries: list[Document] = []
    for s in policy.statuses:
        query: Document = {"status": s.value, SINCE[s]: {"$lt": cut}}
        if policy.action is Action.ERASE:
            query[ERASED_MARK] = {"$exists": False}
        queries.append(query)
    return queries


@translate_errors
class RetentionStore:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._client = db.client

    async def due_plans(self, policy: Policy, cut: datetime, limit: int,
                        after: str | None = None) -> list[str]:
        """Up to `limit` plans the policy finds due, in ID order after `after`."""
        after_id: Document = {"_id": {"$gt": after}} if after is not None else {}
        pages = await asyncio.gather(*(
            self._db[PLANS].find(q | after_id, {"_id": 1}).sort("_id", 1).limit(
                limit).to_list() for q in due_queries(policy, cut)))
        return sorted({str(d["_id"]) for docs in pages for d in docs})[:limit]

    async def families(self, plan_ids: Iterable[str]) -> dict[str, list[str]]:
        """Each plan's whole family: up to its top plan, then every plan below it."""
        parent: dict[str, str | None] = {}
        frontier = set(plan_ids)
        for _ in range(MAX_PLAN_DEPTH + 1):
            if not frontier:
                break
            docs = await self._db[PLANS].find({"_id": {"$in": sorted(frontier)}},
                                              {"parent_plan_id": 1}).to_list()
            for d in docs:
                parent[str(d["_id"])] = d.get("parent_plan_id")
            frontier = {p for p in parent.values() if p and p not in parent}
        top = {p: _top(p, parent) for p in plan_ids}
        below = await self._below(set(top.values()))
        return {p: below.get(t, [t]) for p, t in top.items()}

    async def _below(self, tops: set[str]) -> dict[str, list[str]]:
        """Each top plan and every plan below it, level by level."""
        family = {t: [t] for t in tops}
        owner = {t: t for t in tops}
        level = sorted(tops)
        for _ in range(MAX_PLAN_DEPTH + 1):
            if not level:
                break
            docs = await self._db[PLANS].find({"parent_plan_id": {"$in": level}},
                                              {"parent_plan_id": 1}).to_list()
            level = []
            for d in docs:
                child, t = str(d["_id"]), owner[str(d["parent_plan_id"])]
                if child not in owner:
                    owner[child] = t
                    family[t].append(child)
                    level.append(child)
        return family

    async def remove(self, plan_ids: list[str], log: Document) -> dict[str, int]:
        """Delete every record of these plans and write the log line, in one transaction;
        how many documents of each collection went."""
        async def write(s: AsyncClientSession) -> dict[str, int]:
            counts: dict[str, int] = {}
            for name in BY_PLAN:
                res = await self._db[name].delete_many({"plan_id": {"$in": plan_ids}},
                                                       session=s)
                counts[name] = res.deleted_count
            await self._db[PLAN_USES].delete_many({"_id": {"$in": plan_ids}}, session=s)
            await self._db[PLAN_LOCKS].delete_many({"_id": {"$in": plan_ids}}, session=s)
            counts[PLANS] = (await self._db[PLANS].delete_many(
                {"_id": {"$in": plan_ids}}, session=s)).deleted_count
            await self._db[RETENTION_LOG].insert_one(log | {"counts": counts}, session=s)
            return counts

        return await run_in_transaction(self._client, write)

    async def mark_erased(self, plan_ids: list[str], policy: str, now: datetime) -> None:
        await self._db[PLANS].update_many({"_id": {"$in": plan_ids}}, {"$set": {
            ERASED_MARK: now, "retained.policy": policy}})

    async def count_old(self, records: Records, cut: datetime) -> int:
        """How many dead letters (or resolved violations not yet erased) are older."""
        if records is Records.DEAD_LETTERS:
            return await self._db[DEAD_LETTERS].count_documents({"rejected_at": {"$lt": cut}})
        return await self._db[INVARIANT_VIOLATIONS].count_documents(
            {"resolved_at": {"$lt": cut}, "erased": {"$exists": False}})

    async def old_dead_letters(self, cut: datetime, limit: int) -> list[str]:
        docs = await self._db[DEAD_LETTERS].find({"rejected_at": {"$lt": cut}}, {"_id": 1}
                                                 ).limit(limit).to_list()
        return [str(d["_id"]) for d in docs]

    async def remove_dead_letters(self, ids: list[str], log: Document) -> int:
        async def write(s: AsyncClientSession) -> int:
            n = (await self._db[DEAD_LETTERS].delete_many({"_id": {"$in": ids}}, session=s)
                 ).deleted_count
            await self._db[RETENTION_LOG].insert_one(log | {"counts": {DEAD_LETTERS: n}},
                                                     session=s)
            return n

        return await run_in_transaction(self._client, write)

    async def old_resolutions(self, cut: datetime, limit: int) -> list[Document]:
        return await self._db[INVARIANT_VIOLATIONS].find(
            {"resolved_at": {"$lt": cut}, "erased": {"$exists": False}}).limit(limit).to_list()

    async def erase_details(self, docs: list[Document], stamp: dict[str, Any]) -> int:
        """Erase each resolved violation's details, keeping its digest (its record is
        chained: it stays)."""
        n = 0
        for doc in docs:
            update = erasure_update(doc, ("details",))
            if update:
                await self._db[INVARIANT_VIOLATIONS].update_one(
                    {"_id": doc["_id"]}, {"$set": update | stamp})
                n += 1
        return n


def _top(plan_id: str, parent: dict[str, str | None]) -> str:
    seen = {plan_id}
    while (up := parent.get(plan_id)) and up not in seen and up in parent:
        seen.add(up)
        plan_id = up
    return plan_id
