"""Held decisions (`decision_holds`, `_id` = decision_id): reading them, and the judge's
queue (claim the decisions awaiting it, settle each with what the judge found).

The recorder writes a hold in the batch's transaction (store.gate_sink); the judge
moves it on here. A claim is a lease (`claimed_until`, `claimed_by`, `attempts`): a
worker that dies while asking leaves the hold to be claimed again once the lease ran
out, at most JUDGE_MAX_ATTEMPTS times. A settle is conditional on the claim and the
status, in one transaction with the violations it found and their events (outbox), so
two workers can never both settle one hold.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants import hold_wire
from contracts.invariants.approvals import DEFAULT_TTL
from contracts.invariants.holds import Hold, HoldReason, HoldStatus, check_transition
from contracts.invariants.outcomes import GateEffects
from contracts.shared.outgoing import OutgoingEvent
from store.approvals import open_approvals
from store.database import DECISION_HOLDS, Document
from store.gate_sink import HoldSink
from store.outbox import OutboxRepository
from store.transactions import run_in_transaction
from store.translate import translate_errors


def hold_from_document(doc: Document) -> Hold:
    fields = {k: v for k, v in doc.items()
              if k not in ("_id", "claimed_until", "claimed_by", "attempts")}
    return Hold.model_validate({**fields, "decision_id": doc["_id"]})


@translate_errors
class HoldRepository:
    def __init__(self, db: AsyncDatabase[Document], approval_ttl: timedelta = DEFAULT_TTL
                 ) -> None:
        self._client = db.client
        self._db = db
        self._coll = db[DECISION_HOLDS]
        self._sink = HoldSink(db, approval_ttl)
        self._outbox = OutboxRepository(db)

    async def get(self, decision_id: str) -> Hold | None:
        doc = await self._coll.find_one({"_id": decision_id.upper()})
        return hold_from_document(doc) if doc else None

    async def find(self, plan_id: str | None = None, status: HoldStatus | None = None,
                   limit: int = 1000) -> list[Hold]:
        query: dict[str, Any] = {}
        if plan_id is not None:
            query["plan_id"] = plan_id.upper()
        if status is not None:
            query["status"] = status.value
        cursor = self._coll.find(query).sort("_id", 1).limit(limit)
        return [hold_from_document(d) async for d in cursor]

    async def claim(self, owner: str, now: datetime, lease: timedelta
                    ) -> tuple[Hold, int] | None:
        """One hold awaiting the judge, leased to `owner`, with its attempt number; None
        when there is none to take."""
        doc = await self._coll.find_one_and_update(
            # Unclaimed or its claim expired (a date or null): no `$or`, which makes
            # SecantusDB read every hold (ADR 0038).
            {"status": HoldStatus.AWAITING_JUDGE.value,
             "claimed_until": {"$not": {"$gte": now}}},
            {"$set": {"claimed_until": now + lease, "claimed_by": owner},
             "$inc": {"attempts": 1}},
            sort=[("_id", 1)], return_document=ReturnDocument.AFTER)
        if doc is None:
            return None
        return hold_from_document(doc), int(doc.get("attempts", 1))

    async def settle(self, hold: Hold, owner: str, status: HoldStatus, *,
                     reasons: list[HoldReason], effects: GateEffects, now: datetime) -> bool:
        """Move a claimed hold to `status` with the violations found (their events in the
        outbox), all at once, and announce it (a release or refusal on
        decisions.hold.*, a hold for a person as approval.requested); False when the
        claim was lost (another worker settles it)."""
        check_transition(hold.decision_id, hold.status, status)
        settled_hold = hold.model_copy(update={"status": status, "reasons": reasons,
                                               "updated_at": now})

        async def write(s: AsyncClientSession) -> bool:
            res = await self._coll.update_one(
                {"_id": hold.decision_id, "status": hold.status.value, "claimed_by": owner},
                {"$set": {"status": status.value, "updated_at": now,
                          "reasons": [r.model_dump(mode="python") for r in reasons],
                          "claimed_until": None}}, session=s)
            if res.modified_count != 1:
                return False
            await self._sink.record(effects, now, s)
            if status is HoldStatus.AWAITING_APPROVAL:
                await open_approvals(self._db, [settled_hold], now, self._sink.approval_ttl, s)
            elif status in hold_wire.ANNOUNCED:
                e = hold_wire.HoldEvent(event_type=status, hold=settled_hold)
                await self._outbox.add(
                    hold_wire.outbox_key(hold.decision_id), 0,
                    [OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)], now, s)
            return True

        settled: bool = await run_in_transaction(self._client, write)
        return settled
