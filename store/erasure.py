"""Erasure in MongoDB: which records an erasure reaches, and removing their text while
keeping the tree (contracts.retention.erasure, ADR 0034).

An erasure of a decision reaches the decision and the decisions that correct it (a
revert's replacement says what it replaced); of a plan, every decision of the plan; of
a reference, every decision whose free text or references contain it. With them go the
corrections about those decisions (their guidance and copied choice), the correction
attempts and the child plans' guidance those corrections carried, and the archive
entries the corrections kept. Each batch of decisions is one transaction, with the
erasure's own record (`erasures`: who, when, why, what) written in the first and counted
in every later one, so an erasure stopped half-way is seen, and run again finishes it
(erasing twice keeps the first digests).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.retention.erasure import CORRECTION_TEXT, DECISION_TEXT, ERASED, erasure_update
from contracts.retention.reach import ERASE_MAX, Reach, TooMany
from store.database import CORRECTION_ATTEMPTS, CORRECTIONS, DECISIONS, PLANS, Document
from store.transactions import run_in_transaction
from store.translate import translate_errors

ERASURES = "erasures"
BATCH = 200
"""Decisions erased per transaction."""
MENTION_FIELDS = ("question", "chosen_option", "alternatives_considered", "rationale",
                  "actor_reasoning", "correction_reason", "context_snapshot.hot_context_ref",
                  "context_snapshot.actor_state_ref",
                  "context_snapshot.relevant_resources.resource_id",
                  "context_snapshot.relevant_resources.path",
                  "artifacts_produced.artifact_path")


def mentions_query(ref: str) -> Document:
    pattern = {"$regex": re.escape(ref)}
    return {"$or": [{name: pattern} for name in MENTION_FIELDS]}


@translate_errors
class ErasureRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._client = db.client

    async def reach(self, *, decision_id: str | None = None,
                    plan_ids: list[str] | None = None, mentions: str | None = None) -> Reach:
        """The decisions (and what copies their text) one erasure reaches."""
        if decision_id is not None:
            query: Document = {"$or": [{"_id": decision_id},
                                       {"corrects_decision_id": decision_id}]}
        elif plan_ids is not None:
            query = {"plan_id": {"$in": plan_ids}}
        else:
            query = mentions_query(mentions or "")
        docs = await self._db[DECISIONS].find(query, {"plan_id": 1}).limit(
            ERASE_MAX + 1).to_list()
        if len(docs) > ERASE_MAX:
            raise TooMany(f"the erasure would reach more than {ERASE_MAX} decisions: "
                          "erase a plan at a time")
        found = Reach(decision_ids=[str(d["_id"]) for d in docs],
                      plan_ids=sorted({str(d["plan_id"]) for d in docs}))
        await self._corrections(found, plan_wide=plan_ids or [])
        return found

    async def projects(self, plan_ids: list[str]) -> dict[str, str | None]:
        """Each plan's project (what an operator's scope is checked against)."""
        docs = await self._db[PLANS].find({"_id": {"$in": plan_ids}}, {"project": 1}
                                          ).to_list()
        return {str(d["_id"]): d.get("project") for d in docs}

    async def _corrections(self, found: Reach, plan_wide: list[str]) -> None:
        ids = found.decision_ids
        query: Document = {"$or": [{"decision_id": {"$in": ids}},
                                   {"new_decision_id": {"$in": ids}},
                                   {"superseded_ids": {"$in": ids}}]}
        if plan_wide:
            query["$or"].append({"plan_id": {"$in": plan_wide}})
        docs = await self._db[CORRECTIONS].find(
            query, {"plan_id": 1, "decision_id": 1, "new_decision_id": 1,
                    "child_plans_spawned": 1}).limit(ERASE_MAX).to_list()
        wanted = set(ids)
        for d in docs:
            found.archives.append((str(d["plan_id"]), str(d["_id"])))
            if d.get("decision_id") in wanted or d.get("new_decision_id") in wanted \
                    or d.get("plan_id") in plan_wide:
                found.correction_ids.append(str(d["_id"]))
                found.child_plans += [str(p) for p in d.get("child_plans_spawned") or []]

    async def erase(self, erasure: Document, reach: Reach, now: datetime) -> int:
        """Erase what `reach` names, in batches; the erasure's record written with the
        first. How many records' text was removed."""
        ids = reach.decision_ids
        batches = [ids[i:i + BATCH] for i in range(0, len(ids), BATCH)] or [[]]
        done = 0
        for n, batch in enumerate(batches):
            first, last = n == 0, n == len(batches) - 1

            async def write(s: AsyncClientSession, batch: Sequence[str] = batch,
                            first: bool = first, last: bool = last) -> int:
                if first:
                    await self._db[ERASURES].insert_one(erasure | {"status": "erasing"},
                                                        session=s)
                count = await self._decisions(batch, erasure, now, s)
                if last:
                    count += await self._copies(reach, erasure, now, s)
                await self._db[ERASURES].update_one(
                    {"_id": erasure["_id"]},
                    {"$inc": {"records_erased": count},
                     "$set": {"status": "erased" if last else "erasing"}}, session=s)
                return count

            done += await run_in_transaction(self._client, write)
        return done

    async def _decisions(self, batch: Sequence[str], erasure: Document, now: datetime,
                         s: AsyncClientSession) -> int:
        writes = []
        async for doc in self._db[DECISIONS].find({"_id": {"$in": list(batch)}}, session=s):
            update = erasure_update(doc, DECISION_TEXT)
            if update:
                writes.append(UpdateOne({"_id": doc["_id"]},
                                        {"$set": update | _stamp(erasure, now)}))
        if writes:
            await self._db[DECISIONS].bulk_write(writes, ordered=False, session=s)
        return len(writes)

    async def _copies(self, reach: Reach, erasure: Document, now: datetime,
                      s: AsyncClientSession) -> int:
        """The corrections, attempts and child plans that copied the erased text."""
        count = 0
        wanted = set(reach.decision_ids)
        async for doc in self._db[CORRECTIONS].find(
                {"_id": {"$in": [c for _, c in reach.archives]}}, session=s):
            update = erasure_update(doc, CORRECTION_TEXT) \
                if doc["_id"] in reach.correction_ids else {}
            kept = _not_copied(doc.get("archive_not_copied"), wanted)
            if kept is not None:
                update["archive_not_copied"] = kept
            if update:
                stamp = _stamp(erasure, now) if "erased.fields" in update else {}
                await self._db[CORRECTIONS].update_one(
                    {"_id": doc["_id"]}, {"$set": update | stamp}, session=s)
                count += 1
        if reach.correction_ids:
            await self._db[CORRECTION_ATTEMPTS].update_many(
                {"correction_id": {"$in": reach.correction_ids}},
                {"$set": {"guidance": ERASED}}, session=s)
        if reach.child_plans:
            await self._db[PLANS].update_many(
                {"_id": {"$in": reach.child_plans}, "guidance": {"$ne": None}},
                {"$set": {"guidance": ERASED}}, session=s)
        return count


def _not_copied(entries: Any, wanted: set[str]) -> list[Any] | None:
    """A correction's not-copied archive entries with the erased decisions' paths
    removed (None: nothing to change)."""
    if not isinstance(entries, list):
        return None
    changed = False
    out: list[Any] = []
    for e in entries:
        if isinstance(e, dict) and e.get("decision_id") in wanted \
                and e.get("artifact_path") != ERASED:
            out.append({**e, "artifact_path": ERASED, "skipped": str(e.get("reason") or ERASED)})
            changed = True
        else:
            out.append(e)
    return out if changed else None


def _stamp(erasure: Document, now: datetime) -> Document:
    return {"erased.erasure_id": erasure["_id"], "erased.at": now,
            "erased.by": erasure.get("by"), "erased.reason": erasure.get("reason")}
