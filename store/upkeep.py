"""The records kept beside the tree that never change it: comments on decisions (the
`comments` collection), a plan marked completed or abandoned (its `plans` document),
a dead letter discarded (its `dead_letters` document).

Each write is one conditional statement, so a redelivered command changes nothing and
a race is the database's to settle: a comment is inserted under its own ID; a plan
ends only from the status the caller read (a revert that rolled it back meanwhile
wins, and the caller reads again); a letter is discarded only while not discarded.
"""

from __future__ import annotations

from datetime import datetime

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.decisions.comments import Comment
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from store.database import COMMENTS, DEAD_LETTERS, PLANS, Document
from store.translate import translate_errors


def _comment_doc(c: Comment) -> Document:
    doc = c.model_dump(mode="python", exclude={"comment_id"})
    doc["_id"] = c.comment_id
    return doc


@translate_errors
class UpkeepRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._comments = db[COMMENTS]
        self._plans = db[PLANS]
        self._letters = db[DEAD_LETTERS]

    async def add_comment(self, comment: Comment) -> bool:
        """Store it; False when its ID is taken (a redelivery)."""
        try:
            await self._comments.insert_one(_comment_doc(comment))
        except DuplicateKeyError:
            return False
        return True

    async def end_plan(self, ended: PlanRecord, was: PlanStatus | None) -> bool:
        """Write the ended record's status and who/when/why, only if the plan is still
        in `was` (None: it had no document; a counter-only document counts as active).
        False when it moved meanwhile."""
        fields = {"status": ended.status.value, "ended_as": ended.status.value,
                  "ended_at": ended.ended_at, "ended_by": ended.ended_by,
                  "end_reason": ended.end_reason}
        if was is None:
            try:
                await self._plans.insert_one({"_id": ended.plan_id, "created_at": ended.ended_at,
                                              "epoch": 0, **fields})
            except DuplicateKeyError:
                return False
            return True
        sources: list[str | None] = [was.value]
        if was is PlanStatus.ACTIVE:
            sources.append(None)
        done = await self._plans.update_one(
            {"_id": ended.plan_id, "status": {"$in": sources}}, {"$set": fields})
        return done.matched_count == 1

    async def discard_letter(self, dead_letter_id: str, by: str, at: datetime,
                             reason: str) -> bool:
        """Mark it discarded; False when there is no such letter or it already is."""
        done = await self._letters.update_one(
            {"_id": dead_letter_id, "discarded_at": None},
            {"$set": {"discarded_at": at, "discarded_by": by, "discard_reason": reason}})
        return done.matched_count == 1
