"""The facts only some batches need, read only when they do: where decisions a
correction made stale resume, and the ancestors of plans that claim child plans."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from pymongo.asynchronous.collection import AsyncCollection

from contracts.recording.facts import PlanClaim, Resume
from store.database import Document, find_by_ids

MAX_PLAN_DEPTH = 64
"""How many generations of parent plans a claim's ancestor check reads at most."""


def chain(plan_id: str, parent: Mapping[str, str | None]) -> list[str]:
    """The plan and its known ancestors, ending at the first plan whose parent is unknown
    (it is then the last entry) or absent; a cycle in old data ends it too."""
    out = [plan_id]
    while (p := parent.get(out[-1])) is not None and p not in out:
        out.append(p)
    return out


async def claim_ancestors(plans_coll: AsyncCollection[Document], plans: set[str],
                          known: Mapping[str, PlanClaim]) -> dict[str, frozenset[str]]:
    """Each plan's ancestors by recorded parents: one read per generation, and only
    for plans that claim a child plan (rare)."""
    parent = {p: c.parent_plan_id for p, c in known.items()}
    for _ in range(MAX_PLAN_DEPTH):
        wanted = {q for p in plans for q in chain(p, parent) if q not in parent}
        if not wanted:
            break
        docs = await find_by_ids(plans_coll, wanted, {"parent_plan_id": 1})
        parent.update({w: None for w in wanted})
        parent.update({d["_id"]: d.get("parent_plan_id") for d in docs})
    return {p: frozenset(chain(p, parent)) - {p} for p in plans}


async def resumes(attempts_coll: AsyncCollection[Document], superseded_by: dict[str, str],
                  rolled: dict[str, str | None]
                  ) -> tuple[dict[str, Resume], dict[str, Resume]]:
    """Where to resume, for stale parents and rolled-back plans: the rare path, so
    the attempts that name the corrections are read only here."""
    if not superseded_by and not rolled:
        return {}, {}
    replacements = set(superseded_by.values())
    corrections = {c for c in rolled.values() if c is not None}
    # Two indexed reads, not one `$or`: SecantusDB reads every attempt for a filter with
    # a logical operator (ADR 0038).
    queries: list[Document] = []
    if replacements:
        queries.append({"new_decision_id": {"$in": list(replacements)}})
    if corrections:
        queries.append({"correction_id": {"$in": list(corrections)},
                        "new_decision_id": {"$type": "string"}})
    found = await asyncio.gather(*(attempts_coll.find(
        q, {"correction_id": 1, "new_decision_id": 1, "plan_id": 1}).to_list()
        for q in queries))
    attempts = sorted({a["_id"]: a for docs in found for a in docs}.values(),
                      key=lambda a: str(a["_id"]))
    by_new = {a["new_decision_id"]: a for a in attempts}
    by_correction = {a["correction_id"]: a for a in attempts}
    superseded = {}
    for parent, new in superseded_by.items():
        a = by_new.get(new, {})
        superseded[parent] = Resume(correction_id=a.get("correction_id"),
                                    replacement_decision_id=new, plan_id=a.get("plan_id"))
    rolled_back = {}
    for plan_id, correction in rolled.items():
        a = by_correction.get(correction, {}) if correction else {}
        rolled_back[plan_id] = Resume(correction_id=correction,
                                      replacement_decision_id=a.get("new_decision_id"),
                                      plan_id=a.get("plan_id"))
    return superseded, rolled_back
