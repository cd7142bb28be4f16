"""The invariants collection (their violations are store.violations)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.invariants.errors import DuplicateInvariant
from contracts.invariants.model import Invariant, InvariantScope
from store.database import INVARIANT_VERSIONS, INVARIANTS, Document
from store.errors import InvariantNotFound
from store.transactions import run_in_transaction
from store.translate import translate_errors

VERSION_ID = "invariants"
"""The one document of `invariant_versions`: its `version` moves with every change of
what is in force, so the recorder's gate (store.gate_source) reloads only then."""


async def bump_version(db: AsyncDatabase[Document],
                       session: AsyncClientSession | None = None) -> None:
    """Every change of what is in force calls this in its write's transaction: the next
    batch the recorder reads sees the change, and a change is never seen without it."""
    await db[INVARIANT_VERSIONS].update_one({"_id": VERSION_ID}, {"$inc": {"version": 1}},
                                            upsert=True, session=session)


def _inv_to_doc(inv: Invariant) -> Document:
    doc: Document = inv.model_dump(mode="python", exclude={"id"})
    doc["_id"] = inv.id
    return doc


def invariant_from_document(doc: Document) -> Invariant:
    return Invariant.model_validate({**{k: v for k, v in doc.items() if k != "_id"},
                                     "id": doc["_id"]})


@translate_errors
class InvariantRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._coll = db[INVARIANTS]

    async def add(self, inv: Invariant) -> None:
        """Raises DuplicateInvariant if one of that name exists at that scope and target."""
        try:
            async def write(s: AsyncClientSession) -> None:
                await self._coll.insert_one(_inv_to_doc(inv), session=s)
                await bump_version(self._db, s)

            await run_in_transaction(self._db.client, write)
        except DuplicateKeyError:
            held = await self._coll.find_one(
                {"name": inv.name, "scope": inv.scope.value, "scope_target": inv.scope_target},
                {"_id": 1})
            if held is not None and held["_id"] == inv.id:
                return  # the same invariant added again (a retry)
            raise DuplicateInvariant(inv.name, inv.scope, inv.scope_target,
                                     held["_id"] if held else None) from None

    async def get(self, invariant_id: str) -> Invariant | None:
        doc = await self._coll.find_one({"_id": invariant_id.upper()})
        return invariant_from_document(doc) if doc else None

    async def require(self, invariant_id: str) -> Invariant:
        inv = await self.get(invariant_id)
        if inv is None:
            raise InvariantNotFound(invariant_id)
        return inv

    async def find(self, scope: InvariantScope | None = None,
                   scope_target: str | None = None) -> list[Invariant]:
        query: dict[str, Any] = {}
        if scope is not None:
            query["scope"] = scope.value
        if scope_target is not None:
            query["scope_target"] = scope_target
        found = [invariant_from_document(d) async for d in self._coll.find(query)]
        return sorted(found, key=lambda i: (i.name, i.scope.value, i.created_at))

    async def remove(self, invariant_id: str) -> Invariant:
        """Delete one invariant; InvariantNotFound if there is none. Its violations stay
        (the audit trail), and an unresolved error among them still blocks its plan."""
        async def write(s: AsyncClientSession) -> Document | None:
            doc: Document | None = await self._coll.find_one_and_delete(
                {"_id": invariant_id.upper()}, session=s)
            if doc is not None:
                await bump_version(self._db, s)
            return doc

        doc = await run_in_transaction(self._db.client, write)
        if doc is None:
            raise InvariantNotFound(invariant_id)
        return invariant_from_document(doc)

    async def inputs_for(self, plan_ids: Iterable[str] = (), projects: Iterable[str] = (),
                         action_templates: Iterable[str] = ()) -> list[Invariant]:
        """Every invariant that could bind any of these plans, in one query: GLOBAL, and
        PLAN / PROJECT / ACTION ones whose target is named. `effective_invariants` picks
        per plan."""
        clauses: list[Document] = [{"scope": InvariantScope.GLOBAL.value}]
        for scope, targets in ((InvariantScope.PLAN, [p.upper() for p in plan_ids]),
                               (InvariantScope.PROJECT, list(projects)),
                               (InvariantScope.ACTION, list(action_templates))):
            unique = list(dict.fromkeys(targets))
            if unique:
                clauses.append({"scope": scope.value, "scope_target": {"$in": unique}})
        return [invariant_from_document(d) async for d in self._coll.find({"$or": clauses})]
