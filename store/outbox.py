"""The transactional outbox: events written in the same transaction as the change they
announce, published after the commit, deleted once JetStream has them.

A process that dies between commit and publish leaves its events here; whoever flushes
next (the same correction's next step, a cancel, or the relay) publishes them under
their fixed Nats-Msg-Id, so JetStream keeps exactly one copy. Flushing always takes
*every* pending event of a correction in `order`, which is what keeps a correction's
events in lifecycle order in the stream even when two processes flush at once.

A row is keyed by its source: a correction_id or a violation_id. The stored field keeps
its first name, `correction_id`, so rows written before the name changed still flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.outgoing import OutgoingEvent, Pending
from store.database import ID_CHUNK, OUTBOX, Document
from store.translate import translate_errors

__all__ = ["ORDER_STRIDE", "OutboxRepository"]

ORDER_STRIDE = 1000
"""Events of one transaction are ordered version * ORDER_STRIDE + index."""


def _from_doc(doc: Document) -> Pending:
    headers = tuple((str(k), str(v)) for k, v in (doc.get("headers") or {}).items())
    return Pending(doc["correction_id"], int(doc["order"]),
                   OutgoingEvent(doc["subject"], bytes(doc["payload"]), doc["_id"], headers,
                                 time=doc.get("created_at")))


@translate_errors
class OutboxRepository:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._coll = db[OUTBOX]

    async def add(self, source_id: str, version: int, messages: Sequence[OutgoingEvent],
                  now: datetime, session: AsyncClientSession) -> None:
        if not messages:
            return
        await self._coll.insert_many([
            {"_id": m.msg_id, "correction_id": source_id,
             "order": version * ORDER_STRIDE + i, "subject": m.subject, "payload": m.payload,
             "created_at": now, **({"headers": dict(m.headers)} if m.headers else {})}
            for i, m in enumerate(messages)], session=session)

    async def pending_for(self, source_id: str) -> list[Pending]:
        cursor = self._coll.find({"correction_id": source_id}).sort("order", 1)
        return [_from_doc(d) async for d in cursor]

    async def pending(self, created_before: datetime | None = None,
                      limit: int = 1000) -> list[Pending]:
        """Everything left behind (oldest first), for the relay."""
        query: dict[str, Any] = {}
        if created_before is not None:
            query["created_at"] = {"$lt": created_before}
        cursor = self._coll.find(query).sort([("created_at", 1), ("order", 1)]).limit(limit)
        return [_from_doc(d) async for d in cursor]

    async def delete(self, msg_ids: Sequence[str]) -> None:
        for i in range(0, len(msg_ids), ID_CHUNK):
            await self._coll.delete_many({"_id": {"$in": list(msg_ids[i:i + ID_CHUNK])}})

    async def count(self) -> int:
        return await self._coll.count_documents({})
