"""The invariants collection (their violations are store.violations)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.invariants.errors import DuplicateInvariant
from contracts.invariants.model import Invariant, InvariantScope
from store.database import INVARIANTS, Document
from store.errors import InvariantNotFound
from store.translate import translate_errors


def _inv_to_doc(inv: Invariant) -> Document:
    doc: Document = inv.model_dump(mode="python", exclude={"id"})
    doc["_id"] = inv.id
    return doc


def _inv_from_doc(doc: Document) -> Invariant:
    return Invariant.model_validate({**{k: v for k, v in doc.items() if k != "_id"},
                                     "id": doc["_id"]})


@translate_errors
class InvariantRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[INVARIANTS]

    async def add(self, inv: Invariant) -> None:
        """Raises DuplicateInvariant if one of that name exists at that scope and target."""
        try:
            await self._coll.insert_one(_inv_to_doc(inv))
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
        return _inv_from_doc(doc) if doc else None

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
        found = [_inv_from_doc(d) async for d in self._coll.find(query)]
        return sorted(found, key=lambda i: (i.name, i.scope.value, i.created_at))

    async def remove(self, invariant_id: str) -> Invariant:
        """Delete one invariant; InvariantNotFound if there is none. Its violations stay
        (the audit trail), and an unresolved error among them still blocks its plan."""
        doc = await self._coll.find_one_and_delete({"_id": invariant_id.upper()})
        if doc is None:
            raise InvariantNotFound(invariant_id)
        return _inv_from_doc(doc)

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
        return [_inv_from_doc(d) async for d in self._coll.find({"$or": clauses})]
