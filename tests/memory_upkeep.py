"""The in-memory store's upkeep records (services/ports/upkeep.py), as store/upkeep.py
keeps them: comments under their own ID, a plan ended only from the status read, a dead
letter discarded once."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from contracts.decisions.comments import Comment
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord

if TYPE_CHECKING:
    from tests.memory_store import Database, State


class MemoryUpkeep:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add_comment(self, comment: Comment) -> bool:
        def write(st: State) -> bool:
            if comment.comment_id in st.comments:
                return False
            st.comments[comment.comment_id] = comment
            return True
        return self._db.transaction(write)

    async def end_plan(self, ended: PlanRecord, was: PlanStatus | None) -> bool:
        def write(st: State) -> bool:
            doc = st.plan_doc(ended.plan_id)
            if (doc is None) != (was is None):
                return False
            if doc is not None and PlanStatus(doc.get("status", "active")) is not was:
                return False
            fields = {"status": ended.status.value, "ended_as": ended.status.value,
                      "ended_at": ended.ended_at, "ended_by": ended.ended_by,
                      "end_reason": ended.end_reason}
            st.plans[ended.plan_id] = {**(doc or {"created_at": ended.ended_at}), **fields}
            return True
        return self._db.transaction(write)

    async def discard_letter(self, dead_letter_id: str, by: str, at: datetime,
                             reason: str) -> bool:
        def write(st: State) -> bool:
            letter = st.dead_letters.get(dead_letter_id)
            if letter is None or letter.discarded_at is not None:
                return False
            st.dead_letters[dead_letter_id] = letter.model_copy(update={
                "discarded_at": at, "discarded_by": by, "discard_reason": reason})
            return True
        return self._db.transaction(write)
