"""The impact walk's children reads (store.impact): streamed and counted as they come, so
a level wider than the walk's limit costs the limit plus a few batches, never the level."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from contracts.impact.walk import ImpactWalk
from store.database import Document, id_chunks

READ_BATCH = 500
"""Documents per round trip of a children cursor: what the walk may read past its limit
is a few of these."""
READERS = 8
"""Children cursors read at once (each over one chunk of parents)."""
VIEW_FIELDS = {
    "plan_id": 1, "decision_type": 1, "parent_decision_id": 1, "sequence_number": 1,
    "downstream_decision_ids": 1, "downstream_plan_ids": 1, "artifacts_produced": 1,
    "created_at": 1, "superseded_by": 1,
}
"""What the walk reads of a decision."""


async def children_within(decisions: AsyncCollection[Document], parents: Sequence[str],
                          walk: ImpactWalk, budget: int | None) -> list[Document] | None:
    """The current children of `parents` (frontier decisions the walk always follows, so
    each new child is an affected decision); None as soon as more than `budget` of them
    are new. Streamed: at most READERS cursors at once, each holding a batch."""
    if budget is not None and budget < 0:
        return []  # the frontier alone is over the limit: `expand` stops there
    out: list[Document] = []
    new = 0
    over = False

    async def read(chunk: list[str]) -> None:
        nonlocal new, over
        query = {"parent_decision_id": {"$in": chunk}, "superseded_by": None}
        async with decisions.find(query, VIEW_FIELDS, batch_size=READ_BATCH) as cursor:
            async for d in cursor:
                if over:
                    return
                out.append(d)
                if budget is not None and walk.fresh(d["_id"]):
                    new += 1
                    over = new > budget
                    if over:
                        return

    chunks = id_chunks(parents)
    for i in range(0, len(chunks), READERS):
        await asyncio.gather(*(read(c) for c in chunks[i:i + READERS]))
        if over:
            return None
    return out


async def children_capped(decisions: AsyncCollection[Document], parents: Sequence[str],
                          walk: ImpactWalk, room: int | None
                          ) -> tuple[list[Document], set[str]]:
    """The current children of frontier decisions the walk may or may not visit (declared
    dependents, the target): at most `room` + 1 new ones of each; the parents whose
    children were cut short come apart (only if the walk visits one is it over its
    limit)."""
    if not parents:
        return [], set()
    out: list[Document] = []
    overflowing: set[str] = set()
    if room is None:
        for chunk in id_chunks(parents):
            query: dict[str, Any] = {"parent_decision_id": {"$in": chunk},
                                     "superseded_by": None}
            out += await decisions.find(query, VIEW_FIELDS).to_list()
        return out, overflowing
    for parent in parents:
        new = 0
        query = {"parent_decision_id": parent, "superseded_by": None}
        async with decisions.find(query, VIEW_FIELDS, batch_size=READ_BATCH) as cursor:
            async for d in cursor:
                out.append(d)
                new += walk.fresh(d["_id"])
                if new > room:
                    overflowing.add(parent)
                    break
    return out, overflowing
