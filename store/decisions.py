"""The decisions collection: reads for the rest of the system (the recorder's batch write
is store.recorder).

A document is the Decision's fields at top level with `_id` = decision_id, plus
`content_hash` (what a redelivery is compared against). Trees are walked level by
level through the indexed parent link, so reading a subtree costs one round trip per
level and reads only the subtree, whatever the size of the plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.artifacts import STORED
from contracts.decisions.model import Decision
from contracts.decisions.search import search_tokens
from store.database import CORRECTION_ATTEMPTS, DECISIONS, Document, find_by_ids
from store.errors import ResourceNotFoundError, RestrictViolation
from store.transactions import run_in_transaction
from store.translate import translate_errors

ROOT_QUERY: Document = {"decision_type": "prompt_definition", "is_correction": False}
"""A plan's root (served by the partial unique index one_root_per_plan)."""


TREE_READ_MAX = 10_000
"""Most decisions a whole-tree read returns (`agents plan tree`, a tree as of a moment):
a bound on what one request makes the server read, whatever the plan holds."""
CHILDREN_READ_MAX = 1000
"""Most children one read returns (a decision's panel lists the first of them)."""

INTERNAL_FIELDS = ("_id", "content_hash", "recorded_from", "recorded_by", "verified",
                   "signature", "chain", "redactions", "erased", "search_tokens")
"""Bookkeeping beside the Decision's own fields: what a redelivery is compared against,
who recorded it as the ledger verified (store.provenance reads those), its link in its
plan's record chain (contracts.trust.chain), what redaction replaced on the way in and
what an erasure removed later (docs/retention.md), and what a search finds it by
(contracts.decisions.search)."""


def to_document(decision: Decision, content_hash: str | None = None,
                recorded_from: int | None = None, recorded_by: str | None = None
                ) -> Document:
    """The document stored for `decision`, with its search tokens (filed under
    `recorded_by`, the verified signer, when there is one)."""
    doc: Document = decision.model_dump(
        mode="json", exclude={"decision_id", "created_at", "superseded_at"})
    doc["_id"] = decision.decision_id
    doc["created_at"] = decision.created_at
    doc["superseded_at"] = decision.superseded_at  # a BSON date, like the revert writes
    if content_hash is not None:
        doc["content_hash"] = content_hash
    if recorded_from is not None:
        doc["recorded_from"] = recorded_from
    doc["search_tokens"] = search_tokens(decision, recorded_by)
    return doc


def from_document(doc: Document) -> Decision:
    fields = {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}
    fields["decision_id"] = doc["_id"]
    # What is stored was accepted under the rules of its day: it must load even if a
    # later rule (safe_artifact_path) would refuse it now.
    return Decision.model_validate(fields, context={STORED: True})


@translate_errors
class DecisionRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._client = db.client
        self._decisions = db[DECISIONS]
        self._attempts = db[CORRECTION_ATTEMPTS]

    # --- reads -----------------------------------------------------------------

    async def get(self, decision_id: str) -> Decision | None:
        doc = await self._decisions.find_one({"_id": decision_id})
        return from_document(doc) if doc else None

    async def recorded_by(self, decision_id: str) -> str | None:
        """The principal that signed the decision, as the recorder verified it (None:
        recorded unsigned, or by nobody the ledger knows)."""
        doc = await self._decisions.find_one({"_id": decision_id}, {"recorded_by": 1})
        by = doc.get("recorded_by") if doc else None
        return by if isinstance(by, str) else None

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

    async def full_tree(self, plan_id: str, limit: int = TREE_READ_MAX) -> list[Decision]:
        """The plan's first `limit` decisions, superseded ones too, in sequence order."""
        return await self.up_to(plan_id, None, limit)

    async def up_to(self, plan_id: str, sequence: int | None, limit: int = TREE_READ_MAX
                    ) -> list[Decision]:
        """The plan's decisions numbered at most `sequence` (None: any), superseded ones
        too, in sequence order, at most `limit` of them (by plan_sequence_unique)."""
        query: dict[str, Any] = {"plan_id": plan_id}
        if sequence is not None:
            query["sequence_number"] = {"$lte": sequence}
        cursor = self._decisions.find(query).sort("sequence_number", 1).limit(limit)
        return [from_document(d) async for d in cursor]

    async def current_tree(self, plan_id: str, limit: int = TREE_READ_MAX) -> list[Decision]:
        """The current tree: decisions whose superseded_by is null, in sequence order,
        the first `limit` of them."""
        cursor = self._decisions.find({"plan_id": plan_id, "superseded_by": None}
                                      ).sort("sequence_number", 1).limit(limit)
        return [from_document(d) async for d in cursor]

    async def children(self, decision_id: str, *, current_only: bool = True,
                       limit: int = CHILDREN_READ_MAX) -> list[Decision]:
        """The first `limit` children in sequence order (by children_in_order)."""
        query: dict[str, Any] = {"parent_decision_id": decision_id}
        if current_only:
            query["superseded_by"] = None
        cursor = self._decisions.find(query).sort("sequence_number", 1).limit(limit)
        return [from_document(d) async for d in cursor]

    async def count_children(self, decision_id: str, *, current_only: bool = True) -> int:
        query: dict[str, Any] = {"parent_decision_id": decision_id}
        if current_only:
            query["superseded_by"] = None
        return await self._decisions.count_documents(query)

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

    async def delete(self, decision_id: str) -> None:
        """Hard-delete one decision, unless a correction attempt names it (RESTRICT).

        The check and the delete share a transaction, so an attempt created meanwhile
        either sees the decision or makes the delete fail; never an orphaned attempt.
        """
        await run_in_transaction(self._client, lambda s: self._delete(decision_id, s))

    async def _delete(self, decision_id: str, s: AsyncClientSession) -> None:
        naming = [a["_id"] async for a in self._attempts.find(
            {"$or": [{"original_decision_id": decision_id}, {"new_decision_id": decision_id}]},
            {"_id": 1}, session=s)]
        if naming:
            raise RestrictViolation(f"decision {decision_id}", naming)
        res = await self._decisions.delete_one({"_id": decision_id}, session=s)
        if res.deleted_count != 1:
            raise ResourceNotFoundError("decision", decision_id)
