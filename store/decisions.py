"""The decisions collection: reads for the rest of the system and the recorder's batch write.

A document is the Decision's fields at top level with `_id` = decision_id, plus
`content_hash` (what a redelivery is compared against). Trees are walked level by
level through the indexed parent link, so reading a subtree costs one round trip per
level and reads only the subtree, whatever the size of the plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from contracts.decisions.artifacts import STORED
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanStatus, ancestry
from contracts.recording.facts import PlanClaim, Resume, Stored, StoredFacts
from contracts.recording.message import Candidate
from store.cache import LRUCache
from store.database import CORRECTION_ATTEMPTS, DECISIONS, PLANS, Document, find_by_ids
from store.errors import ResourceNotFoundError, RestrictViolation
from store.invariants import blocking_violations
from store.plans import plan_ancestors
from store.transactions import run_in_transaction
from store.translate import translate_errors

DUPLICATE_KEY = 11000
PLAN_OF_CACHE = 200_000
PARENT_PLAN_CACHE = 100_000
ROOT_QUERY: Document = {"decision_type": "prompt_definition", "is_correction": False}
"""A plan's root (served by the partial unique index one_root_per_plan)."""


INTERNAL_FIELDS = ("_id", "content_hash", "recorded_from")
"""Bookkeeping beside the Decision's own fields: what a redelivery is compared against."""


def to_document(decision: Decision, content_hash: str | None = None,
                recorded_from: int | None = None) -> Document:
    doc: Document = decision.model_dump(
        mode="json", exclude={"decision_id", "created_at", "superseded_at"})
    doc["_id"] = decision.decision_id
    doc["created_at"] = decision.created_at
    doc["superseded_at"] = decision.superseded_at  # a BSON date, like the revert writes
    if content_hash is not None:
        doc["content_hash"] = content_hash
    if recorded_from is not None:
        doc["recorded_from"] = recorded_from
    return doc


def from_document(doc: Document) -> Decision:
    fields = {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}
    fields["decision_id"] = doc["_id"]
    # What is stored was accepted under the rules of its day: it must load even if a
    # later rule (safe_artifact_path) would refuse it now.
    return Decision.model_validate(fields, context={STORED: True})


PLAN_FACTS = {"epoch": 1, "status": 1, "rolled_back_by": 1, "parent_plan_id": 1,
              "spawned_from_decision_id": 1, "spawned_at": 1, "named_parent_plan_id": 1,
              "root_created_at": 1}
MAX_PLAN_DEPTH = 64
"""How many generations of parent plans a claim's ancestor check reads at most."""


def _claim(doc: Document) -> PlanClaim:
    return PlanClaim(doc.get("parent_plan_id"), doc.get("spawned_from_decision_id"),
                     _utc(doc.get("spawned_at")), doc.get("named_parent_plan_id"),
                     _utc(doc.get("root_created_at")))


