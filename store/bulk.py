"""Bulk correction batches, one document each (`bulk_batches`).

Its items are a map keyed by decision ID (in match order), so one item's state is set by
its path (`items.<decision_id>.state`) without array operators. Every write is
conditional on the batch's state, so the database decides a race between a request
loop and a cancel: `claim` marks the next items requested only while the batch is still
REQUESTED, and once a cancel moved it on, no further claim matches. The corrections'
own states are read from their collection (`correction_statuses`): the batch keeps no
copy of them to keep in step.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

from contracts.bulk.model import BulkBatch, BulkItem
from contracts.bulk.states import BatchState, ItemState
from contracts.corrections.states import CorrectionStatus
from store.database import CORRECTIONS, Document, find_by_ids
from store.translate import translate_errors

__all__ = ["BULK_BATCHES", "BulkBatchStore"]

BULK_BATCHES = "bulk_batches"
_ITEM_FIELDS = ("plan_id", "correction_id", "state", "note")


def _document(batch: BulkBatch) -> Document:
    doc = batch.model_dump(mode="python", exclude={"batch_id", "items"})
    doc["_id"] = batch.batch_id
    doc["items"] = {i.decision_id: i.model_dump(mode="python", include=set(_ITEM_FIELDS))
                    for i in batch.items}
    return doc


def _batch(doc: Document) -> BulkBatch:
    items = [{"decision_id": k, **v} for k, v in doc["items"].items()]
    fields = {k: v for k, v in doc.items() if k not in ("_id", "items")}
    return BulkBatch.model_validate(fields | {"batch_id": doc["_id"], "items": items})


def _item_states(items: Iterable[BulkItem]) -> dict[str, Any]:
    return {f"items.{i.decision_id}.state": i.state.value for i in items}


@translate_errors
class BulkBatchStore:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[BULK_BATCHES]
        self._corrections = db[CORRECTIONS]

    async def insert(self, batch: BulkBatch) -> None:
        await self._coll.insert_one(_document(batch))

    async def get(self, batch_id: str) -> BulkBatch | None:
        doc = await self._coll.find_one({"_id": batch_id})
        return None if doc is None else _batch(doc)

    async def recent(self, limit: int, before: str | None = None) -> list[BulkBatch]:
        """Newest first (a batch ID is a ULID), those before `before`."""
        query: dict[str, Any] = {} if before is None else {"_id": {"$lt": before}}
        docs = await self._coll.find(query).sort("_id", DESCENDING).limit(limit).to_list()
        return [_batch(d) for d in docs]

    async def claim(self, batch_id: str, items: Sequence[BulkItem], at: datetime) -> bool:
        """Mark `items` REQUESTED, only while the batch is REQUESTED: False when a
        cancel (or another run) moved it on first, and nothing is marked."""
        done = await self._coll.update_one(
            {"_id": batch_id, "state": BatchState.REQUESTED.value},
            {"$set": {**_item_states(i.model_copy(update={"state": ItemState.REQUESTED})
                                     for i in items), "updated_at": at}})
        return done.modified_count == 1

    async def move(self, batch_id: str, sources: Collection[BatchState], to: BatchState,
                   at: datetime, items: Iterable[BulkItem] = ()) -> bool:
        """Move the batch to `to` from one of `sources`, setting the items' states; False
        when it was in none of them (someone else moved it first)."""
        done = await self._coll.update_one(
            {"_id": batch_id, "state": {"$in": [s.value for s in sources]}},
            {"$set": {**_item_states(items), "state": to.value, "updated_at": at}})
        return done.modified_count == 1

    async def note_items(self, batch_id: str, state: BatchState, items: Iterable[BulkItem],
                         at: datetime) -> bool:
        """Record the items' states (their corrections', read back) while the batch is
        still `state`."""
        changes = _item_states(items)
        if not changes:
            return True
        done = await self._coll.update_one({"_id": batch_id, "state": state.value},
                                           {"$set": {**changes, "updated_at": at}})
        return done.modified_count == 1

    async def correction_statuses(self, correction_ids: Iterable[str]
                                  ) -> dict[str, CorrectionStatus]:
        """The status of each of these corrections that a worker recorded."""
        docs = await find_by_ids(self._corrections, correction_ids, {"status": 1})
        return {d["_id"]: CorrectionStatus(d["status"]) for d in docs}
