"""Approvals (`approvals`, `_id` = decision_id) and what became of each verdict
(`approval_verdicts`, `_id` = request_id).

An approval is opened in the transaction that holds its decision (`open_approvals`,
called by the recorder's GateSink and by the judge's settle), with its `requested`
event in the outbox. A verdict or the expiry moves it on in one transaction with the
hold, the resolution of the decision's open error violations (a person looked at it:
granted or denied; an expired approval leaves them open, so the plan stays blocked until
someone does) and the events, conditional on the approval still being `requested`: two
verdicts, or a verdict racing the expiry, cannot both win.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants import approvals as rules
from contracts.invariants.approval_wire import ApprovalEvent, VerdictOutcome
from contracts.invariants.approvals import Approval, ApprovalStatus
from contracts.invariants.holds import Hold, HoldStatus
from contracts.invariants.violations import BLOCKING_SEVERITIES, InvariantViolation
from contracts.invariants.wire import ViolationEvent, ViolationEventType
from contracts.shared.outgoing import OutgoingEvent
from contracts.trust.chain import VIOLATION_RESOLUTION
from store.database import (
    APPROVAL_VERDICTS,
    APPROVALS,
    DECISION_HOLDS,
    INVARIANT_VIOLATIONS,
    PLANS,
    Document,
)
from store.outbox import OutboxRepository
from store.sequences import PlanChains
from store.transactions import run_in_transaction
from store.translate import translate_errors
from store.violations import blocking_violations, chain_link


def approval_from_document(doc: Document) -> Approval:
    return Approval.model_validate({**{k: v for k, v in doc.items() if k != "_id"},
                                    "decision_id": doc["_id"]})


def _event(a: Approval) -> OutgoingEvent:
    e = ApprovalEvent(event_type=a.status, approval=a)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)


async def open_approvals(db: AsyncDatabase[Document], holds: Iterable[Hold], now: datetime,
                         ttl: timedelta, session: AsyncClientSession) -> None:
    """An approval in `requested` for each hold awaiting approval, with its event in the
    outbox; kept once (a batch written again adds nothing)."""
    outbox = OutboxRepository(db)
    for h in holds:
        if h.status is not HoldStatus.AWAITING_APPROVAL:
            continue
        a = rules.requested(h, now, ttl)
        doc = a.model_dump(mode="python", exclude={"decision_id"})
        res = await db[APPROVALS].update_one({"_id": a.decision_id}, {"$setOnInsert": doc},
                                             upsert=True, session=session)
        if res.upserted_id is not None:
            await outbox.add(rules.outbox_key(a.decision_id), rules.REQUESTED_ORDER,
                             [_event(a)], now, session)


@translate_errors
class ApprovalRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._coll = db[APPROVALS]
        self._verdicts = db[APPROVAL_VERDICTS]
        self._outbox = OutboxRepository(db)

    async def get(self, decision_id: str) -> Approval | None:
        doc = await self._coll.find_one({"_id": decision_id.upper()})
        return approval_from_document(doc) if doc else None

    async def find(self, status: ApprovalStatus | None = None, plan_id: str | None = None,
                   limit: int = rules.MAX_LISTED) -> list[Approval]:
        """Oldest first (decision IDs are ULIDs)."""
        query: dict[str, Any] = {}
        if status is not None:
            query["status"] = status.value
        if plan_id is not None:
            query["plan_id"] = plan_id.upper()
        cursor = self._coll.find(query).sort("_id", 1).limit(min(limit, rules.MAX_LISTED))
        return [approval_from_document(d) async for d in cursor]

    async def pending(self, plan_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """plan_id -> its decisions awaiting approval, for the plans that have any."""
        plans = list(dict.fromkeys(plan_ids))
        if not plans:
            return {}
        out: dict[str, list[str]] = {}
        async for d in self._coll.find({"plan_id": {"$in": plans},
                                        "status": ApprovalStatus.REQUESTED.value},
                                       {"plan_id": 1}).sort("_id", 1).limit(rules.MAX_LISTED):
            out.setdefault(d["plan_id"], []).append(d["_id"])
        return {p: tuple(ids) for p, ids in out.items()}

    async def due(self, now: datetime, limit: int = 100) -> list[Approval]:
        """Requested approvals whose expires_at has passed, oldest deadline first."""
        cursor = self._coll.find({"status": ApprovalStatus.REQUESTED.value,
                                  "expires_at": {"$lte": now}}).sort("expires_at", 1)
        return [approval_from_document(d) async for d in cursor.limit(limit)]

    async def decide(self, decided: Approval, names: dict[str, str], now: datetime) -> bool:
        """Write `decided` (granted, denied or expired) over the requested approval, move
        its hold, resolve the decision's open error violations unless it expired, and
        put the events in the outbox, in one transaction. False when the approval was no
        longer `requested` (another verdict, or the expiry, won)."""
        rules.check_transition(decided.decision_id, ApprovalStatus.REQUESTED, decided.status)
        hold_status = rules.HOLD_AFTER[decided.status]

        async def write(s: AsyncClientSession) -> bool:
            doc = decided.model_dump(mode="python", exclude={"decision_id"})
            res = await self._coll.update_one(
                {"_id": decided.decision_id, "status": ApprovalStatus.REQUESTED.value},
                {"$set": doc}, session=s)
            if res.modified_count != 1:
                return False
            await self._db[DECISION_HOLDS].update_one(
                {"_id": decided.decision_id, "status": HoldStatus.AWAITING_APPROVAL.value},
                {"$set": {"status": hold_status.value, "updated_at": now}}, session=s)
            events = [_event(decided)]
            if decided.status is not ApprovalStatus.EXPIRED:
                events += await self._resolve(decided, names, now, s)
            await self._outbox.add(rules.outbox_key(decided.decision_id),
                                   rules.DECIDED_ORDER, events, now, s)
            return True

        done: bool = await run_in_transaction(self._db.client, write)
        return done

    async def _resolve(self, a: Approval, names: dict[str, str], now: datetime,
                       s: AsyncClientSession) -> list[OutgoingEvent]:
        """Resolve the decision's open blocking violations as the approver: their
        resolution chained, their events returned (for the approval's outbox rows)."""
        coll = self._db[INVARIANT_VIOLATIONS]
        query = {"decision_id": a.decision_id, "resolved_at": None,
                 "severity": {"$in": sorted(v.value for v in BLOCKING_SEVERITIES)}}
        docs = await coll.find(query, session=s).to_list()
        if not docs:
            return []
        chains = PlanChains(self._db[PLANS], s, now)
        resolved: list[InvariantViolation] = []
        for doc in docs:
            doc |= {"resolved_at": now, "resolved_by": a.decided_by,
                    "resolution_signature": a.signature}
            link = await chain_link(chains, a.plan_id, doc["_id"], VIOLATION_RESOLUTION, doc)
            await coll.update_one({"_id": doc["_id"]}, {
                "$set": {"resolved_at": now, "resolved_by": a.decided_by,
                         "resolution_signature": a.signature},
                "$push": {"chain": link}}, session=s)
            resolved.append(InvariantViolation.model_validate(
                {**{k: v for k, v in doc.items() if k not in ("_id", "chain")},
                 "violation_id": doc["_id"]}))
        await chains.save()
        blocked = bool(await blocking_violations(self._db, [a.plan_id], s))
        out = []
        for v in resolved:
            e = ViolationEvent(event_type=ViolationEventType.INVARIANT_VIOLATION_RESOLVED,
                               violation=v, invariant_name=names.get(v.invariant_id),
                               plan_blocked=blocked)
            out.append(OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id))
        return out

    async def outcome(self, request_id: str) -> VerdictOutcome | None:
        doc = await self._verdicts.find_one({"_id": request_id.upper()})
        if doc is None:
            return None
        return VerdictOutcome.model_validate(
            {**{k: v for k, v in doc.items() if k != "_id"}, "request_id": doc["_id"]})

    async def keep(self, outcome: VerdictOutcome) -> None:
        """The first outcome of a verdict stays (a redelivery finds it)."""
        doc = outcome.model_dump(mode="python", exclude={"request_id"})
        await self._verdicts.update_one({"_id": outcome.request_id}, {"$setOnInsert": doc},
                                        upsert=True)


def names_of(holds: Sequence[Hold]) -> dict[str, str]:
    return {r.invariant_id: r.invariant_name for h in holds for r in h.reasons}