def _utc(value: datetime | None) -> datetime | None:
    """BSON dates come back naive unless the client is tz-aware: compare in UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _chain(plan_id: str, parent: Mapping[str, str | None]) -> list[str]:
    """The plan and its known ancestors, ending at the first plan whose parent is unknown
    (it is then the last entry) or absent; a cycle in old data ends it too."""
    out = [plan_id]
    while (p := parent.get(out[-1])) is not None and p not in out:
        out.append(p)
    return out


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


@translate_errors
class DecisionRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._client = db.client
        self._db = db
        # decision_id -> plan_id of decisions known to be stored. Both are immutable and
        # decisions are only ever added, so a parent seen once need not be read again:
        # in a steady stream nearly every parent was written moments ago by this worker.
        # The epoch beside the plan is the plan's correction epoch when the decision was
        # last seen current: only a revert supersedes, and every revert bumps the epoch.
        self._plan_of: LRUCache[str, tuple[str, int]] = LRUCache(PLAN_OF_CACHE)
        # plan_id -> parent plan_id: a plan's parent, once recorded, never changes.
        self._parent_plan: LRUCache[str, str] = LRUCache(PARENT_PLAN_CACHE)
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]
        self._attempts = db[CORRECTION_ATTEMPTS]

    # --- reads -----------------------------------------------------------------

    async def get(self, decision_id: str) -> Decision | None:
        doc = await self._decisions.find_one({"_id": decision_id})
        return from_document(doc) if doc else None

    async def get_many(self, decision_ids: Iterable[str]) -> dict[str, Decision]:
        return {d["_id"]: from_document(d)
                for d in await find_by_ids(self._decisions, decision_ids)}

    async def roots_of(self, plan_ids: Iterable[str]) -> dict[str, Decision]:
        """plan_id -> its root prompt_definition (not a correction), for those recorded."""
        ids = list(dict.fromkeys(plan_ids))
        cursor = self._decisions.find({"plan_id": {"$in": ids}, **ROOT_QUERY})
        return {d["plan_id"]: from_document(d) async for d in cursor}

    async def roots_page(self, after: str | None, limit: int) -> list[Decision]:
        """Plan roots in decision ID order, the `limit` after `after`: a walk over every
        plan, one page at a time."""
        query: dict[str, Any] = dict(ROOT_QUERY)
        if after is not None:
            query["_id"] = {"$gt": after}
        cursor = self._decisions.find(query).sort("_id", 1).limit(limit)
        return [from_document(d) async for d in cursor]

    async def in_sequence(self, plan_id: str) -> list[Decision]:
        """Every decision of the plan, superseded ones too, in sequence order."""
        cursor = self._decisions.find({"plan_id": plan_id}).sort("sequence_number", 1)
        return [from_document(d) async for d in cursor]

    async def full_tree(self, plan_id: str) -> list[Decision]:
        return await self.in_sequence(plan_id)

    async def current_tree(self, plan_id: str) -> list[Decision]:
        """The current tree: decisions whose superseded_by is null, in sequence order."""
        cursor = self._decisions.find({"plan_id": plan_id, "superseded_by": None})
        found = [from_document(d) async for d in cursor]
        return sorted(found, key=lambda d: d.sequence_number or 0)

    async def children(self, decision_id: str, *, current_only: bool = True) -> list[Decision]:
        query: dict[str, Any] = {"parent_decision_id": decision_id}
        if current_only:
            query["superseded_by"] = None
        found = [from_document(d) async for d in self._decisions.find(query)]
        return sorted(found, key=lambda d: d.sequence_number or 0)

    async def subtree(self, decision_id: str, *, current_only: bool = True) -> list[Decision]:
        """The decision and its descendants by parent link, breadth first."""
        root = await self.get(decision_id)
        if root is None or (current_only and root.superseded_by is not None):
            return []
        out = [root]
        frontier = [root.decision_id]
        while frontier:
            query: dict[str, Any] = {"parent_decision_id": {"$in": frontier}}
            if current_only:
                query["superseded_by"] = None
            level = sorted([from_document(d) async for d in self._decisions.find(query)],
                           key=lambda d: d.sequence_number or 0)
            out.extend(level)
            frontier = [d.decision_id for d in level]
        return out

    # --- the recorder's batch --------------------------------------------------

    async def facts_for(self, candidates: Sequence[Candidate], *,
                        existing: bool = True) -> StoredFacts:
        """The lookups `triage_batch` needs, each by an index. `existing=False` skips
        asking which of the candidates are stored already (the facts then say none is;
        the recorder's first try at a batch of first deliveries).

        The plans' epochs are read before any parent: a parent then read as current was
        current at that epoch, and a revert committing later bumps it, which the insert's
        transaction sees. A cached parent was seen current at the epoch it is cached
        with; it is read again only if its plan's epoch has moved since."""
        ids = {c.decision.decision_id for c in candidates}
        parents = {p for c in candidates
                   if (p := c.decision.parent_decision_id) is not None and p not in ids}
        plans = {c.decision.plan_id for c in candidates}
        claimed = {p for c in candidates for p in c.decision.downstream_plan_ids}
        # Blocked plans are asked for the batch's plans and the ancestors remembered from
        # earlier batches, concurrently with the rest. The plans' own parent links come
        # with their documents, so a batch of top-level plans (the usual case) costs no
        # query more; only a chain seen for the first time is read further up.
        remembered = {a for p in plans for a in ancestry(p, self._parent_plan)}
        existing_docs, plan_docs, root_docs, blocked = await asyncio.gather(
            find_by_ids(self._decisions, ids if existing else (),
                        {"content_hash": 1, "recorded_from": 1}),
            find_by_ids(self._plans, plans | claimed, PLAN_FACTS),
            self._roots({c.decision.plan_id for c in candidates if c.decision.is_root}),
            # Never cached: a violation reported or resolved a moment ago counts.
            blocking_violations(self._db, plans | remembered))
        for d in plan_docs:
            if d["_id"] in plans and d.get("parent_plan_id"):
                self._parent_plan[d["_id"]] = d["parent_plan_id"]
        children = [p for p in plans if p in self._parent_plan]
        lineage = (await plan_ancestors(self._db, children, self._parent_plan)
                   if children else {})
        new = {a for chain in lineage.values() for a in chain} - plans - remembered
        if new:
            blocked = {**blocked, **await blocking_violations(self._db, new)}
        stored = {d["_id"]: Stored(d.get("content_hash", ""), d.get("recorded_from", -1))
                  for d in existing_docs}
        epochs = {d["_id"]: int(d.get("epoch", 0)) for d in plan_docs if d["_id"] in plans}
        claims = {d["_id"]: _claim(d) for d in plan_docs}
        rolled = {d["_id"]: d.get("rolled_back_by") for d in plan_docs
                  if d["_id"] in plans and d.get("status") == PlanStatus.ROLLED_BACK.value}
        plan_of: dict[str, str] = {}
        for p in parents:
            cached = self._plan_of.get(p)
            if cached is not None and cached[1] == epochs.get(cached[0], 0):
                plan_of[p] = cached[0]
        superseded_by: dict[str, str] = {}
        for d in await find_by_ids(self._decisions, [p for p in parents if p not in plan_of],
                                   {"plan_id": 1, "superseded_by": 1}):
            plan_of[d["_id"]] = d["plan_id"]
            if d.get("superseded_by") is not None:
                superseded_by[d["_id"]] = d["superseded_by"]
            elif d["plan_id"] in plans:  # its epoch was read before it
                self._plan_of[d["_id"]] = (d["plan_id"], epochs.get(d["plan_id"], 0))
        superseded, rolled_back = await self._resumes(superseded_by, rolled)
        roots = {d["plan_id"]: d["_id"] for d in root_docs}
        claiming = {c.decision.plan_id for c in candidates if c.decision.downstream_plan_ids}
        named = {x for c in candidates for x in c.decision.downstream_decision_ids} - ids
        ancestors, dependents = await asyncio.gather(
            self._ancestors(claiming, claims), find_by_ids(self._decisions, named, {"plan_id": 1}))
        return StoredFacts(existing=stored, plan_of=plan_of, root_of_plan=roots,
                           blocked_plans=blocked, blocking_ancestors=lineage,
                           superseded=superseded,
                           rolled_back=rolled_back, epochs=epochs, claims=claims,
                           plan_ancestors=ancestors,
                           dependent_plan={d["_id"]: d["plan_id"] for d in dependents})

    async def _roots(self, plans: set[str]) -> list[Document]:
        """Stored roots, only for the plans a root of the batch would join: no other
        decision needs one, so a batch without roots skips the query. Served by the
        partial unique index one_root_per_plan."""
        if not plans:
            return []
        found: list[Document] = await self._decisions.find(
            {"plan_id": {"$in": list(plans)}, "decision_type": "prompt_definition",
             "is_correction": False}, {"plan_id": 1}).to_list()
        return found

    async def _ancestors(self, plans: set[str], known: dict[str, PlanClaim]
                         ) -> dict[str, frozenset[str]]:
        """Each plan's ancestors by recorded parents: one read per generation, and only
        for plans that claim a child plan (rare)."""
        parent = {p: c.parent_plan_id for p, c in known.items()}
        for _ in range(MAX_PLAN_DEPTH):
            wanted = {q for p in plans for q in _chain(p, parent) if q not in parent}
            if not wanted:
                break
            docs = await find_by_ids(self._plans, wanted, {"parent_plan_id": 1})
            parent.update({w: None for w in wanted})
            parent.update({d["_id"]: d.get("parent_plan_id") for d in docs})
        return {p: frozenset(_chain(p, parent)) - {p} for p in plans}

    async def _resumes(self, superseded_by: dict[str, str], rolled: dict[str, str | None]
                       ) -> tuple[dict[str, Resume], dict[str, Resume]]:
        """Where to resume, for stale parents and rolled-back plans: the rare path, so
        the attempts that name the corrections are read only here."""
        if not superseded_by and not rolled:
            return {}, {}
        replacements = set(superseded_by.values())
        corrections = {c for c in rolled.values() if c is not None}
        attempts = await self._attempts.find(
            {"$or": [{"new_decision_id": {"$in": list(replacements)}},
                     {"correction_id": {"$in": list(corrections)},
                      "new_decision_id": {"$type": "string"}}]},
            {"correction_id": 1, "new_decision_id": 1, "plan_id": 1}).to_list()
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

    async def delete(self, decision_id: str) -> None:
        """Hard-delete one decision, unless a correction attempt names it (RESTRICT).

        The check and the delete share a transaction, so an attempt created meanwhile
        either sees the decision or makes the delete fail; never an orphaned attempt.
        """
        await run_in_transaction(self._client, lambda s: self._delete(decision_id, s))
        self._plan_of.discard(decision_id)

    async def _delete(self, decision_id: str, s: AsyncClientSession) -> None:
        naming = [a["_id"] async for a in self._attempts.find(
            {"$or": [{"original_decision_id": decision_id}, {"new_decision_id": decision_id}]},
            {"_id": 1}, session=s)]
        if naming:
            raise RestrictViolation(f"decision {decision_id}", naming)
        res = await self._decisions.delete_one({"_id": decision_id}, session=s)
        if res.deleted_count != 1:
            raise ResourceNotFoundError("decision", decision_id)

    async def reserve_sequences(self, plan_id: str, count: int, now: datetime,
                                session: AsyncClientSession, *, bump_epoch: bool = False) -> int:
        """Public name of the recorder's reservation, for the correction transaction.
        A revert passes `bump_epoch`: every recorder batch that read the plan before the
        revert committed then plans again (see facts_for)."""
        before = await self._reserve(plan_id, count, now, session, bump_epoch=bump_epoch)
        return int(before.get("next_sequence", 0)) if before else 0

    async def _reserve(self, plan_id: str, count: int, now: datetime,
                       session: AsyncClientSession, *, bump_epoch: bool = False
                       ) -> Document | None:
        """Take `count` sequence numbers of a plan; returns the counter document as it was
        (None: new plan). Inside the insert's transaction, so numbers are never reused and
        stay dense even if a writer dies; and since a revert writes this very document,
        the two transactions conflict at the database."""
        inc = {"next_sequence": count, **({"epoch": 1} if bump_epoch else {})}
        before: Document | None = await self._plans.find_one_and_update(
            {"_id": plan_id},
            {"$inc": inc, "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value}},
            upsert=True, return_document=ReturnDocument.BEFORE,
            projection={"next_sequence": 1, "epoch": 1, "status": 1}, session=session,
        )
        return before

    async def _reserve_many(self, counts: Mapping[str, int], now: datetime,
                            session: AsyncClientSession) -> dict[str, Document | None]:
        """`_reserve` for several plans in two round trips instead of one per plan: read
        the counters, then bump them all in one bulk write. Safe inside the transaction:
        a writer that changed a counter after this transaction's snapshot makes the bump
        a write conflict (the transaction is retried), so the values read are the ones
        bumped."""
        if len(counts) == 1:
            [(plan_id, count)] = counts.items()
            return {plan_id: await self._reserve(plan_id, count, now, session)}
        before = {d["_id"]: d async for d in self._plans.find(
            {"_id": {"$in": list(counts)}}, {"next_sequence": 1, "epoch": 1, "status": 1},
            session=session)}
        await self._plans.bulk_write(
            [UpdateOne({"_id": plan_id},
                       {"$inc": {"next_sequence": count},
                        "$setOnInsert": {"created_at": now, "status": PlanStatus.ACTIVE.value}},
                       upsert=True) for plan_id, count in counts.items()],
            ordered=True, session=session)
        return {plan_id: before.get(plan_id) for plan_id in counts}

    async def insert_recorded(self, accepted: Sequence[Candidate], now: datetime,
                              epochs: Mapping[str, int] | None = None) -> list[Decision] | None:
        """Number the decisions per plan, in the given order, and insert them with one bulk
        write, all in one transaction. None means a concurrent writer stored one of these
        IDs (or its plan's root) first, or a correction changed one of their plans since
        `epochs` (the facts' epochs; None: not checked) were read: nothing was written,
        and the caller plans again."""
        if not accepted:
            return []
        try:
            written = await run_in_transaction(
                self._client, lambda s: self._insert(accepted, now, s, epochs))
        except (DuplicateKeyError, StaleFacts):
            return None
        except BulkWriteError as exc:
            if all(e.get("code") == DUPLICATE_KEY
                   for e in exc.details.get("writeErrors", [])):
                return None
            raise
        for d in written:  # only once committed: current at the epoch the insert checked
            self._plan_of[d.decision_id] = (d.plan_id, (epochs or {}).get(d.plan_id, 0))
        return written

    async def _insert(self, accepted: Sequence[Candidate], now: datetime,
                      session: AsyncClientSession,
                      epochs: Mapping[str, int] | None = None) -> list[Decision]:
        # Runs again from the top if the transaction is retried, so it keeps no state.
        per_plan: dict[str, list[Candidate]] = {}
        for c in accepted:
            per_plan.setdefault(c.decision.plan_id, []).append(c)
        numbered: list[tuple[Candidate, Decision]] = []
        counters = await self._reserve_many(
            {plan_id: len(group) for plan_id, group in per_plan.items()}, now, session)
        for plan_id, group in per_plan.items():
            before = counters[plan_id]
            if epochs is not None:
                _check_unchanged(plan_id, before, epochs.get(plan_id, 0))
            start = int(before.get("next_sequence", 0)) if before else 0
            numbered.extend((c, c.decision.model_copy(update={"sequence_number": start + i}))
                            for i, c in enumerate(group))
        await self._decisions.insert_many(
            [to_document(d, c.content_hash, c.stream_sequence) for c, d in numbered],
            session=session)
        written = [d for _, d in numbered]
        for d in written:
            if d.is_root:
                await self._record_root(d, session)
            for p in d.downstream_plan_ids:
                await self._record_claim(d, p, now, session)
        return written

    async def _record_root(self, d: Decision, session: AsyncClientSession) -> None:
        """The root on its plan's record, conditional on the claim the facts saw: a claim
        committed since (by a decision created after this root, or from another plan
        than the root names) makes the batch plan again."""
        cond: list[dict[str, Any]] = [
            {"$or": [{"spawned_at": None}, {"spawned_at": {"$lte": d.created_at}}]}]
        if d.parent_plan_id is not None:
            cond.append({"$or": [{"parent_plan_id": None},
                                 {"parent_plan_id": d.parent_plan_id}]})
        res = await self._plans.update_one(
            {"_id": d.plan_id, "$and": cond},
            {"$set": {"root_decision_id": d.decision_id, "project": d.project,
                      "action_template": d.action_template, "root_created_at": d.created_at,
                      "named_parent_plan_id": d.parent_plan_id}}, session=session)
        if res.matched_count != 1:
            raise StaleFacts(f"plan {d.plan_id} was claimed since its facts were read")

    async def _record_claim(self, d: Decision, plan_id: str, now: datetime,
                            session: AsyncClientSession) -> None:
        """`d` spawned `plan_id`: its parent on the child's record. The filter is the
        claim rules again, so a claim or root committed since the facts were read fails
        the match, the upsert then collides with the existing _id (DuplicateKeyError)
        and the batch plans again: two claims of one plan can never both stand."""
        await self._plans.update_one(
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
