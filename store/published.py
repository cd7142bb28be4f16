"""Which events have been published, so a redelivered message publishes nothing new.

The recorder publishes an event with a Nats-Msg-Id, waits for JetStream's ack, then
inserts the ID here. A crash between the two is healed by JetStream's duplicate
window: the redelivered message publishes the same ID again and the server drops it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from store.database import PUBLISHED, Document

DUPLICATE_KEY = 11000


class PublishedEvents:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[PUBLISHED]

    async def published(self, msg_ids: Iterable[str]) -> set[str]:
        ids = list(msg_ids)
        if not ids:
            return set()
        return {d["_id"] async for d in self._coll.find({"_id": {"$in": ids}}, {"_id": 1})}

    async def mark(self, msg_ids: Iterable[str]) -> None:
        docs = [{"_id": i} for i in msg_ids]
        if not docs:
            return
        try:
            await self._coll.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            if any(e.get("code") != DUPLICATE_KEY for e in exc.details.get("writeErrors", [])):
                raise
