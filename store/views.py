"""Read-only queries for the operator's views (the web console, `agents` reads): recent
plans, one level of a plan's tree, and per-plan counts.

Each answers a page, never a whole ledger: a tree is read one level at a time (the
children of one node, by the `children` index, paged by sequence number), so a
10,000-decision plan costs what the operator opens, not what it holds. Counts are
aggregations over the handful of plans on screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections import CORRECTION_LIFECYCLE, CorrectionStatus
from contracts.decision import Decision, DecisionType
from store.database import (
    CORRECTIONS,
    DECISIONS,
    ID_CHUNK,
    INVARIANT_VIOLATIONS,
    PLANS,
    Document,
)
from store.decisions import from_document

__all__ = ["PlanCounts", "TreeViews"]

IN_FLIGHT = [s.value for s in CorrectionStatus if not CORRECTION_LIFECYCLE.is_terminal(s)]
MAX_PAGE = 500
"""Largest page any view returns: a request cannot make the server read a whole plan."""


@dataclass(frozen=True, slots=True)
class PlanCounts:
    decisions: int = 0
    current: int = 0
    open_corrections: int = 0
    open_violations: int = 0


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[i:i + ID_CHUNK] for i in range(0, len(ids), ID_CHUNK)]


class TreeViews:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]
        self._corrections = db[CORRECTIONS]
        self._violations = db[INVARIANT_VIOLATIONS]

    async def recent_roots(self, limit: int, before: str | None = None) -> list[Decision]:
        """Plan roots (prompt_definition, not a correction), newest first: decision IDs
        are ULIDs, so their order is their creation order."""
        query: dict[str, Any] = {"decision_type": DecisionType.PROMPT_DEFINITION.value,
                                 "is_correction": False}
        if before is not None:
            query["_id"] = {"$lt": before}
        cursor = self._decisions.find(query, {"actor_reasoning": 0}
                                      ).sort("_id", -1).limit(min(limit, MAX_PAGE))
        return [from_document(d) async for d in cursor]

    async def level(self, plan_id: str, parent: str | None, *, after: int | None,
                    limit: int, superseded: bool) -> list[Decision]:
        """One level of the plan's tree in sequence order: the children of `parent`, or
        the plan's roots (parent None: the root and a reverted root's replacement)."""
        query: dict[str, Any] = {"plan_id": plan_id, "parent_decision_id": parent}
        if not superseded:
            query["superseded_by"] = None
        if after is not None:
            query["sequence_number"] = {"$gt": after}
        cursor = self._decisions.find(query, {"actor_reasoning": 0}
                                      ).sort("sequence_number", 1).limit(min(limit, MAX_PAGE))
        return [from_document(d) async for d in cursor]

    async def child_counts(self, parents: Iterable[str], *, superseded: bool) -> dict[str, int]:
        """parent decision_id -> how many children it has (current ones unless
        `superseded`), for the nodes of one page."""
        out: dict[str, int] = {}
        for chunk in _chunks(list(dict.fromkeys(parents))):
            match: dict[str, Any] = {"parent_decision_id": {"$in": chunk}}
            if not superseded:
                match["superseded_by"] = None
            async for d in await self._decisions.aggregate([
                    {"$match": match},
                    {"$group": {"_id": "$parent_decision_id", "n": {"$sum": 1}}}]):
                out[str(d["_id"])] = int(d["n"])
        return out

    async def counts(self, plan_ids: Iterable[str]) -> dict[str, PlanCounts]:
        """plan_id -> decisions (all and current), corrections not ended, open violations."""
        ids = list(dict.fromkeys(plan_ids))
        found: dict[str, dict[str, int]] = {p: {} for p in ids}
        for chunk in _chunks(ids):
            async for d in await self._decisions.aggregate([
                    {"$match": {"plan_id": {"$in": chunk}}},
                    {"$group": {"_id": "$plan_id", "n": {"$sum": 1}, "current": {"$sum": {
                        "$cond": [{"$eq": [{"$ifNull": ["$superseded_by", None]}, None]},
                                  1, 0]}}}}]):
                found[d["_id"]] |= {"decisions": int(d["n"]), "current": int(d["current"])}
            async for d in await self._corrections.aggregate([
                    {"$match": {"plan_id": {"$in": chunk}, "status": {"$in": IN_FLIGHT}}},
                    {"$group": {"_id": "$plan_id", "n": {"$sum": 1}}}]):
                found[d["_id"]]["open_corrections"] = int(d["n"])
            async for d in await self._violations.aggregate([
                    {"$match": {"plan_id": {"$in": chunk}, "resolved_at": None}},
                    {"$group": {"_id": "$plan_id", "n": {"$sum": 1}}}]):
                found[d["_id"]]["open_violations"] = int(d["n"])
        return {p: PlanCounts(**c) for p, c in found.items()}

    async def plan_exists(self, plan_id: str) -> bool:
        return (await self._plans.find_one({"_id": plan_id}, {"_id": 1}) is not None
                or await self._decisions.find_one({"plan_id": plan_id}, {"_id": 1})
                is not None)
