"""The facts a recorder batch's triage needs (`StoredFacts`), each read by an index.

The plans' epochs are read before any parent: a parent then read as current was current
at that epoch, and a revert committing later bumps it, which the insert's transaction
sees. A cached parent was seen current at the epoch it is cached with; it is read again
only if its plan's epoch has moved since.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import ancestry
from contracts.recording.facts import PlanClaim, Stored, StoredFacts
from contracts.recording.message import Candidate
from contracts.trust.ownership import Ownership
from store.batch_rare_facts import claim_ancestors, resumes
from store.cache import RecorderCache
from store.database import CORRECTION_ATTEMPTS, DECISIONS, PLANS, Document, find_by_ids
from store.plans import plan_ancestors
from store.violations import blocking_violations

PLAN_FACTS = {"epoch": 1, "status": 1, "rolled_back_by": 1, "parent_plan_id": 1,
              "spawned_from_decision_id": 1, "spawned_at": 1, "named_parent_plan_id": 1,
              "root_created_at": 1, "owner": 1, "delegates": 1, "claim_owners": 1}


@dataclass(frozen=True)
class _Wanted:
    """What a batch's facts are about."""

    ids: set[str]
    parents: set[str]     # parents outside the batch
    plans: set[str]
    claimed: set[str]     # child plans the batch claims
    root_plans: set[str]  # plans the batch's roots would join
    claiming: set[str]    # plans of the batch that claim a child plan
    named: set[str]       # stored decisions the batch names as dependents
    named_parents: set[str]  # parent plans the batch's roots name

    @classmethod
    def of(cls, candidates: Sequence[Candidate]) -> _Wanted:
        ids = {c.decision.decision_id for c in candidates}
        w = cls(ids, set(), set(), set(), set(), set(), set(), set())
        for c in candidates:
            d = c.decision
            w.plans.add(d.plan_id)
            if d.parent_decision_id is not None and d.parent_decision_id not in ids:
                w.parents.add(d.parent_decision_id)
            w.claimed.update(d.downstream_plan_ids)
            if d.is_root:
                w.root_plans.add(d.plan_id)
                if d.parent_plan_id is not None:
                    w.named_parents.add(d.parent_plan_id)
            if d.downstream_plan_ids:
                w.claiming.add(d.plan_id)
            w.named.update(x for x in d.downstream_decision_ids if x not in ids)
        return w


@dataclass(frozen=True)
class _PlanFacts:
    """What the plans collection says of the batch's plans and the plans it claims."""

    epochs: dict[str, int]
    claims: dict[str, PlanClaim]
    rolled: dict[str, str | None]  # rolled-back plan -> the correction that did it
    ownership: dict[str, Ownership]

    @classmethod
    def of(cls, docs: Iterable[Document], plans: set[str]) -> _PlanFacts:
        docs = list(docs)
        ours = [d for d in docs if d["_id"] in plans]
        return cls(
            epochs={d["_id"]: int(d.get("epoch", 0)) for d in ours},
            claims={d["_id"]: plan_claim(d) for d in docs},
            rolled={d["_id"]: d.get("rolled_back_by") for d in ours
                    if d.get("status") == PlanStatus.ROLLED_BACK.value},
            ownership={d["_id"]: Ownership(d["owner"], tuple(d.get("delegates") or ()))
                       for d in docs if d.get("owner")})


