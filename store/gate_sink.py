"""Where the recorder's gate records what it decided, inside the batch's transaction: the
seam the approvals work plugs into (`GateSink`), and its first implementation.

`HoldSink` writes each held decision's hold (`decision_holds`, `_id` = decision_id) and
each violation the gate found (`invariant_violations`) with its INVARIANT_VIOLATED event
and its invariant_enforced decision in the outbox, all in the transaction that records
the batch: a decision is never recorded without its hold, and a plan an error violation
blocks is blocked from the moment the batch commits. Every write is an insert-if-absent
keyed by a derived ID, so a batch written again (after a crash) adds nothing; the
outbox rows are added only with the violation that is new, and only a new violation is
linked into its plan's record chain (as store.violations links a reported one), after
the batch's own decisions, in the same transaction.

A hold awaiting approval opens its approval (store.approvals) in the same transaction,
expiring `approval_ttl` later; the plans' pending approvals are the requested ones (the
phase rule reads them with each batch).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.approvals import DEFAULT_TTL
from contracts.invariants.holds import Hold
from contracts.invariants.outcomes import GateEffects
from contracts.trust.chain import VIOLATION_REPORT
from store.approvals import ApprovalRepository, open_approvals
from store.database import DECISION_HOLDS, INVARIANT_VIOLATIONS, PLANS, Document
from store.outbox import OutboxRepository
from store.sequences import PlanChains
from store.violations import VIOLATED_VERSION, chain_link, violation_document


class GateSink(Protocol):
    """Records a gate's effects in the recorder's transaction; says which decisions of
    which plans await a person's approval (read with each batch: the phase rule)."""

    async def record(self, effects: GateEffects, now: datetime,
                     session: AsyncClientSession) -> None: ...

    async def pending_approvals(self, plan_ids: Iterable[str]
                                ) -> dict[str, tuple[str, ...]]: ...


def hold_document(h: Hold) -> Document:
    doc: Document = h.model_dump(mode="python", exclude={"decision_id"})
    doc["_id"] = h.decision_id
    return doc


def _without_id(doc: Document) -> Document:
    """An upsert takes its _id from the filter."""
    return {k: v for k, v in doc.items() if k != "_id"}


class HoldSink:
    def __init__(self, db: AsyncDatabase[Document], approval_ttl: timedelta = DEFAULT_TTL
                 ) -> None:
        self._db = db
        self.approval_ttl = approval_ttl
        self._approvals = ApprovalRepository(db)
        self._violations = db[INVARIANT_VIOLATIONS]
        self._plans = db[PLANS]
        self._holds = db[DECISION_HOLDS]
        self._outbox = OutboxRepository(db)

    async def record(self, effects: GateEffects, now: datetime,
                     session: AsyncClientSession) -> None:
        chains = PlanChains(self._plans, session, now)
        for f in effects.found:
            v = f.violation
            doc = violation_document(v)
            res = await self._violations.update_one(
                {"_id": v.violation_id}, {"$setOnInsert": _without_id(doc)},
                upsert=True, session=session)
            if res.upserted_id is not None:
                link = await chain_link(chains, v.plan_id, v.violation_id,
                                        VIOLATION_REPORT, doc)
                await self._violations.update_one({"_id": v.violation_id},
                                                  {"$set": {"chain": [link]}}, session=session)
                await self._outbox.add(v.violation_id, VIOLATED_VERSION, f.messages, now,
                                       session)
        await chains.save()
        for h in effects.holds:
            await self._holds.update_one(
                {"_id": h.decision_id}, {"$setOnInsert": _without_id(hold_document(h))},
                upsert=True, session=session)
        await open_approvals(self._db, effects.holds, now, self.approval_ttl, session)

    async def pending_approvals(self, plan_ids: Iterable[str]
                                ) -> dict[str, tuple[str, ...]]:
        return await self._approvals.pending(plan_ids)
