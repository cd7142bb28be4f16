"""Impact analysis against the store: `contracts.impact.walk.ImpactWalk`, fed one BFS level
per round.

Each level costs one children query per 50 frontier decisions by the indexed parent
link (returning the children's own views, so the next level rarely needs another read),
one `_id` lookup for declared dependents not yet seen, and one query for the roots of
newly reached child plans (served by the plan_id prefix of plan_sequence_unique). Only
the fields the BFS uses are projected. Nothing outside the affected subtree is read, so a
10-decision subtree of a 100,000-decision plan costs the same as in a small plan.

Nor is anything read past the limit: children are streamed in batches of READ_BATCH and
counted as they come, and once more of them are new than the walk has room for, the walk
stops over its limit. A decision with a million children costs the limit plus a few
batches, in memory and in reads, for a revert, a dry run or the console's walk alike.
Only what the next level needs is kept between levels.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.artifacts import STORED, ArtifactRef
from contracts.decisions.types import DecisionType
from contracts.impact.summary import CorrectionImpact, summarize
from contracts.impact.views import DecisionView, PlanLink
from contracts.impact.walk import ImpactWalk
from store.database import DECISIONS, PLANS, Document, find_by_ids, id_chunks
from store.impact_children import VIEW_FIELDS, children_capped, children_within
from store.translate import translate_errors


def _current(doc: Document, target: str) -> bool:
    """The walk visits it (the target even when superseded: contracts.impact.walk)."""
    return doc.get("superseded_by") is None or doc["_id"] == target


def _order(doc: Document) -> tuple[bool, int, str]:
    # The same order as contracts.impact.views.child_order: sequence, unnumbered last, then ID.
    seq = doc.get("sequence_number")
    return (seq is None, seq or 0, str(doc["_id"]))


def _view(doc: Document, children: Sequence[Document]) -> DecisionView:
    return DecisionView(
        decision_id=doc["_id"],
        decision_type=DecisionType(doc["decision_type"]),
        children=tuple(c["_id"] for c in sorted(children, key=_order)),
        dependents=tuple(doc.get("downstream_decision_ids") or ()),
        child_plans=tuple(doc.get("downstream_plan_ids") or ()),
        # STORED: a path recorded before safe_artifact_path still loads (the archive skips it).
        artifacts=tuple(ArtifactRef.model_validate(a, context={STORED: True})
                        for a in doc.get("artifacts_produced") or ()),
        parent_decision_id=doc.get("parent_decision_id"),
        created_at=doc.get("created_at"),
        superseded=doc.get("superseded_by") is not None,
        plan_id=doc.get("plan_id"),
        sequence_number=doc.get("sequence_number"),
    )


def _began(roots: Sequence[Document]) -> datetime | None:
    times = [r["created_at"] for r in roots if r.get("created_at") is not None]
    return min(times) if times else None


def _grouped(docs: Iterable[Document], key: str) -> dict[str, list[Document]]:
    """The documents by the value of `key`, each group in the order read."""
    out: dict[str, list[Document]] = defaultdict(list)
    for d in docs:
        out[d[key]].append(d)
    return out


@translate_errors
class ImpactReader:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]

    async def sequence_mark(self, plan_id: str) -> int:
        doc = await self._plans.find_one({"_id": plan_id}, {"next_sequence": 1})
        return int(doc.get("next_sequence", 0)) if doc else 0

    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        """The finished walk; with `limit`, it stops once more decisions than that are found."""
        walk = ImpactWalk(target_decision_id, limit)
        seen: dict[str, Document] = {}
        while not walk.done:
            level = await self._level(walk, seen)
            if level is None:
                walk.over_limit()
                break
            views, roots, links, overflowing = level
            walk.expand(views, roots, links)
            if any(walk.is_affected(p) for p in overflowing):
                walk.over_limit()
            # Only the next level's own views are worth keeping.
            wanted = set(walk.decision_ids_wanted)
            seen = {i: d for i, d in seen.items() if i in wanted}
        return walk

    async def _level(self, walk: ImpactWalk, seen: dict[str, Document]
                     ) -> tuple[dict[str, DecisionView], dict[str, list[str]],
                                dict[str, PlanLink], set[str]] | None:
        """One round trip for the walk's next level: the views of its frontier's decisions
        (`seen` holds the documents read as children last level), the current roots of its
        plans and their recorded parents; and the frontier decisions whose children were
        not all read (`overflowing`: over the limit if the walk affects one). None: the
        walk is over its limit."""
        wanted = walk.decision_ids_wanted
        missing = [i for i in wanted if i not in seen]
        certain = [i for i in wanted if i in seen and walk.always_followed(i)
                   and _current(seen[i], walk.target_decision_id)]
        room = walk.room
        budget = None if room is None else room - len(certain)
        found, kids, roots, plan_docs = await asyncio.gather(
            find_by_ids(self._decisions, missing, VIEW_FIELDS),
            children_within(self._decisions, certain, walk, budget),
            self._current_where("plan_id", walk.plan_ids_wanted, roots_only=True),
            find_by_ids(self._plans, walk.plan_ids_wanted, {"parent_plan_id": 1}))
        if kids is None:
            return None
        for d in (*found, *roots):
            seen[d["_id"]] = d
        others = [i for i in wanted if i in seen and i not in certain]
        more, overflowing = await children_capped(self._decisions, others, walk, room)
        for d in (*kids, *more):
            seen[d["_id"]] = d
        by_parent = _grouped((*kids, *more), "parent_decision_id")
        plan_roots = _grouped(roots, "plan_id")
        parents = {d["_id"]: d.get("parent_plan_id") for d in plan_docs}
        return (
            {i: _view(seen[i], by_parent.get(i, ())) for i in wanted if i in seen},
            {p: [r["_id"] for r in sorted(rs, key=_order)] for p, rs in plan_roots.items()},
            {p: PlanLink(parents.get(p), _began(plan_roots.get(p, ())))
             for p in walk.plan_ids_wanted},
            overflowing)

    async def impact(self, target_decision_id: str, limit: int | None = None
                     ) -> CorrectionImpact:
        """The impact of correcting the target; TargetNotFound if it does not exist.
        Past `limit` decisions it stops, with `exceeds_limit` set."""
        return summarize(await self.walk(target_decision_id, limit))

    async def _current_where(self, field: str, values: Iterable[str], *,
                             roots_only: bool = False) -> list[Document]:
        query_extra: dict[str, Any] = {"superseded_by": None}
        if roots_only:
            query_extra["parent_decision_id"] = None
        chunks = id_chunks(values)
        results = await asyncio.gather(*[
            self._decisions.find({field: {"$in": c}, **query_extra}, VIEW_FIELDS).to_list()
            for c in chunks])
        return [d for docs in results for d in docs]
