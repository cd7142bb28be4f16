"""Applying an action template to a plan (`agents plan use`), and what became of each
request (`plan_uses`, `_id` = request_id).

The template is set on the plan's document conditionally (root recorded, no other
template) in one transaction with the invariants' version bump, so the recorder's next
batch evaluates the promoted invariants, and two requests naming different templates
cannot both win.
"""

from __future__ import annotations

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.plan_use import PlanUseOutcome
from store.database import PLAN_USES, PLANS, Document
from store.invariants import bump_version
from store.transactions import run_in_transaction
from store.translate import translate_errors


@translate_errors
class PlanUseRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._db = db
        self._coll = db[PLAN_USES]

    async def apply(self, plan_id: str, action_template: str) -> bool:
        """Set the plan's template; False when its root is not recorded or it has
        another template (read inside the transaction)."""
        async def write(s: AsyncClientSession) -> bool:
            res = await self._db[PLANS].update_one(
                {"_id": plan_id, "root_decision_id": {"$ne": None},
                 "action_template": {"$in": [None, action_template]}},
                {"$set": {"action_template": action_template}}, session=s)
            if res.matched_count != 1:
                return False
            if res.modified_count:
                await bump_version(self._db, s)
            return True

        applied: bool = await run_in_transaction(self._db.client, write)
        return applied

    async def get(self, request_id: str) -> PlanUseOutcome | None:
        doc = await self._coll.find_one({"_id": request_id.upper()})
        if doc is None:
            return None
        return PlanUseOutcome.model_validate(
            {**{k: v for k, v in doc.items() if k != "_id"}, "request_id": doc["_id"]})

    async def keep(self, outcome: PlanUseOutcome) -> None:
        """The first outcome of a request stays (a redelivery finds it)."""
        doc = outcome.model_dump(mode="python", exclude={"request_id"})
        await self._coll.update_one({"_id": outcome.request_id}, {"$setOnInsert": doc},
                                    upsert=True)
