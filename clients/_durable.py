"""A durable JetStream pull consumer with bounded retries: what every client feed shares.

The subscriber's outcome feed and the runtime's resume feed both need the same things:
a durable that outlives the process (the server remembers what was acknowledged, so
what was published while the client was down is delivered when it comes back), a
retry that ends (MaxDeliver and a BackOff, then an ERROR naming the message), and a
poll that never gives up while the server is quiet. One implementation, here.

A durable reads one filter and is created by its name with that filter in the create
subject (`$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>`): that is how the generated
permissions let a principal create only its own durables, reading only their family
(deploy.grants; the server refuses a body whose filter differs from the subject's).
What the pull delivers is checked before it is read (clients._feed_guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from clients._feed_guard import FeedGuard, subject_matches

log = logging.getLogger("clients")

MAX_DELIVER = 10
"""Deliveries of one message before the server gives up on it (then logged as an ERROR)."""
BACKOFF: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds before a message whose handler raised comes back, by failure count."""
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


@dataclass(frozen=True, slots=True)
class DurableSpec:
    """Which messages a durable reads, and how it retries them."""

    stream: str
    durable: str
    filter_subject: str
    ack_wait: float = 60.0
    from_start: bool = False
    max_deliver: int = MAX_DELIVER
    backoff: Sequence[float] = BACKOFF

    def config(self) -> ConsumerConfig:
        backoff = tuple(self.backoff) or BACKOFF
        # `name` too: nats-py then puts the filter in the create subject.
        return ConsumerConfig(
            name=self.durable, durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            deliver_policy=DeliverPolicy.ALL if self.from_start else DeliverPolicy.NEW,
            filter_subject=self.filter_subject, max_deliver=self.max_deliver,
            # JetStream takes the first value as the ack wait; fewer values than MaxDeliver.
            backoff=[max(self.ack_wait, b) for b in backoff][:max(1, self.max_deliver - 1)])

    def delay(self, msg: Msg) -> float:
        """Seconds before `msg` comes back after its `n`th failed delivery."""
        backoff = tuple(self.backoff) or BACKOFF
        try:
            n = msg.metadata.num_delivered
        except Exception:
            n = 1
        return backoff[min(max(n, 1), len(backoff)) - 1]


class DurablePull:
    """The durable's pull subscription, opened once and closed with `close`."""

    def __init__(self, nc: Client, spec: DurableSpec) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self.spec = spec
        self._sub: Any = None
        self._advisory: Any = None
        self.guard = FeedGuard(f"durable {spec.durable}", [spec.filter_subject], spec.stream,
                               spec.durable)
        self.closing = False
        """Set by whoever stops the reader, before cancelling it."""

    async def open(self) -> None:
        """Create (or reuse) the durable consumer; from here on nothing published is missed."""
        if self._sub is not None:
            return
        spec = self.spec
        try:
            info = await self._js.consumer_info(spec.stream, spec.durable)
        except NotFoundError:
            pass
        else:
            # Another feed's durable must not be repointed under it; one that reads a
            # part of what this feed reads (an older feed of the same name) is widened.
            existing = list(info.config.filter_subjects or [info.config.filter_subject or ""])
            if not all(subject_matches(spec.filter_subject, e) for e in existing):
                raise ValueError(
                    f"durable {spec.durable!r} already reads {sorted(existing)}, not "
                    f"{spec.filter_subject}: stop the feed that uses it (delete it when its "
                    "plan is done), or pick another durable name")
        # Creates the durable, or brings an existing one to these settings.
        await self._js.add_consumer(spec.stream, spec.config())
        self._advisory = await self._nc.subscribe(
            f"{MAX_DELIVERIES_ADVISORY}.{spec.stream}.{spec.durable}", cb=self._exhausted)
        self._sub = await self._js.pull_subscribe_bind(durable=spec.durable, stream=spec.stream)

    async def next(self, poll_timeout: float = 5.0) -> Msg:
        """The next message; waits as long as it takes (each pull lasts `poll_timeout`),
        or until `closing` is set (then CancelledError: a cancellation that an awaited
        call swallowed, as asyncio.wait_for can before Python 3.12, still ends the wait)."""
        await self.open()
        while True:
            if self.closing:
                raise asyncio.CancelledError("the durable pull is closing")
            try:
                msgs = await self._sub.fetch(1, timeout=poll_timeout)
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # nothing yet; keep the pull open
            for msg in msgs:
                if self.guard.accepts(msg):
                    return msg  # type: ignore[no-any-return]

    async def close(self, *, delete: bool = False) -> None:
        """Stop reading; `delete` also removes the durable (what it has not acked is lost)."""
        if self._sub is not None:
            await settle_quietly(self._sub.unsubscribe())
            self._sub = None
        if self._advisory is not None:
            await settle_quietly(self._advisory.unsubscribe())
            self._advisory = None
        if delete:
            with contextlib.suppress(NotFoundError):
                await self._js.delete_consumer(self.spec.stream, self.spec.durable)

    async def _exhausted(self, msg: Msg) -> None:
        try:
            seq = json.loads(msg.data).get("stream_seq")
        except Exception:  # the advisory itself is unreadable: say so anyway
            seq = None
        log.error("durable %s gave up on the message at stream sequence %s of %s after %d "
                  "deliveries: it will not be delivered again", self.spec.durable, seq,
                  self.spec.stream, self.spec.max_deliver)


async def settle_quietly(reply: Awaitable[None]) -> None:
    """Await an ack/nak/term/unsubscribe, logging instead of raising: best effort, since
    the server redelivers an unsettled message after ack_wait anyway."""
    try:
        await reply
    except Exception:
        log.debug("settling failed; the message is redelivered after ack_wait", exc_info=True)


def bounded(exc: BaseException, limit: int = 300) -> str:
    """One log line about `exc`, at most `limit` characters whatever it holds."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    return text if len(text) <= limit else f"{text[:limit]}..."
