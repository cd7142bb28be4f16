"""Sending deliveries: claimed one attempt at a time, signed per Standard Webhooks,
bounded in concurrency, settled by the transition table (contracts.webhooks.delivery).

The loop runs beside the consumers in every worker and never blocks them: a slow or
dead endpoint holds at most `per_endpoint` of this worker's `in_flight` requests, each
bounded by `timeout_seconds`, and the events that made the deliveries were acked when
the deliveries were stored. A worker that dies mid-attempt leaves its claim to expire
(the request's timeout and a margin) and the attempt is made again: receivers
deduplicate on `webhook-id`, the same on every attempt of an event.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from standardwebhooks.webhooks import Webhook as Signer

from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.timestamps import utc_now
from contracts.webhooks.delivery import after_attempt
from contracts.webhooks.model import Attempt, Delivery, DeliveryStatus, Webhook, ended
from contracts.webhooks.policy import WebhookLimits
from services.ports.publishing import EventPublisher
from services.ports.webhooks import Answer, Claimed, Sender, WebhookRecords
from services.tasks import stop_tasks, wait_event
from services.webhook_secrets import Sealer, SecretUnavailable

log = logging.getLogger(__name__)

CLAIM_MARGIN = 30.0
"""Seconds a claim outlives the request's timeout: the settle after it, on a busy store."""
IDLE_POLL = 0.5
"""Seconds between looks for due deliveries when nothing woke the loop."""
TARGET_TTL = 5.0
TARGETS_MAX = 1000
FORWARDED = ("ce-", "traceparent", "tracestate")
"""Event headers sent on: CloudEvents' attributes (HTTP binary mode) and trace context."""


def request_headers(d: Delivery, event_headers: dict[str, str], secret: str, body: str,
                    at: datetime) -> dict[str, str]:
    """Standard Webhooks' three headers, the event's CloudEvents attributes as HTTP
    binary mode has them (`ce-datacontenttype` is the Content-Type), its trace context."""
    out = {k: v for k, v in event_headers.items()
           if k.lower().startswith(FORWARDED) and k.lower() != "ce-datacontenttype"}
    return out | {
        "content-type": "application/json", "user-agent": "decision-ledger-webhooks",
        "webhook-id": d.event_id, "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Signer(secret).sign(d.event_id, at, body)}


class DeliveryLoop:
    def __init__(self, records: WebhookRecords, sealer: Sealer, sender: Sender,
                 publisher: EventPublisher, limits: WebhookLimits, *, owner: str,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._records = records
        self._sealer = sealer
        self._sender = sender
        self._publisher = publisher
        self._limits = limits
        self._owner = owner
        self._clock = clock
        self._per: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._targets: dict[str, tuple[float, Webhook | None, tuple[str, bytes] | None]] = {}
        self.wake = asyncio.Event()
        self.enabled: asyncio.Event | None = None
        """When given: look for due deliveries only while it is set (while any webhook
        is active), so a ledger without webhooks never polls for them."""

    async def run(self) -> None:
        """Until cancelled: start what is due, then wait for a wake-up or the poll."""
        try:
            while True:
                if self.enabled is not None and not self.enabled.is_set():
                    await self.enabled.wait()
                try:
                    await self.fill()
                except Exception:
                    log.warning("looking for due webhook deliveries failed; retrying",
                                exc_info=True)
                self.wake.clear()
                await wait_event(self.wake, IDLE_POLL)
        finally:
            await self.stop()

    async def stop(self) -> None:
        await stop_tasks(self._tasks)

    async def fill(self) -> int:
        """Claim and start due deliveries while this worker has room."""
        started = 0
        while len(self._tasks) < self._limits.in_flight:
            now = self._clock()
            busy = [w for w, n in self._per.items() if n >= self._limits.per_endpoint]
            until = now + timedelta(seconds=self._limits.timeout_seconds + CLAIM_MARGIN)
            claimed = await self._records.claim(now, until, self._owner, busy)
            if claimed is None:
                break
            self._start(claimed)
            started += 1
        return started

    def _start(self, claimed: Claimed) -> None:
        wid = claimed[0].webhook_id
        self._per[wid] += 1
        task = asyncio.create_task(self._attempt(claimed), name=f"webhook:{wid}")
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._per[wid] -= 1
            if self._per[wid] <= 0:
                del self._per[wid]
            self.wake.set()  # room for another
        task.add_done_callback(done)

    async def _attempt(self, claimed: Claimed) -> None:
        d, payload, headers = claimed
        try:
            answer = await self._send(d, payload, headers)
            at = self._clock()
            attempt = Attempt(at=at, status_code=answer.status_code, error=answer.error,
                              response_excerpt=answer.excerpt, seconds=answer.seconds)
            after = after_attempt(d, attempt, self._limits, retryable=answer.retryable)
            if await self._records.settle(after, self._owner) \
                    and after.status is not DeliveryStatus.PENDING:
                await self._announce(after, at)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("webhook delivery %s: the attempt could not be settled; its claim "
                        "expires and it is made again", d.delivery_id, exc_info=True)

    async def _target(self, webhook_id: str) -> tuple[Webhook | None, tuple[str, bytes] | None]:
        """The webhook and its stored secret, read at most every TARGET_TTL seconds (a
        removed webhook stops being sent to within that)."""
        now = asyncio.get_running_loop().time()
        held = self._targets.get(webhook_id)
        if held is None or held[0] < now:
            found = (await self._records.get(webhook_id), await self._records.secret(webhook_id))
            self._targets[webhook_id] = held = (now + TARGET_TTL, *found)
            if len(self._targets) > TARGETS_MAX:
                self._targets.pop(next(iter(self._targets)))
        return held[1], held[2]

    async def _send(self, d: Delivery, payload: bytes, headers: dict[str, str]) -> Answer:
        webhook, stored = await self._target(d.webhook_id)
        if webhook is None or webhook.removed_at is not None or stored is None:
            return Answer(None, "the webhook was removed", None, 0.0, retryable=False)
        try:
            secret = self._sealer.open(*stored)
            body = payload.decode("utf-8")
        except (SecretUnavailable, UnicodeDecodeError) as exc:
            return Answer(None, str(exc)[:300], None, 0.0, retryable=False)
        signed = request_headers(d, headers, secret, body, self._clock())
        return await self._sender.send(webhook.url, payload, signed)

    async def _announce(self, d: Delivery, at: datetime) -> None:
        e = ended(d, at)
        try:
            await self._publisher.publish_all([OutgoingEvent(
                e.subject, e.model_dump_json().encode(), e.msg_id, time=at)])
        except Exception:
            log.warning("announcing the end of webhook delivery %s failed; its record "
                        "says it (agents webhook deliveries)", d.delivery_id, exc_info=True)
