"""One correction step, written in one MongoDB transaction.

`Changes` says everything a step writes: the correction's new state (conditional on
the version it was read at), attempt changes (conditional on their previous state),
the tree changes of a revert or an append, and the events announcing all of it,
which go to the outbox in the same transaction. The service builds a `Changes`
(contracts.corrections.changes) from pure decisions (contracts.corrections.revert,
contracts.corrections.append); this module only makes it atomic.
Every record the step adds to a plan (a decision it writes; the correction's request,
retry or end) is linked into that plan's record chain (contracts.trust.chain) in the
same transaction, conditional on the chain's head as read: a recorder batch or another
step writing the same plan meanwhile is a conflict, and the step runs again.
The transaction callback keeps no state, so pymongo's with_transaction may run it again
after a transient error.
"""

from __future__ import annotations

from datetime import datetime

from pymongo import ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.append import AppendWrites
from contracts.corrections.changes import Changes, Versioned, Written
from contracts.corrections.record import Correction
from contracts.corrections.revert import RevertWrites
from contracts.decisions.model import Decision
from contracts.trust.chain import (
    DECISION,
    correction_content,
    correction_kind,
    decision_content,
    plain,
)
from store.attempts import CorrectionAttemptRepository
from store.corrections import to_fields
from store.database import CORRECTIONS, DECISIONS, ID_CHUNK, PLANS, Document
from store.decisions import to_document
from store.errors import ConcurrentChange
from store.leases import Leases
from store.outbox import OutboxRepository
from store.plans import PlanRepository
from store.sequences import PlanChains, reserve_sequences
from store.transactions import run_in_transaction
from store.translate import translate_errors


