"""The recorder's batch write: number the accepted decisions per plan and insert them,
with their plans' claim records, in one transaction that aborts if a correction or a
concurrent claim changed what the batch was triaged against."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanStatus
from contracts.recording.message import Candidate
from store.database import DECISIONS, PLANS, Document
from store.decisions import to_document
from store.sequences import reserve_many


class StaleFacts(Exception):
    """A correction changed a plan after the batch's facts were read: plan again."""


def _check_unchanged(plan_id: str, counter: Document | None, epoch: int) -> None:
    """Raise StaleFacts (aborting the insert's transaction) if a revert moved the plan's
    epoch since the facts were read, or rolled it back."""
    if counter is None:
        return
    if int(counter.get("epoch", 0)) != epoch \
            or counter.get("status") == PlanStatus.ROLLED_BACK.value:
        raise StaleFacts(f"plan {plan_id} was corrected after its facts were read")


async def insert_batch(db: AsyncDatabase[Document], accepted: Sequence[Candidate],
                       now: datetime, session: AsyncClientSession,
                       epochs: Mapping[str, int] | None = None) -> list[Decision]:
    """The transaction's body. Runs again from the top if the transaction is retried, so
    it keeps no state."""
    per_plan: dict[str, list[Candidate]] = {}
    for c in accepted:
        per_plan.setdefault(c.decision.plan_id, []).append(c)
    numbered: list[tuple[Candidate, Decision]] = []
    counters = await reserve_many(
        db[PLANS], {plan_id: len(group) for plan_id, group in per_plan.items()}, now, session)
    for plan_id, group in per_plan.items():
        before = counters[plan_id]
        if epochs is not None:
            _check_unchanged(plan_id, before, epochs.get(plan_id, 0))
        start = int(before.get("next_sequence", 0)) if before else 0
        numbered.extend((c, c.decision.model_copy(update={"sequence_number": start + i}))
                        for i, c in enumerate(group))
    await db[DECISIONS].insert_many(
        [to_document(d, c.content_hash, c.stream_sequence) for c, d in numbered],
        session=session)
    written = [d for _, d in numbered]
    for d in written:
        if d.is_root:
            await _record_root(db, d, session)
        for p in d.downstream_plan_ids:
            await _record_claim(db, d, p, now, session)
    return written


async def _record_root(db: AsyncDatabase[Document], d: Decision,
                       session: AsyncClientSession) -> None:
    """The root on its plan's record, conditional on the claim the facts saw: a claim
    committed since (by a decision created after this root, or from another plan
    than the root names) makes the batch plan again."""
    cond: list[dict[str, Any]] = [
        {"$or": [{"spawned_at": None}, {"spawned_at": {"$lte": d.created_at}}]}]
    if d.parent_plan_id is not None:
        cond.append({"$or": [{"parent_plan_id": None},
                             {"parent_plan_id": d.parent_plan_id}]})
    res = await db[PLANS].update_one(
        {"_id": d.plan_id, "$and": cond},
        {"$set": {"root_decision_id": d.decision_id, "project": d.project,
                  "action_template": d.action_template, "root_created_at": d.created_at,
                  "named_parent_plan_id": d.parent_plan_id}}, session=session)
    if res.matched_count != 1:
        raise StaleFacts(f"plan {d.plan_id} was claimed since its facts were read")


async def _record_claim(db: AsyncDatabase[Document], d: Decision, plan_id: str, now: datetime,
                        session: AsyncClientSession) -> None:
    """`d` spawned `plan_id`: its parent on the child's record. The filter is the
    claim rules again, so a claim or root committed since the facts were read fails
    the match, the upsert then collides with the existing _id (DuplicateKeyError)
    and the batch plans again: two claims of one plan can never both stand."""
    await db[PLANS].update_one(
        {"_id": plan_id, "$and": [
            {"$or": [{"parent_plan_id": None},
                     {"parent_plan_id": d.plan_id,
                      "spawned_from_decision_id": d.decision_id}]},
            {"$or": [{"named_parent_plan_id": None}, {"named_parent_plan_id": d.plan_id}]},
            {"$or": [{"root_created_at": None},
                     {"root_created_at": {"$gte": d.created_at}}]}]},
        {"$set": {"parent_plan_id": d.plan_id, "spawned_from_decision_id": d.decision_id,
                  "spawned_at": d.created_at},
         "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value,
                          "next_sequence": 0}},
        upsert=True, session=session)
