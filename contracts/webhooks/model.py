"""A webhook subscription, one delivery of one event to it, and the two events the
webhooks announce (a subscription changed; a delivery ended)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid
from contracts.shared.timestamps import UtcTime


class Webhook(Frozen):
    """An HTTP endpoint subscribed to event types. Its signing secret is stored apart
    (store.webhooks) and never part of this record."""

    webhook_id: Ulid
    url: str = Field(description="Where deliveries are POSTed (http or https).")
    events: list[str] = Field(description="Event type patterns (contracts.webhooks.matching).")
    description: str | None = Field(default=None, max_length=500)
    created_at: UtcTime
    created_by: str = Field(max_length=200)
    removed_at: UtcTime | None = None


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"


class WebhookChanged(Frozen):
    """A webhook was added or removed (the workers reload their subscriptions)."""

    webhook_id: Ulid
    change: Change
    url: str = Field(description="The endpoint, without any query string.")
    events: list[str]
    at: UtcTime
    by: str = Field(max_length=200)

    @property
    def msg_id(self) -> str:
        return f"webhook:{self.webhook_id}:{self.change.value}"

    @property
    def subject(self) -> str:
        return f"webhooks.changed.{self.webhook_id}.{self.change.value}"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    """Waiting for its next attempt (the first, or a retry after a failure)."""
    DELIVERED = "delivered"
    """An attempt got a 2xx answer."""
    DEAD_LETTERED = "dead_lettered"
    """Every attempt failed, or its time ran out: no more attempts."""


class Attempt(Frozen):
    """One request and what came of it."""

    at: UtcTime
    status_code: int | None = Field(description="The HTTP status; None: no answer.")
    error: str | None = Field(default=None, max_length=300,
                              description="Why it failed (timeout, refused address, ...).")
    response_excerpt: str | None = Field(default=None, max_length=200)
    seconds: float


class Delivery(Frozen):
    """One event on its way to one webhook."""

    delivery_id: str = Field(description="<webhook_id>:<event id>: one per event and webhook.")
    webhook_id: Ulid
    event_id: str = Field(description="The event's ce-id (its Nats-Msg-Id), sent as "
                          "webhook-id: the same on every attempt, for the receiver to "
                          "deduplicate on.")
    event_type: str
    subject: str
    status: DeliveryStatus = DeliveryStatus.PENDING
    created_at: UtcTime
    next_at: UtcTime
    attempts: list[Attempt] = Field(default_factory=list)
    ended_at: UtcTime | None = None


class DeliveryEnded(Frozen):
    """A delivery's end: delivered, or dead-lettered after its last attempt."""

    delivery_id: str
    webhook_id: Ulid
    event_id: str
    event_type: str
    outcome: DeliveryStatus
    attempts: int
    last: Attempt | None
    at: UtcTime

    @property
    def msg_id(self) -> str:
        return f"delivery:{self.delivery_id}:{self.outcome.value}"

    @property
    def subject(self) -> str:
        return f"webhooks.deliveries.{self.webhook_id}.{self.outcome.value}"


def delivery_id(webhook_id: str, event_id: str) -> str:
    return f"{webhook_id}:{event_id}"


def ended(d: Delivery, at: datetime) -> DeliveryEnded:
    return DeliveryEnded(delivery_id=d.delivery_id, webhook_id=d.webhook_id,
                         event_id=d.event_id, event_type=d.event_type, outcome=d.status,
                         attempts=len(d.attempts), last=d.attempts[-1] if d.attempts else None,
                         at=at)
