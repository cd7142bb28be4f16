"""The decisions collection: reads for the rest of the system and the recorder's batch write.

A document is the Decision's fields at top level with `_id` = decision_id, plus
`content_hash` (what a redelivery is compared against). Trees are walked level by
level through the indexed parent link, so reading a subtree costs one round trip per
level and reads only the subtree, whatever the size of the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from contracts.decision import Decision
from contracts.recording import Candidate, StoredFacts
from store.database import DECISIONS, PLANS, Document

DUPLICATE_KEY = 11000


def to_document(decision: Decision, content_hash: str | None = None) -> Document:
    doc: Document = decision.model_dump(mode="json", exclude={"decision_id", "created_at"})
    doc["_id"] = decision.decision_id
    doc["created_at"] = decision.created_at
    if content_hash is not None:
        doc["content_hash"] = content_hash
    return doc


def from_document(doc: Document) -> Decision:
    fields = {k: v for k, v in doc.items() if k not in ("_id", "content_hash")}
    fields["decision_id"] = doc["_id"]
    return Decision.model_validate(fields)


@dataclass
class InsertResult:
    """What a batch insert did: written decisions (with sequence numbers), and those a
    concurrent writer beat to a unique key (the same decision_id, or its plan's root),
    which the caller plans again against what is now stored."""

    written: list[Decision] = field(default_factory=list)
    raced: list[Candidate] = field(default_factory=list)


class DecisionRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]

    # --- reads -----------------------------------------------------------------

    async def get(self, decision_id: str) -> Decision | None:
        doc = await self._decisions.find_one({"_id": decision_id})
        return from_document(doc) if doc else None

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]:
        ids = list(set(decision_ids))
        if not ids:
            return {}
        return {d["_id"]: from_document(d)
                async for d in self._decisions.find({"_id": {"$in": ids}})}

    async def in_sequence(self, plan_id: str) -> list[Decision]:
        """Every decision of the plan, superseded ones too, in sequence order."""
        cursor = self._decisions.find({"plan_id": plan_id}).sort("sequence_number", 1)
        return [from_document(d) async for d in cursor]

    async def full_tree(self, plan_id: str) -> list[Decision]:
        return await self.in_sequence(plan_id)

    async def current_tree(self, plan_id: str) -> list[Decision]:
        """The current tree: decisions whose superseded_by is null, in sequence order."""
        cursor = self._decisions.find({"plan_id": plan_id, "superseded_by": None})
        found = [from_document(d) async for d in cursor]
        return sorted(found, key=lambda d: d.sequence_number or 0)

    async def children(self, decision_id: str, *, current_only: bool = True) -> list[Decision]:
        query: dict[str, Any] = {"parent_decision_id": decision_id}
        if current_only:
            query["superseded_by"] = None
        found = [from_document(d) async for d in self._decisions.find(query)]
        return sorted(found, key=lambda d: d.sequence_number or 0)

    async def subtree(self, decision_id: str, *, current_only: bool = True) -> list[Decision]:
        """The decision and its descendants by parent link, breadth first."""
        root = await self.get(decision_id)
        if root is None or (current_only and root.superseded_by is not None):
            return []
        out = [root]
        frontier = [root.decision_id]
        while frontier:
            query: dict[str, Any] = {"parent_decision_id": {"$in": frontier}}
            if current_only:
                query["superseded_by"] = None
            level = sorted([from_document(d) async for d in self._decisions.find(query)],
                           key=lambda d: d.sequence_number or 0)
            out.extend(level)
            frontier = [d.decision_id for d in level]
        return out

    # --- the recorder's batch --------------------------------------------------

    async def facts_for(self, candidates: Sequence[Candidate]) -> StoredFacts:
        """The three lookups `plan_batch` needs, each one indexed query by _id."""
        ids = {c.decision.decision_id for c in candidates}
        parents = {c.decision.parent_decision_id for c in candidates} - ids - {None}
        plans = {c.decision.plan_id for c in candidates}
        existing = {d["_id"]: d.get("content_hash", "")
                    async for d in self._decisions.find({"_id": {"$in": list(ids)}},
                                                        {"content_hash": 1})}
        plan_of = {d["_id"]: d["plan_id"]
                   async for d in self._decisions.find({"_id": {"$in": list(parents)}},
                                                       {"plan_id": 1})} if parents else {}
        # Served by the partial unique index one_root_per_plan.
        roots = {d["plan_id"]: d["_id"]
                 async for d in self._decisions.find(
                     {"plan_id": {"$in": list(plans)}, "decision_type": "prompt_definition"},
                     {"plan_id": 1})}
        return StoredFacts(existing_hashes=existing, plan_of=plan_of, root_of_plan=roots)

    async def _reserve_sequences(self, plan_id: str, count: int, now: datetime) -> int:
        """Atomically take `count` sequence numbers of a plan; returns the first.

        A number taken by a writer that dies before inserting is never reused: the
        sequence stays monotonic and is dense whenever nothing failed."""
        before = await self._plans.find_one_and_update(
            {"_id": plan_id},
            {"$inc": {"next_sequence": count},
             "$setOnInsert": {"created_at": now, "status": "active"}},
            upsert=True, return_document=ReturnDocument.BEFORE,
            projection={"next_sequence": 1},
        )
        return int(before.get("next_sequence", 0)) if before else 0

    async def insert_recorded(self, accepted: Sequence[Candidate], now: datetime) -> InsertResult:
        """Assign sequence numbers per plan in the given order and insert with one bulk write."""
        result = InsertResult()
        if not accepted:
            return result
        per_plan: dict[str, list[Candidate]] = {}
        for c in accepted:
            per_plan.setdefault(c.decision.plan_id, []).append(c)
        numbered: list[tuple[Candidate, Decision]] = []
        for plan_id, group in per_plan.items():
            start = await self._reserve_sequences(plan_id, len(group), now)
            numbered.extend((c, c.decision.model_copy(update={"sequence_number": start + i}))
                            for i, c in enumerate(group))
        docs = [to_document(d, c.content_hash) for c, d in numbered]
        failed: set[int] = set()
        try:
            await self._decisions.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            for err in exc.details.get("writeErrors", []):
                if err.get("code") != DUPLICATE_KEY:
                    raise
                failed.add(err["index"])
        for i, (c, d) in enumerate(numbered):
            if i in failed:
                result.raced.append(c)
            else:
                result.written.append(d)
        for d in result.written:
            if d.is_root:
                await self._plans.update_one(
                    {"_id": d.plan_id},
                    {"$set": {"root_decision_id": d.decision_id, "project": d.project,
                              "action_template": d.action_template}})
        return result