class BatchFacts:
    def __init__(self, db: AsyncDatabase[Document], cache: RecorderCache) -> None:
        self._db = db
        self._cache = cache
        self._decisions = db[DECISIONS]
        self._plans = db[PLANS]
        self._attempts = db[CORRECTION_ATTEMPTS]

    async def read(self, candidates: Sequence[Candidate], *,
                   existing: bool = True) -> StoredFacts:
        """The facts for `candidates`. `existing=False` skips asking which of them are
        stored already (the facts then say none is)."""
        w = _Wanted.of(candidates)
        # Blocked plans are asked for the batch's plans and the ancestors remembered from
        # earlier batches, concurrently with the rest. The plans' own parent links come
        # with their documents, so a batch of top-level plans (the usual case) costs no
        # query more; only a chain seen for the first time is read further up.
        remembered = {a for p in w.plans for a in ancestry(p, self._cache.parent_plan)}
        existing_docs, plan_docs, root_docs, blocked = await asyncio.gather(
            find_by_ids(self._decisions, w.ids if existing else (),
                        {"content_hash": 1, "recorded_from": 1}),
            find_by_ids(self._plans, w.plans | w.claimed | w.named_parents, PLAN_FACTS),
            self._roots(w.root_plans),
            # Never cached: a violation reported or resolved a moment ago counts.
            blocking_violations(self._db, w.plans | remembered))
        self._remember_parents(plan_docs, w.plans)
        lineage, blocked = await self._blocking_lineage(w.plans, remembered, blocked)
        plan = _PlanFacts.of(plan_docs, w.plans)
        plan_of, superseded_by, created = await self._parents(w, plan.epochs)
        superseded, rolled_back = await resumes(self._attempts, superseded_by, plan.rolled)
        ancestors, dependents = await asyncio.gather(
            claim_ancestors(self._plans, w.claiming, plan.claims),
            find_by_ids(self._decisions, w.named, {"plan_id": 1}))
        return StoredFacts(
            existing={d["_id"]: Stored(d.get("content_hash", ""), d.get("recorded_from", -1))
                      for d in existing_docs},
            plan_of=plan_of, root_of_plan={d["plan_id"]: d["_id"] for d in root_docs},
            blocked_plans=blocked, blocking_ancestors=lineage, superseded=superseded,
            rolled_back=rolled_back, epochs=plan.epochs, claims=plan.claims,
            plan_ancestors=ancestors,
            dependent_plan={d["_id"]: d["plan_id"] for d in dependents},
            ownership=plan.ownership, created_at=created)

    def _remember_parents(self, plan_docs: Iterable[Document], plans: set[str]) -> None:
        for d in plan_docs:
            if d["_id"] in plans and d.get("parent_plan_id"):
                self._cache.parent_plan[d["_id"]] = d["parent_plan_id"]

    async def _blocking_lineage(self, plans: set[str], remembered: set[str],
                                blocked: dict[str, tuple[str, ...]]
                                ) -> tuple[dict[str, tuple[str, ...]],
                                           dict[str, tuple[str, ...]]]:
        """The ancestors of the batch's child plans (a parent's blocking violation blocks
        its children too), and the blocked plans with the ancestors first seen now."""
        children = [p for p in plans if p in self._cache.parent_plan]
        lineage = (await plan_ancestors(self._db, children, self._cache.parent_plan)
                   if children else {})
        new = {a for chain in lineage.values() for a in chain} - plans - remembered
        if new:
            blocked = {**blocked, **await blocking_violations(self._db, new)}
        return lineage, blocked

    async def _parents(self, w: _Wanted, epochs: Mapping[str, int]
                       ) -> tuple[dict[str, str], dict[str, str], dict[str, datetime]]:
        """The plans and creation times of the stored parents, cached ones included
        while their plan's epoch has not moved; and the parents a revert superseded,
        with their replacements."""
        plan_of: dict[str, str] = {}
        created: dict[str, datetime] = {}
        for p in w.parents:
            cached = self._cache.plan_of.get(p)
            at = self._cache.created_at.get(p)
            if cached is not None and at is not None and cached[1] == epochs.get(cached[0], 0):
                plan_of[p], created[p] = cached[0], at
        superseded_by: dict[str, str] = {}
        for d in await find_by_ids(self._decisions, [p for p in w.parents if p not in plan_of],
                                   {"plan_id": 1, "superseded_by": 1, "created_at": 1}):
            plan_of[d["_id"]] = d["plan_id"]
            if (at := _utc(d.get("created_at"))) is not None:
                created[d["_id"]] = self._cache.created_at[d["_id"]] = at
            if d.get("superseded_by") is not None:
                superseded_by[d["_id"]] = d["superseded_by"]
            elif d["plan_id"] in w.plans:  # its epoch was read before it
                self._cache.plan_of[d["_id"]] = (d["plan_id"], epochs.get(d["plan_id"], 0))
        return plan_of, superseded_by, created

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


def plan_claim(doc: Document) -> PlanClaim:
    """A plan's claim record as the claim rules read it (times in UTC)."""
    owners = doc.get("claim_owners")
    return PlanClaim(doc.get("parent_plan_id"), doc.get("spawned_from_decision_id"),
                     _utc(doc.get("spawned_at")), doc.get("named_parent_plan_id"),
                     _utc(doc.get("root_created_at")),
                     tuple(owners) if isinstance(owners, list) else None)


def _utc(value: datetime | None) -> datetime | None:
    """BSON dates come back naive unless the client is tz-aware: compare in UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
