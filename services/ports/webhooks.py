"""What the webhook services need of the store (store.webhooks) and of HTTP."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from contracts.shared.outgoing import OutgoingEvent
from contracts.webhooks.model import Delivery, DeliveryStatus, Webhook

Claimed = tuple[Delivery, bytes, dict[str, str]]


class WebhookRecords(Protocol):
    async def add(self, webhook: Webhook, scheme: str, sealed: bytes,
                  event: OutgoingEvent) -> None: ...

    async def remove(self, webhook_id: str, at: datetime,
                     event_for: Callable[[Webhook], OutgoingEvent]) -> Webhook | None: ...

    async def get(self, webhook_id: str) -> Webhook | None: ...

    async def listed(self, *, removed: bool = False, limit: int = 1000) -> list[Webhook]: ...

    async def secret(self, webhook_id: str) -> tuple[str, bytes] | None: ...

    async def enqueue(self, items: Sequence[Claimed]) -> int: ...

    async def claim(self, now: datetime, until: datetime, owner: str,
                    busy: Sequence[str] = ()) -> Claimed | None: ...

    async def settle(self, d: Delivery, owner: str) -> bool: ...

    async def deliveries(self, webhook_id: str | None = None,
                         status: DeliveryStatus | None = None,
                         limit: int = 100) -> list[Delivery]: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """What one HTTP request came to."""

    status_code: int | None
    error: str | None
    excerpt: str | None
    seconds: float
    retryable: bool = True
    """False: no later attempt can fare better (the address is not allowed)."""


class Sender(Protocol):
    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer: ...
