"""Read-only queries for the operator's views (the web console, `agents` reads): one
level of a plan's tree, and per-plan counts (the lookups: store/lookups.py).

Each answers a page, never a whole ledger: a tree is read one level at a time (the
children of one node, by the `children` index, paged by sequence number), so a
10,000-decision plan costs what the operator opens, not what it holds. Counts are
aggregations over the handful of plans on screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contracts.corrections.states import CORRECTION_LIFECYCLE, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.shared.counts import PlanCounts
from store.database import id_chunks
from store.decisions import ROOT_QUERY, from_document
from store.lookups import MAX_PAGE, Lookups
from store.translate import translate_errors

__all__ = ["PlanCounts", "TreeViews"]

IN_FLIGHT = [s.value for s in CorrectionStatus if not CORRECTION_LIFECYCLE.is_terminal(s)]


@translate_errors
class TreeViews(Lookups):
    """The tree views, and the lookups (store/lookups.py) the same front ends ask."""

    async def level(self, plan_id: str, parent: str | None, *, after: int | None,
                    limit: int, superseded: bool) -> list[Decision]:
        """One level of the plan's tree in sequence order: the children of `parent`, or
        the plan's roots (parent None: the root, and a reverted root's replacements).

        Neither query names the plan: a filter on plan_id makes the server walk the
        plan's whole `plan_sequence_unique` range (0.5 s for 10,000 decisions on
        SecantusDB), while the `children` index and the one-root index answer at once.
        Children share their parent's plan (a child plan's root has no parent), and the
        plan is checked here all the same."""
        if parent is None:
            return await self._roots(plan_id, superseded)
        query: dict[str, Any] = {"parent_decision_id": parent}
        if not superseded:
            query["superseded_by"] = None
        if after is not None:
            query["sequence_number"] = {"$gt": after}
        cursor = self._decisions.find(query, {"actor_reasoning": 0}
                                      ).sort("sequence_number", 1).limit(min(limit, MAX_PAGE))
        return [d for d in [from_document(doc) async for doc in cursor] if d.plan_id == plan_id]

    async def _roots(self, plan_id: str, superseded: bool) -> list[Decision]:
        """The root by the one-root index, then its replacements by `superseded_by` (a
        revert of the root records a corrected root, itself revertible)."""
        doc = await self._decisions.find_one(
            {"plan_id": plan_id, **ROOT_QUERY}, {"actor_reasoning": 0})
        chain: list[Decision] = []
        seen: set[str] = set()
        while doc is not None and doc["_id"] not in seen and len(chain) < MAX_PAGE:
            d = from_document(doc)
            seen.add(d.decision_id)
            if d.parent_decision_id is None and d.plan_id == plan_id:
                chain.append(d)
            if d.superseded_by is None:
                break
            doc = await self._decisions.find_one({"_id": d.superseded_by},
                                                 {"actor_reasoning": 0})
        return chain if superseded else [d for d in chain if d.superseded_by is None]

    async def child_counts(self, parents: Iterable[str], *, superseded: bool) -> dict[str, int]:
        """parent decision_id -> how many children it has (current ones unless
        `superseded`), for the nodes of one page."""
        out: dict[str, int] = {}
        for chunk in id_chunks(parents):
            match: dict[str, Any] = {"parent_decision_id": {"$in": chunk}}
            if not superseded:
                match["superseded_by"] = None
            async for d in await self._decisions.aggregate([
                    {"$match": match},
                    {"$group": {"_id": "$parent_decision_id", "n": {"$sum": 1}}}]):
                out[str(d["_id"])] = int(d["n"])
        return out

    async def counts(self, plan_ids: Iterable[str]) -> dict[str, PlanCounts]:
        """plan_id -> decisions, current ones, corrections not ended, open violations.

        The plan's sequence counter is its decision count (numbers are reserved in the
        insert's transaction, dense and never reused). Current ones are counted on the
        decisions themselves, and only for a plan a correction may have touched: one
        with a correction of its own, or one rolled back by a revert in an ancestor. A
        correction's `superseded_ids` cannot be subtracted instead: it also lists the
        decisions of the child plans the revert rolled back, which are another plan's.
        A plan no correction touched has every decision current. A plan without a
        counter document is counted on the decisions too."""
        ids = list(dict.fromkeys(plan_ids))
        found: dict[str, dict[str, int]] = {p: {} for p in ids}
        for chunk in id_chunks(ids):
            touched = await self._count_decisions(chunk, found)
            touched |= await self._count_corrections(chunk, found)
            await self._count_violations(chunk, found)
            for p in chunk:
                if "decisions" not in found[p]:
                    found[p]["decisions"] = await self._decisions.count_documents(
                        {"plan_id": p})
                found[p]["current"] = found[p]["decisions"] if p not in touched else \
                    await self._decisions.count_documents({"plan_id": p, "superseded_by": None})
        return {p: PlanCounts(**c) for p, c in found.items()}

    async def _count_decisions(self, chunk: list[str], found: dict[str, dict[str, int]]
                               ) -> set[str]:
        """Each plan's sequence counter, where it has one: its decision count; the plans
        rolled back."""
        rolled: set[str] = set()
        async for d in self._plans.find({"_id": {"$in": chunk}},
                                        {"next_sequence": 1, "status": 1}):
            if isinstance(d.get("next_sequence"), int):
                found[d["_id"]]["decisions"] = d["next_sequence"]
            if d.get("status") == PlanStatus.ROLLED_BACK.value:
                rolled.add(d["_id"])
        return rolled

    async def _count_corrections(self, chunk: list[str], found: dict[str, dict[str, int]]
                                 ) -> set[str]:
        """The corrections not ended, into `found`; the plans that have any."""
        touched: set[str] = set()
        async for d in self._corrections.find(
                {"plan_id": {"$in": chunk}}, {"plan_id": 1, "status": 1}):
            touched.add(d["plan_id"])
            if d.get("status") in IN_FLIGHT:
                found[d["plan_id"]]["open_corrections"] = \
                    found[d["plan_id"]].get("open_corrections", 0) + 1
        return touched

    async def _count_violations(self, chunk: list[str], found: dict[str, dict[str, int]]
                                ) -> None:
        async for d in await self._violations.aggregate([
                {"$match": {"plan_id": {"$in": chunk}, "resolved_at": None}},
                {"$group": {"_id": "$plan_id", "n": {"$sum": 1}}}]):
            found[d["_id"]]["open_violations"] = int(d["n"])

    async def plan_exists(self, plan_id: str) -> bool:
        return (await self._plans.find_one({"_id": plan_id}, {"_id": 1}) is not None
                or await self._decisions.find_one({"plan_id": plan_id}, {"_id": 1})
                is not None)
