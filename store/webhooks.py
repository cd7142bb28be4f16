"""Webhook subscriptions, their signing secrets and their deliveries, in MongoDB.

A subscription, its secret and the event announcing it are written in one transaction
with the outbox (store.outbox, keyed by webhook_id), like a violation's resolution. The
secret lives in its own collection, read only by the delivery workers to sign
(`secret`), never by a listing. A delivery is claimed by one worker for one attempt
(`claim`: a conditional update, so two replicas never send the same attempt) and
settled by the same worker (`settle`, conditional on its claim); a worker that died
mid-attempt leaves a claim that expires, and the attempt is made again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from contracts.shared.outgoing import OutgoingEvent
from contracts.webhooks.model import Delivery, DeliveryStatus, Webhook
from store.database import Document
from store.outbox import OutboxRepository
from store.transactions import run_in_transaction
from store.translate import translate_errors

__all__ = ["Claimed", "WebhookStore"]

WEBHOOKS = "webhooks"
SECRETS = "webhook_secrets"
DELIVERIES = "webhook_deliveries"
NEVER = datetime(1970, 1, 1, tzinfo=UTC)
ADDED_VERSION, REMOVED_VERSION = 1, 2
"""The outbox order of a webhook's two events."""
_HIDDEN = {"payload": 0, "headers": 0, "claimed_by": 0, "claimed_until": 0}
"""What a listing leaves out (the event itself, and the claim)."""
_NOT_FIELDS = {*_HIDDEN, "_id"}

Claimed = tuple[Delivery, bytes, dict[str, str]]
"""A delivery claimed for one attempt, with the event's body and headers."""


def _webhook(doc: Document) -> Webhook:
    return Webhook.model_validate({k: v for k, v in doc.items() if k != "_id"}
                                  | {"webhook_id": doc["_id"]})


def _delivery(doc: Document) -> Delivery:
    return Delivery.model_validate({k: v for k, v in doc.items() if k not in _NOT_FIELDS}
                                   | {"delivery_id": doc["_id"]})


@translate_errors
class WebhookStore:
    def __init__(self, db: AsyncDatabase[Document]) -> None:
        self._client = db.client
        self._hooks = db[WEBHOOKS]
        self._secrets = db[SECRETS]
        self._deliveries = db[DELIVERIES]
        self._outbox = OutboxRepository(db)

    async def ensure_indexes(self) -> None:
        await self._deliveries.create_index([("status", ASCENDING), ("next_at", ASCENDING)])
        await self._deliveries.create_index([("webhook_id", ASCENDING),
                                             ("created_at", DESCENDING)])

    # --- subscriptions ---------------------------------------------------------------

    async def add(self, webhook: Webhook, scheme: str, sealed: bytes,
                  event: OutgoingEvent) -> None:
        doc = webhook.model_dump(exclude={"webhook_id"}) | {"_id": webhook.webhook_id}

        async def write(s: AsyncClientSession) -> None:
            await self._hooks.insert_one(doc, session=s)
            await self._secrets.insert_one({"_id": webhook.webhook_id, "scheme": scheme,
                                            "sealed": sealed}, session=s)
            await self._outbox.add(webhook.webhook_id, ADDED_VERSION, [event],
                                   webhook.created_at, s)

        await run_in_transaction(self._client, write)

    async def remove(self, webhook_id: str, at: datetime,
                     event_for: Any) -> Webhook | None:
        """Mark removed, with its event (`event_for(webhook)`), in one transaction; None
        if there is no such webhook or it was removed already."""
        async def write(s: AsyncClientSession) -> Webhook | None:
            doc = await self._hooks.find_one_and_update(
                {"_id": webhook_id, "removed_at": None}, {"$set": {"removed_at": at}},
                return_document=ReturnDocument.AFTER, session=s)
            if doc is None:
                return None
            done = _webhook(doc)
            await self._secrets.delete_one({"_id": webhook_id}, session=s)
            await self._outbox.add(webhook_id, REMOVED_VERSION, [event_for(done)], at, s)
            return done

        removed: Webhook | None = await run_in_transaction(self._client, write)
        return removed

    async def get(self, webhook_id: str) -> Webhook | None:
        doc = await self._hooks.find_one({"_id": webhook_id})
        return _webhook(doc) if doc else None

    async def listed(self, *, removed: bool = False, limit: int = 1000) -> list[Webhook]:
        query: dict[str, Any] = {} if removed else {"removed_at": None}
        cursor = self._hooks.find(query).sort("created_at", ASCENDING).limit(limit)
        return [_webhook(d) async for d in cursor]

    async def secret(self, webhook_id: str) -> tuple[str, bytes] | None:
        """How the webhook's secret is stored and the stored bytes (for signing only)."""
        doc = await self._secrets.find_one({"_id": webhook_id})
        return (str(doc["scheme"]), bytes(doc["sealed"])) if doc else None

    # --- deliveries ------------------------------------------------------------------

    async def enqueue(self, items: Sequence[Claimed]) -> int:
        """Store new deliveries; one already stored (a redelivered event) is left as
        it is. Returns how many were new."""
        if not items:
            return 0
        docs = [d.model_dump(exclude={"delivery_id"}) | {
            "_id": d.delivery_id, "payload": payload, "headers": headers,
            "claimed_until": NEVER} for d, payload, headers in items]
        try:
            result = await self._deliveries.insert_many(docs, ordered=False)
            return len(result.inserted_ids)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors") or []
            if any(e.get("code") != 11000 for e in errors):
                raise
            return int(exc.details.get("nInserted", 0))

    async def claim(self, now: datetime, until: datetime, owner: str,
                    busy: Sequence[str] = ()) -> Claimed | None:
        """The oldest due delivery of a webhook not in `busy`, claimed until `until`."""
        query: dict[str, Any] = {"status": DeliveryStatus.PENDING.value,
                                 "next_at": {"$lte": now}, "claimed_until": {"$lte": now}}
        if busy:
            query["webhook_id"] = {"$nin": list(busy)}
        doc = await self._deliveries.find_one_and_update(
            query, {"$set": {"claimed_until": until, "claimed_by": owner}},
            sort=[("next_at", ASCENDING)], return_document=ReturnDocument.AFTER)
        if doc is None:
            return None
        headers = {str(k): str(v) for k, v in (doc.get("headers") or {}).items()}
        return _delivery(doc), bytes(doc["payload"]), headers

    async def settle(self, d: Delivery, owner: str) -> bool:
        """Record an attempt's outcome, if `owner` still holds the claim."""
        result = await self._deliveries.update_one(
            {"_id": d.delivery_id, "claimed_by": owner,
             "status": DeliveryStatus.PENDING.value},
            {"$set": {"status": d.status.value, "next_at": d.next_at,
                      "attempts": [a.model_dump() for a in d.attempts],
                      "ended_at": d.ended_at, "claimed_until": NEVER}})
        return result.modified_count == 1

    async def deliveries(self, webhook_id: str | None = None,
                         status: DeliveryStatus | None = None,
                         limit: int = 100) -> list[Delivery]:
        """Newest first."""
        query: dict[str, Any] = {}
        if webhook_id is not None:
            query["webhook_id"] = webhook_id
        if status is not None:
            query["status"] = status.value
        cursor = self._deliveries.find(query, _HIDDEN).sort("created_at", DESCENDING) \
            .limit(limit)
        return [_delivery(d) async for d in cursor]

    async def count_pending(self) -> int:
        return await self._deliveries.count_documents(
            {"status": DeliveryStatus.PENDING.value})
