"""A plan's sequence counter (on its plans document): numbers taken inside the writing
transaction, so they are never reused and stay dense even if a writer dies; and since a
revert writes this very document (bumping the plan's correction epoch), a recorder
batch and a revert of one plan conflict at the database."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection

from contracts.decisions.plans import PlanStatus
from store.database import Document


async def reserve_sequences(plans: AsyncCollection[Document], plan_id: str, count: int,
                            now: datetime, session: AsyncClientSession, *,
                            bump_epoch: bool = False) -> int:
    """Take `count` sequence numbers of a plan; the first one. For the correction
    transaction: a revert passes `bump_epoch`, and every recorder batch that read the plan
    before the revert committed then plans again (store.batch_facts)."""
    before = await reserve(plans, plan_id, count, now, session, bump_epoch=bump_epoch)
    return int(before.get("next_sequence", 0)) if before else 0


async def reserve(plans: AsyncCollection[Document], plan_id: str, count: int, now: datetime,
                  session: AsyncClientSession, *, bump_epoch: bool = False
                  ) -> Document | None:
    """Take `count` sequence numbers of a plan; returns the counter document as it was
    (None: new plan)."""
    inc = {"next_sequence": count, **({"epoch": 1} if bump_epoch else {})}
    before: Document | None = await plans.find_one_and_update(
        {"_id": plan_id},
        {"$inc": inc, "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value}},
        upsert=True, return_document=ReturnDocument.BEFORE,
        projection={"next_sequence": 1, "epoch": 1, "status": 1, "owner": 1}, session=session,
    )
    return before


async def reserve_many(plans: AsyncCollection[Document], counts: Mapping[str, int],
                       now: datetime, session: AsyncClientSession
                       ) -> dict[str, Document | None]:
    """`reserve` for several plans in two round trips instead of one per plan: read
    the counters, then bump them all in one bulk write. Safe inside the transaction:
    a writer that changed a counter after this transaction's snapshot makes the bump
    a write conflict (the transaction is retried), so the values read are the ones
    bumped."""
    if len(counts) == 1:
        [(plan_id, count)] = counts.items()
        return {plan_id: await reserve(plans, plan_id, count, now, session)}
    before = {d["_id"]: d async for d in plans.find(
        {"_id": {"$in": list(counts)}}, {"next_sequence": 1, "epoch": 1, "status": 1, "owner": 1},
        session=session)}
    await plans.bulk_write(
        [UpdateOne({"_id": plan_id},
                   {"$inc": {"next_sequence": count},
                    "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value}},
                   upsert=True) for plan_id, count in counts.items()],
        ordered=True, session=session)
    return {plan_id: before.get(plan_id) for plan_id in counts}
