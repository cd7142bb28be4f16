"""A durable JetStream pull consumer with bounded retries: what every client feed shares.

The subscriber's outcome feed and the runtime's resume feed both need the same things:
a durable that outlives the process (the server remembers what was acknowledged, so
what was published while the client was down is delivered when it comes back), a
retry that ends (MaxDeliver and a BackOff, then an ERROR naming the message), and a
poll that never gives up while the server is quiet. One implementation, here.
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
from nats.js.errors import BadRequestError, NotFoundError

log = logging.getLogger("clients")

MAX_DELIVER = 10
"""Deliveries of one message before the server gives up on it (then logged as an ERROR)."""
BACKOFF: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds before a message whose handler raised comes back, by failure count."""
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


def replay_from(start: int | None) -> ConsumerConfig:
    """An ordered consumer from stream sequence `start`, or from the stream's start.

    The wait helpers replay from their own publish's sequence, so an outcome or
    transition published before the wait began is not missed."""
    return ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start else DeliverPolicy.ALL,
        opt_start_seq=start or None)


@dataclass(frozen=True, slots=True)
class DurableSpec:
    """Which messages a durable reads, and how it retries them."""

    stream: str
    durable: str
    filters: Sequence[str]
    ack_wait: float = 60.0
    from_start: bool = False
    max_deliver: int = MAX_DELIVER
    backoff: Sequence[float] = BACKOFF

    def config(self) -> ConsumerConfig:
        one = len(self.filters) == 1
        backoff = tuple(self.backoff) or BACKOFF
        return ConsumerConfig(
            durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=self.ack_wait,
            deliver_policy=DeliverPolicy.ALL if self.from_start else DeliverPolicy.NEW,
            filter_subject=self.filters[0] if one else None,
            filter_subjects=None if one else list(self.filters),
            max_deliver=self.max_deliver,
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
        self.closing = False
        """Set by whoever stops the reader, before cancelling it."""

    async def open(self) -> None:
        """Create (or reuse) the durable consumer; from here on nothing published is missed."""
        if self._sub is not None:
            return
        spec = self.spec
        try:
            # Creates the durable, or updates an existing one to these settings.
            await self._js.add_consumer(spec.stream, spec.config())
        except BadRequestError as exc:
            # It exists with another configuration: fine if it reads the same subjects.
            info = await self._js.consumer_info(spec.stream, spec.durable)
            existing = sorted(info.config.filter_subjects or [info.config.filter_subject or ""])
            if existing != sorted(spec.filters):
                raise ValueError(
                    f"durable {spec.durable!r} already reads {existing}, not "
                    f"{sorted(spec.filters)}; pick another durable name") from exc
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
            if msgs:
                return msgs[0]  # type: ignore[no-any-return]

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
