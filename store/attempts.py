"""The correction_attempts collection, with the specified repository API and its rules.

The specification (ADR 0001) backs this with SQL foreign keys; MongoDB has none, so the
rules are checked here: `create` refuses an attempt whose correction or original
decision does not exist (ForeignKeyViolation, the specified DatabaseError), and the
RESTRICT side (a decision named by an attempt cannot be deleted) is enforced by
`DecisionRepository.delete`. Deleting a plan deletes its attempts
(`PlanRepository.delete`), as the specified cascade does.
"""

from __future__ import annotations

from datetime import datetime

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.states import ATTEMPT_LIFECYCLE, CorrectionAttemptState
from contracts.shared.timestamps import utc_now
from store.database import CORRECTION_ATTEMPTS, CORRECTIONS, DECISIONS, Document
from store.errors import ConcurrentChange, ForeignKeyViolation, ResourceNotFoundError
from store.translate import translate_errors


def to_document(attempt: CorrectionAttemptRecord) -> Document:
    doc: Document = attempt.model_dump(mode="python", exclude={"id"})
    doc["_id"] = attempt.id
    return doc


def from_document(doc: Document) -> CorrectionAttemptRecord:
    fields = {k: v for k, v in doc.items() if k != "_id"}
    return CorrectionAttemptRecord.model_validate({**fields, "id": doc["_id"]})


@translate_errors
class CorrectionAttemptRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[CORRECTION_ATTEMPTS]
        self._corrections = db[CORRECTIONS]
        self._decisions = db[DECISIONS]

    # --- the specified API (ADR 0001) ----------------------------------------------

    async def create(self, record: CorrectionAttemptRecord,
                     session: AsyncClientSession | None = None) -> CorrectionAttemptRecord:
        """Persist a new attempt; ForeignKeyViolation if what it names does not exist."""
        await self._check_references(record, session)
        await self._coll.insert_one(to_document(record), session=session)
        return record

    async def get(self, attempt_id: str) -> CorrectionAttemptRecord:
        doc = await self._coll.find_one({"_id": attempt_id})
        if doc is None:
            raise ResourceNotFoundError("correction attempt", attempt_id)
        return from_document(doc)

    async def list_by_plan(self, plan_id: str) -> list[CorrectionAttemptRecord]:
        cursor = self._coll.find({"plan_id": plan_id}).sort([("created_at", 1), ("_id", 1)])
        return [from_document(d) async for d in cursor]

    async def list_by_correction(self, correction_id: str) -> list[CorrectionAttemptRecord]:
        cursor = self._coll.find({"correction_id": correction_id}).sort(
            [("created_at", 1), ("_id", 1)])
        return [from_document(d) async for d in cursor]

    async def update_state(
        self, attempt_id: str, new_state: CorrectionAttemptState, *,
        new_decision_id: str | None = None, completed_at: datetime | None = None,
        archived_artifacts_path: str | None = None,
        session: AsyncClientSession | None = None,
    ) -> CorrectionAttemptRecord:
        """Move an attempt along its lifecycle (IllegalTransition otherwise); completed_at is
        set automatically when the new state is terminal (now, unless given)."""
        current = await self._coll.find_one({"_id": attempt_id}, session=session)
        if current is None:
            raise ResourceNotFoundError("correction attempt", attempt_id)
        before = from_document(current)
        at = completed_at or utc_now()
        after = before.transition(new_state, at, new_decision_id=new_decision_id,
                                  archived_artifacts_path=archived_artifacts_path)
        if new_decision_id is not None:
            await self._require(self._decisions, new_decision_id, "new_decision_id", session)
        await self.replace(before.state, after, session)
        return after

    async def delete(self, attempt_id: str) -> None:
        res = await self._coll.delete_one({"_id": attempt_id})
        if res.deleted_count != 1:
            raise ResourceNotFoundError("correction attempt", attempt_id)

    # --- for the correction transaction and the RESTRICT rule -----------------------

    async def replace(self, expected: CorrectionAttemptState, after: CorrectionAttemptRecord,
                      session: AsyncClientSession | None) -> None:
        """Write `after` only if the stored attempt is still in state `expected`."""
        ATTEMPT_LIFECYCLE.check(expected, after.state)
        res = await self._coll.replace_one({"_id": after.id, "state": expected.value},
                                           to_document(after), session=session)
        if res.matched_count != 1:
            raise ConcurrentChange(f"attempt {after.id} is no longer {expected.value}")

    async def _check_references(self, record: CorrectionAttemptRecord,
                                session: AsyncClientSession | None) -> None:
        await self._require(self._corrections, record.correction_id, "correction_id", session)
        await self._require(self._decisions, record.original_decision_id,
                            "original_decision_id", session)
        if record.new_decision_id is not None:
            await self._require(self._decisions, record.new_decision_id, "new_decision_id",
                                session)

    @staticmethod
    async def _require(coll: AsyncCollection[Document], record_id: str, field: str,
                       session: AsyncClientSession | None) -> None:
        found = await coll.find_one({"_id": record_id}, {"_id": 1}, session=session)
        if found is None:
            raise ForeignKeyViolation("correction attempt", field, record_id)
