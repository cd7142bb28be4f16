"""Managing webhooks, and turning the ledger's events into deliveries.

An operator adds a webhook (`add`: URL and event patterns checked, secret made and
sealed, subscription and its `webhooks.changed` event written in one transaction, then
published) and removes it (`remove`). The workers' dispatcher hands every event it
reads to `dispatch`, which makes one delivery per matching webhook; the delivery loop
(services.webhook_delivery) sends them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.timestamps import to_utc_ms, utc_now
from contracts.webhooks.matching import check_patterns, matches
from contracts.webhooks.model import (
    Change,
    Delivery,
    DeliveryStatus,
    Webhook,
    WebhookChanged,
    delivery_id,
)
from contracts.webhooks.policy import check_url
from services.outbox import flush
from services.ports.publishing import EventPublisher
from services.ports.records import OutboxRecords
from services.ports.webhooks import Claimed, WebhookRecords
from services.webhook_secrets import Sealer, new_secret

log = logging.getLogger(__name__)

REFRESH_SECONDS = 5.0
"""How stale the dispatcher's list of webhooks may get when no `webhooks.changed`
reaches it (another replica's change is announced, so this is the fallback)."""


class WebhookNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Incoming:
    """An event as the dispatcher read it: its CloudEvents headers and its body."""

    subject: str
    payload: bytes
    headers: Mapping[str, str]


def _time(value: str | None) -> datetime | None:
    """An event's `ce-time`, or None if it has none that parses."""
    if not value:
        return None
    try:
        return to_utc_ms(datetime.fromisoformat(value))
    except (ValueError, OverflowError):
        return None


def _public(url: str) -> str:
    """The URL without its query and fragment (they may hold a token): for events."""
    return url.split("?", 1)[0].split("#", 1)[0]


def changed_event(w: Webhook, change: Change, by: str, at: datetime) -> OutgoingEvent:
    e = WebhookChanged(webhook_id=w.webhook_id, change=change, url=_public(w.url),
                       events=w.events, at=at, by=by)
    return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id, time=at)


class WebhookService:
    def __init__(self, records: WebhookRecords, publisher: EventPublisher,
                 sealer: Sealer, outbox_flush: Callable[[str], Awaitable[None]] | None = None, *,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._records = records
        self._publisher = publisher
        self.sealer = sealer
        self._flush = outbox_flush
        self._clock = clock
        self._active: list[Webhook] = []
        self._loaded_at: float | None = None
        self._lock = asyncio.Lock()

    @property
    def records(self) -> WebhookRecords:
        return self._records

    # --- operators -------------------------------------------------------------------

    async def add(self, url: str, events: Sequence[str], *, by: str,
                  description: str | None = None) -> tuple[Webhook, str]:
        """The new webhook and its secret (the only time the secret is returned).
        RefusedUrl or ValueError for a URL or an event pattern no webhook may have."""
        now = self._clock()
        w = Webhook(webhook_id=new_id(), url=check_url(url.strip()),
                    events=check_patterns(list(events)), description=description,
                    created_at=now, created_by=by)
        secret = new_secret()
        scheme, sealed = self.sealer.seal(secret)
        await self._records.add(w, scheme, sealed, changed_event(w, Change.ADDED, by, now))
        await self._announce(w.webhook_id)
        return w, secret

    async def remove(self, webhook_id: str, *, by: str) -> Webhook:
        now = self._clock()
        done = await self._records.remove(
            webhook_id, now, lambda w: changed_event(w, Change.REMOVED, by, now))
        if done is None:
            raise WebhookNotFound(webhook_id)
        await self._announce(webhook_id)
        return done

    async def _announce(self, webhook_id: str) -> None:
        if self._flush is not None:
            await self._flush(webhook_id)

    async def listed(self, *, removed: bool = False) -> list[Webhook]:
        return await self._records.listed(removed=removed)

    async def deliveries(self, webhook_id: str | None = None,
                         status: DeliveryStatus | None = None,
                         limit: int = 100) -> list[Delivery]:
        return await self._records.deliveries(webhook_id, status, limit)

    # --- the dispatcher --------------------------------------------------------------

    def forget(self) -> None:
        """Reload the active webhooks on the next dispatch (a change was announced)."""
        self._loaded_at = None

    async def active(self) -> list[Webhook]:
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._loaded_at is None or loop.time() - self._loaded_at > REFRESH_SECONDS:
                self._active = await self._records.listed()
                self._loaded_at = loop.time()
            return self._active

    async def dispatch(self, events: Sequence[Incoming]) -> int:
        """One delivery per event and matching webhook; how many were new."""
        hooks = await self.active()
        now = self._clock()
        items: list[Claimed] = []
        for e in events:
            ce_type, ce_id = e.headers.get("ce-type"), e.headers.get("ce-id")
            if not ce_type or not ce_id:
                continue
            at = _time(e.headers.get("ce-time")) or now
            for w in hooks:
                # A webhook gets the events published after it was added, even from a
                # durable that an earlier webhook left behind.
                if matches(w.events, ce_type) and w.created_at <= at:
                    d = Delivery(delivery_id=delivery_id(w.webhook_id, ce_id),
                                 webhook_id=w.webhook_id, event_id=ce_id,
                                 event_type=ce_type, subject=e.subject, created_at=now,
                                 next_at=now)
                    items.append((d, e.payload, dict(e.headers)))
        return await self._records.enqueue(items)


def outbox_flusher(outbox: OutboxRecords, publisher: EventPublisher
                   ) -> Callable[[str], Awaitable[None]]:
    """Publishing a webhook's pending events from the outbox (services.outbox.flush): a
    failure is left to the workers' relay."""
    async def run(key: str) -> None:
        await flush(outbox, publisher, key)
    return run
