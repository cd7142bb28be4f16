"""The dead_letters collection: rejected messages, kept with their reasons.

Each document is at most `contracts.shared.bounds.DEAD_LETTER_MAX_BYTES` (the model cuts a
hostile message to size), so keeping a batch's rejections cannot fail on its size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from contracts.redaction.letters import redact_letter
from contracts.redaction.rules import Rules
from contracts.shared.dead_letter import DeadLetter
from store.database import DEAD_LETTERS, Document
from store.translate import translate_errors

DUPLICATE_KEY = 11000


def _to_doc(dl: DeadLetter) -> Document:
    doc = dl.model_dump(mode="python", exclude={"id", "errors", "truncated"})
    doc["_id"] = dl.id
    doc["truncated"] = [t.value for t in dl.truncated]
    doc["errors"] = [e.model_dump(mode="json") for e in dl.errors]
    return doc


def _from_doc(doc: Document) -> DeadLetter:
    fields = {k: v for k, v in doc.items() if k != "_id"}
    return DeadLetter.model_validate({**fields, "id": doc["_id"]})


@translate_errors
class DeadLetterRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[DEAD_LETTERS]
        self.redaction = Rules()
        """What is redacted from a payload before it is kept (open_ledger sets the
        settings'): every path that keeps a letter comes through `keep`."""

    async def keep(self, letters: Sequence[DeadLetter]) -> None:
        """Insert all, each payload redacted; one already kept (a redelivery) is left as
        it was."""
        if not letters:
            return
        docs = [_to_doc(redact_letter(self.redaction, dl)) for dl in letters]
        try:
            await self._coll.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            if any(e.get("code") != DUPLICATE_KEY for e in exc.details.get("writeErrors", [])):
                raise

    async def get(self, dead_letter_id: str) -> DeadLetter | None:
        doc = await self._coll.find_one({"_id": dead_letter_id})
        return _from_doc(doc) if doc else None

    async def list(self, plan_id: str | None = None, limit: int = 100, *,
                   rule: str | None = None, discarded: bool = False) -> list[DeadLetter]:
        """Newest first: those kept (or, `discarded`, those discarded), of a plan, whose
        first reason is `rule`."""
        query: dict[str, Any] = {"discarded_at": {"$ne": None} if discarded else None}
        if plan_id:
            query["plan_id"] = plan_id
        if rule:
            query["errors.0.rule"] = rule
        cursor = self._coll.find(query).sort("rejected_at", -1).limit(limit)
        return [_from_doc(d) async for d in cursor]

    async def delete(self, dead_letter_id: str) -> bool:
        res = await self._coll.delete_one({"_id": dead_letter_id})
        return res.deleted_count == 1
