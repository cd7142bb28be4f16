"""The webhooks in a worker: one dispatcher per event stream and the delivery loop.

Each dispatcher reads its stream's events (every event family but the webhooks' own,
contracts.families.dispatched) through the workers' durable `webhooks`, turns each into
one delivery per matching webhook (services.webhooks), and acks after the deliveries
are stored; nothing else waits on it, and it waits on no endpoint. While no webhook is
active it reads nothing and its durable is deleted, so a ledger without webhooks pays
nothing; the first webhook added makes it again, from the events published after
(deliver policy NEW). `webhooks.changed` (any replica's add or remove) makes every
worker reload the subscriptions at once. A dispatch that cannot be stored is retried
after CONSUMER_BACKOFF, at most CONSUMER_MAX_DELIVER times, like any consumer's work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bootstrap.settings import Settings
from contracts.families import STREAMS, dispatched
from contracts.shared.families import Stream
from contracts.webhooks.families import CHANGED, DISPATCHER
from services.ports.publishing import EventPublisher
from services.ports.webhooks import Answer
from services.tasks import stop_tasks, wait_event
from services.webhook_delivery import DeliveryLoop
from services.webhooks import Incoming, WebhookService

log = logging.getLogger(__name__)

BATCH = 100
IDLE = 30.0
"""Seconds between looks for a first webhook while there is none (an add is announced on
`webhooks.changed` at once; this is for an announcement missed while disconnected)."""
REFRESH = 5.0
"""Seconds between looks while there are webhooks (one may be removed elsewhere)."""
ACK_WAIT = 30.0


class LazySender:
    """The HTTP client, made (and httpx imported) at the first delivery: a worker of a
    ledger without webhooks never loads it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._made: Any = None

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        if self._made is None:
            from workers.webhook_http import HttpSender  # noqa: PLC0415  # httpx only if used
            self._made = HttpSender(self._settings.webhooks)
        answer: Answer = await self._made.send(url, body, headers)
        return answer

    async def close(self) -> None:
        if self._made is not None:
            await self._made.close()


class WebhookWorker:
    def __init__(self, nc: Client, service: WebhookService, settings: Settings,
                 owner: str, publisher: EventPublisher) -> None:
        self._nc = nc
        self._js: JetStreamContext = nc.jetstream()
        self._service = service
        self._settings = settings
        self._sender = LazySender(settings)
        self.delivery = DeliveryLoop(service.records, service.sealer, self._sender,
                                     publisher, settings.webhooks, owner=owner)
        self._changed = asyncio.Event()
        self._on = asyncio.Event()
        """Set while at least one webhook is active: nothing reads or polls otherwise."""
        self.delivery.enabled = self._on
        self._tasks: list[asyncio.Task[None]] = []
        self._sub: Subscription | None = None
        self._pulls: dict[str, JetStreamContext.PullSubscription] = {}
        """Each dispatcher's subscription, by stream, while it reads."""

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(CHANGED.everything, cb=self._on_change)
        streams = [s for s in STREAMS if dispatched(s)]
        self._tasks = [asyncio.create_task(self._watch(), name="webhooks-watch")]
        self._tasks += [asyncio.create_task(self._dispatch(s), name=f"webhooks:{s.name}")
                        for s in streams]
        self._tasks.append(asyncio.create_task(self.delivery.run(), name="webhook-deliveries"))

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        await stop_tasks(self._tasks)
        # The dispatchers' subscriptions go too (their durable stays, for the other
        # replicas and the next start). Left open, the connection's drain at shutdown
        # waited on them until its 30 s timeout (DrainTimeoutError): a worker with
        # webhooks took that much longer to stop.
        for pull in self._pulls.values():
            await _unsubscribe(pull)
        self._pulls.clear()
        await self._sender.close()

    async def _on_change(self, _msg: Any) -> None:
        self._service.forget()
        self._changed.set()

    async def _watch(self) -> None:
        """Whether any webhook is active: one look per REFRESH while some are, per IDLE
        while none is, and at once on `webhooks.changed`."""
        while True:
            self._changed.clear()
            try:
                if await self._service.active():
                    self._on.set()
                else:
                    self._on.clear()
            except Exception:
                log.warning("reading the webhooks failed; retrying", exc_info=True)
            await wait_event(self._changed, REFRESH if self._on.is_set() else IDLE)

    async def _dispatch(self, stream: Stream) -> None:
        dropped = False
        while True:
            try:
                if not self._on.is_set():
                    if not dropped:  # also one an earlier run of the workers left
                        await self._drop(stream)
                        dropped = True
                    await self._on.wait()
                    continue
                dropped = False
                pull = self._pulls.get(stream.name)
                if pull is None:
                    pull = self._pulls[stream.name] = await self._bind(stream)
                await self._one_batch(pull)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("webhook dispatch on %s failed; retrying", stream.name,
                            exc_info=True)
                await asyncio.sleep(1.0)

    async def _bind(self, stream: Stream) -> JetStreamContext.PullSubscription:
        s = self._settings
        # A failed dispatch is nak'ed with its own delay (_one_batch), so no BackOff.
        config = ConsumerConfig(
            durable_name=DISPATCHER, deliver_policy=DeliverPolicy.NEW,
            ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT,
            filter_subjects=[f.wildcard for f in dispatched(stream)],
            max_deliver=s.consumer_max_deliver, max_ack_pending=10 * BATCH)
        try:
            await self._js.add_consumer(stream.name, config=config)
        except nats.js.errors.BadRequestError:
            # One left by an earlier version with another configuration: made again.
            await self._js.delete_consumer(stream.name, DISPATCHER)
            await self._js.add_consumer(stream.name, config=config)
        return await self._js.pull_subscribe_bind(durable=DISPATCHER, stream=stream.name)

    async def _drop(self, stream: Stream) -> None:
        """No webhook: stop reading, and delete the durable so nothing piles up."""
        await _unsubscribe(self._pulls.pop(stream.name, None))
        with contextlib.suppress(nats.js.errors.NotFoundError, nats.errors.Error):
            await self._js.delete_consumer(stream.name, DISPATCHER)

    async def _one_batch(self, pull: JetStreamContext.PullSubscription) -> None:
        try:
            msgs = await pull.fetch(BATCH, timeout=1.0)
        except (TimeoutError, nats.errors.TimeoutError):
            return
        events = [Incoming(m.subject, m.data, dict(m.headers or {})) for m in msgs]
        try:
            made = await self._service.dispatch(events)
        except Exception:
            log.warning("storing %d webhook deliveries failed; the events come again",
                        len(msgs), exc_info=True)
            backoff = self._settings.consumer_backoff
            for m in msgs:
                with contextlib.suppress(Exception):
                    n = m.metadata.num_delivered or 1
                    await m.nak(delay=backoff[min(n, len(backoff)) - 1])
            return
        for m in msgs:
            await m.ack()
        if made:
            self.delivery.wake.set()


async def _unsubscribe(pull: JetStreamContext.PullSubscription | None) -> None:
    if pull is not None:
        with contextlib.suppress(Exception):
            await pull.unsubscribe()
