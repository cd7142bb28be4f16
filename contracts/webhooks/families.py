"""The webhooks' message families and their stream (contracts.shared.families).

A subscription is written by the operator's process straight to MongoDB (its secret
must never travel on a subject a stream keeps) and announced on `webhooks.changed`,
which the workers listen to so they reload at once; every delivery's end is announced
on `webhooks.deliveries`. The webhooks' dispatcher reads the other streams' events
through a durable of its own on each (`DISPATCHER`, added to every event family by
contracts.families), so a new event family can be subscribed without a line here.
"""

from __future__ import annotations

from contracts.shared.families import Direction, MessageFamily, Stream
from contracts.shared.roles import Publisher, Reader, Role, Via
from contracts.webhooks.model import DeliveryEnded, WebhookChanged

WEBHOOKS = Stream(
    "WEBHOOKS", "webhooks", duplicate_window=600.0,
    description="Webhook subscriptions added and removed, and the end of every delivery.")

DISPATCHER = "webhooks"
"""The durable the workers' dispatcher reads each event stream with (workers.webhooks)."""

CHANGED = MessageFamily(
    "webhooks.changed.{webhook_id}.{change}", WebhookChanged, Direction.EVENT, WEBHOOKS,
    msg_id="webhook:<webhook_id>:<change>", event_type="webhook.{change}",
    about="webhook/{webhook_id}",
    description="A webhook was added or removed by an operator (agents webhook add | "
    "remove, the console). The subscription, its secret and this event are written to "
    "MongoDB in one transaction (the outbox), then published; the event carries no "
    "secret and no query string of the URL.",
    publishers=(
        Publisher(Role.OPERATOR, "agents webhook add (services.webhooks)",
                  subject="webhooks.changed.{webhook_id}.added"),
        Publisher(Role.OPERATOR, "agents webhook remove (services.webhooks)",
                  subject="webhooks.changed.{webhook_id}.removed"),
        Publisher(Role.WORKER, "the outbox relay, when the operator's process died "
                  "before publishing"),
    ),
    readers=(Reader(Role.WORKER, Via.CORE, "the delivery workers reload the "
                    "subscriptions (workers.webhooks)"),
             Reader(Role.OPERATOR, Via.CORE, "the console's live view")))

DELIVERIES = MessageFamily(
    "webhooks.deliveries.{webhook_id}.{outcome}", DeliveryEnded, Direction.EVENT, WEBHOOKS,
    msg_id="delivery:<webhook_id>:<event id>:<outcome>",
    event_type="webhook.delivery.{outcome}", about="webhook/{webhook_id}",
    description="One per delivery that ended: delivered (a 2xx answer) or dead_lettered "
    "(every attempt failed, or its time ran out); with its last attempt. Never "
    "delivered to webhooks themselves.",
    publishers=(Publisher(Role.WORKER, "the delivery workers (workers.webhooks)"),),
    readers=(Reader(Role.SUBSCRIBER, Via.DURABLE, "a subscriber's own durable feed",
                    durable="{consumer}"),
             Reader(Role.OPERATOR, Via.CORE, "the console's live view")))

FAMILIES = (CHANGED, DELIVERIES)