@translate_errors
class CorrectionWriter:
    def __init__(self, db: AsyncDatabase[Document], leases: Leases) -> None:
        self._client = db.client
        self._corrections = db[CORRECTIONS]
        self._decisions = db[DECISIONS]
        self._plan_docs = db[PLANS]
        self._attempts = CorrectionAttemptRepository(db)
        self._plans = PlanRepository(db)
        self._outbox = OutboxRepository(db)
        self._leases = leases

    async def commit(self, changes: Changes, now: datetime) -> Written:
        written: Written = await run_in_transaction(
            self._client, lambda s: self._write(changes, now, s))
        return written

    async def _write(self, c: Changes, now: datetime, s: AsyncClientSession) -> Written:
        plan_id = c.correction.plan_id
        if c.lease_owner is not None:
            await self._leases.fence(plan_id, c.lease_owner, s)
        chains = PlanChains(self._plan_docs, s, now)
        version, chained = await self._write_correction(c, s)
        for a in c.attempts:
            if a.expected is None:
                await self._attempts.create(a.attempt, session=s)
            else:
                await self._attempts.replace(a.expected, a.attempt, s)
        new: list[Decision] = []
        if c.revert is not None:
            new = await self._revert(c.revert, now, s, chains)
        if c.append is not None:
            new = await self._append(c.append, now, s, chains)
        await self._chain_events(c.correction, chained, chains, s)
        await chains.save()
        events = list(c.events)
        if c.announce is not None:
            events += [e for d in new for e in c.announce(d)]
        await self._outbox.add(c.correction.correction_id, version, events, now, s)
        return Written(Versioned(c.correction, version, c.arrival), new)

    async def _write_correction(self, c: Changes, s: AsyncClientSession
                                ) -> tuple[int, set[str]]:
        """The correction's new state; its version, and the events of its history its
        chain already links (none for a new one)."""
        fields = to_fields(c.correction)
        if c.expected_version is None:
            await self._corrections.insert_one(
                {"_id": c.correction.correction_id, **fields, "version": 1,
                 "arrival": c.arrival}, session=s)
            return 1, set()
        version = c.expected_version + 1
        before = await self._corrections.find_one_and_update(
            {"_id": c.correction.correction_id, "version": c.expected_version},
            {"$set": {**fields, "version": version}}, projection={"chain.event_id": 1},
            return_document=ReturnDocument.BEFORE, session=s)
        if before is None:
            raise ConcurrentChange(
                f"correction {c.correction.correction_id} changed since version "
                f"{c.expected_version}")
        return version, {str(link.get("event_id")) for link in before.get("chain") or []
                         if isinstance(link, dict)}

    async def _chain_events(self, correction: Correction, chained: set[str],
                            chains: PlanChains, s: AsyncClientSession) -> None:
        """Link the correction's request, retries and end into its plan's chain, each once,
        after the decisions this step wrote (an APPLIED end lists them)."""
        doc = plain(to_fields(correction))
        links = []
        for event in doc["history"]:
            kind = correction_kind(event)
            if kind is None or event["event_id"] in chained:
                continue
            link = await chains.link(correction.plan_id, kind, correction.correction_id,
                                     correction_content(doc, event))
            links.append({"event_id": event["event_id"], "kind": kind, **link.as_document()})
        if links:
            await self._corrections.update_one({"_id": correction.correction_id},
                                               {"$push": {"chain": {"$each": links}}},
                                               session=s)

    async def _revert(self, writes: RevertWrites, now: datetime, s: AsyncClientSession,
                      chains: PlanChains) -> list[Decision]:
        seq = await reserve_sequences(self._plan_docs, writes.plan_id, 1, now, s,
                                      bump_epoch=True)
        new = writes.new_decision.model_copy(update={"sequence_number": seq})
        await self._decisions.insert_one(await _chained(new, chains), session=s)
        ids = writes.supersede_ids
        changed = 0
        # update_many over _id chunks: one round trip per 50 decisions instead of one each;
        # the superseded_by filter makes a decision superseded meanwhile a visible conflict.
        for i in range(0, len(ids), ID_CHUNK):
            res = await self._decisions.update_many(
                {"_id": {"$in": list(ids[i:i + ID_CHUNK])}, "superseded_by": None},
                # superseded_at is the replacement's created_at: a time cut then shows
                # exactly one of the two, never both.
                {"$set": {"superseded_by": new.decision_id, "superseded_at": new.created_at,
                          "superseded_by_correction": writes.correction_id}}, session=s)
            changed += res.modified_count
        if changed != len(ids):
            raise ConcurrentChange(
                f"{len(ids) - changed} of the {len(ids)} decisions to supersede changed "
                "since the impact analysis")
        await self._plans.roll_back(writes.child_plans_to_roll_back, writes.correction_id, now, s)
        if writes.may_have_late_decisions(seq):
            await self._check_nothing_late(writes, s)
        return [new]

    async def _check_nothing_late(self, writes: RevertWrites, s: AsyncClientSession) -> None:
        """A decision recorded after the impact walk, under a decision superseded here or
        into a plan rolled back here, would stay current under what this revert removed.
        The recorder's commit either precedes this transaction's snapshot (found here:
        the correction reads the tree again) or conflicts with the epoch bump above."""
        ids = writes.supersede_ids
        for i in range(0, len(ids), ID_CHUNK):
            late = await self._decisions.find_one(
                {"parent_decision_id": {"$in": list(ids[i:i + ID_CHUNK])},
                 "superseded_by": None}, {"_id": 1}, session=s)
            if late is not None:
                raise ConcurrentChange(f"decision {late['_id']} was recorded under the "
                                       "subtree since the impact analysis")
        if writes.child_plans_to_roll_back:
            late = await self._decisions.find_one(
                {"plan_id": {"$in": list(writes.child_plans_to_roll_back)},
                 "superseded_by": None}, {"_id": 1}, session=s)
            if late is not None:
                raise ConcurrentChange(f"decision {late['_id']} was recorded into a child "
                                       "plan since the impact analysis")

    async def _append(self, writes: AppendWrites, now: datetime, s: AsyncClientSession,
                      chains: PlanChains) -> list[Decision]:
        seq = await reserve_sequences(self._plan_docs, writes.plan_id, 1, now, s)
        intervention = writes.intervention.model_copy(update={"sequence_number": seq})
        # The child plan's root is its sequence 0, so its counter starts at 1.
        await self._plans.insert_child(writes.child_plan, 1, s)
        await self._decisions.insert_many(
            [await _chained(writes.child_root, chains), await _chained(intervention, chains)],
            session=s)
        return [intervention, writes.child_root]


async def _chained(d: Decision, chains: PlanChains) -> Document:
    """A decision a correction writes, as stored: with its link in its plan's chain."""
    doc = to_document(d)
    link = await chains.link(d.plan_id, DECISION, d.decision_id, decision_content(plain(doc)))
    return doc | {"chain": link.as_document()}



__all__ = ["CorrectionWriter"]
