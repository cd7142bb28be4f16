"""The invariant_violations collection, and which plans its unresolved errors block.

A violation and the event announcing it are written in one transaction with the
correction path's outbox (store.outbox, keyed by violation_id instead of a
correction_id), so a process dying after the commit leaves the event to the outbox
relay every worker runs, and no change is ever announced twice or not at all. The
report and the resolution are each linked into the plan's record chain in that same
transaction (`chain`: `{kind, seq, prev, digest}` per link, contracts.trust.chain).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.invariants.errors import ViolationAlreadyResolved, ViolationConflict
from contracts.invariants.violations import BLOCKING_SEVERITIES, InvariantViolation
from contracts.shared.outgoing import OutgoingEvent
from contracts.trust.chain import (
    VIOLATION_REPORT,
    VIOLATION_RESOLUTION,
    plain,
    violation_content,
)
from contracts.trust.signing import Signature
from store.database import INVARIANT_VIOLATIONS, PLANS, Document, id_chunks
from store.errors import ViolationNotFound
from store.outbox import OutboxRepository
from store.sequences import PlanChains
from store.transactions import run_in_transaction
from store.translate import translate_errors

VIOLATED_VERSION = 0
RESOLVED_VERSION = 1
"""Outbox order of a violation's two events: the report's before the resolution's."""

EventFor = Callable[[InvariantViolation, bool], OutgoingEvent]
"""Builds the event of a change from the violation as stored and whether its plan is
blocked once the change commits (read inside the same transaction)."""


def violation_document(v: InvariantViolation) -> Document:
    doc: Document = v.model_dump(mode="python", exclude={"violation_id"})
    doc["_id"] = v.violation_id
    return doc


def _v_from_doc(doc: Document) -> InvariantViolation:
    return InvariantViolation.model_validate(
        {**{k: v for k, v in doc.items() if k not in ("_id", "chain", "erased")},
         "violation_id": doc["_id"]})


async def chain_link(chains: PlanChains, plan_id: str, violation_id: str, kind: str,
                     doc: Document) -> Document:
    """The report's or the resolution's link in its plan's record chain, as stored."""
    link = await chains.link(plan_id, kind, violation_id,
                             violation_content(plain(doc), kind))
    return {"kind": kind, **link.as_document()}


def _blocking_query(plan_ids: list[str]) -> Document:
    return {"plan_id": {"$in": plan_ids}, "resolved_at": None,
            "severity": {"$in": sorted(s.value for s in BLOCKING_SEVERITIES)}}


async def blocking_violations(db: AsyncDatabase[Document], plan_ids: Iterable[str],
                              session: AsyncClientSession | None = None
                              ) -> dict[str, tuple[str, ...]]:
    """plan_id -> its unresolved blocking violation IDs (oldest first), for the blocked
    ones among `plan_ids`. One indexed query per ID_CHUNK plans (usually one per batch)."""
    coll = db[INVARIANT_VIOLATIONS]
    results = await asyncio.gather(*[
        coll.find(_blocking_query(chunk), {"plan_id": 1, "reported_at": 1},
                  session=session).to_list() for chunk in id_chunks(plan_ids)])
    out: dict[str, list[tuple[datetime, str]]] = {}
    for docs in results:
        for d in docs:
            out.setdefault(d["plan_id"], []).append((d["reported_at"], d["_id"]))
    return {plan: tuple(vid for _, vid in sorted(found)) for plan, found in out.items()}


@translate_errors
class ViolationRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._client = db.client
        self._coll = db[INVARIANT_VIOLATIONS]
        self._outbox = OutboxRepository(db)

    async def get(self, violation_id: str) -> InvariantViolation | None:
        doc = await self._coll.find_one({"_id": violation_id.upper()})
        return _v_from_doc(doc) if doc else None

    async def require(self, violation_id: str) -> InvariantViolation:
        v = await self.get(violation_id)
        if v is None:
            raise ViolationNotFound(violation_id)
        return v

    async def find(self, plan_id: str | None = None, *, unresolved_only: bool = False,
                   limit: int = 1000) -> list[InvariantViolation]:
        """Oldest first."""
        query: dict[str, Any] = {}
        if plan_id is not None:
            query["plan_id"] = plan_id.upper()
        if unresolved_only:
            query["resolved_at"] = None
        cursor = self._coll.find(query).sort("reported_at", 1).limit(limit)
        return [_v_from_doc(d) async for d in cursor]

    async def blocked_plans(self, plan_ids: Iterable[str]) -> set[str]:
        return set(await blocking_violations(self._db, plan_ids))

    async def record(self, v: InvariantViolation, event_for: EventFor, now: datetime) -> bool:
        """Store a report with its event, in one transaction. False if this very report
        was stored before (a redelivery or a retry); ViolationConflict if its
        violation_id was stored with other content."""
        async def write(s: AsyncClientSession) -> None:
            chains = PlanChains(self._db[PLANS], s, now)
            doc = violation_document(v)
            await self._coll.insert_one(doc | {"chain": [await chain_link(
                chains, v.plan_id, v.violation_id, VIOLATION_REPORT, doc)]}, session=s)
            await chains.save()
            blocked = bool(await blocking_violations(self._db, [v.plan_id], s))
            await self._outbox.add(v.violation_id, VIOLATED_VERSION, [event_for(v, blocked)],
                                   now, s)

        try:
            await run_in_transaction(self._client, write)
        except DuplicateKeyError:
            held = await self.require(v.violation_id)
            if held.report_fields() != v.report_fields():
                raise ViolationConflict(v.violation_id) from None
            return False
        return True

    async def resolve(self, violation_id: str, resolved_by: str | None, at: datetime,
                      event_for: EventFor, signature: Signature | None = None
                      ) -> InvariantViolation:
        """Mark resolved with its event, in one transaction; the condition on resolved_at
        makes a second resolve (or a race of two) fail with ViolationAlreadyResolved."""
        vid = violation_id.upper()

        async def write(s: AsyncClientSession) -> InvariantViolation | None:
            doc = await self._coll.find_one_and_update(
                {"_id": vid, "resolved_at": None},
                {"$set": {"resolved_at": at, "resolved_by": resolved_by,
                          "resolution_signature": signature.model_dump() if signature
                          else None}},
                return_document=ReturnDocument.AFTER, session=s)
            if doc is None:
                return None
            done = _v_from_doc(doc)
            chains = PlanChains(self._db[PLANS], s, at)
            await self._coll.update_one({"_id": vid}, {"$push": {"chain": await chain_link(
                chains, done.plan_id, vid, VIOLATION_RESOLUTION, doc)}}, session=s)
            await chains.save()
            blocked = bool(await blocking_violations(self._db, [done.plan_id], s))
            await self._outbox.add(vid, RESOLVED_VERSION, [event_for(done, blocked)], at, s)
            return done

        resolved: InvariantViolation | None = await run_in_transaction(self._client, write)
        if resolved is not None:
            return resolved
        held = await self.require(vid)
        raise ViolationAlreadyResolved(held)
