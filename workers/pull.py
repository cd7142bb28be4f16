"""A durable JetStream pull loop that hands whole batches to a callback.

Why not FastStream's `PullSub(batch=True)`: its loop waits for a full batch or the
timeout (latency at low traffic), and nats-py raises `asyncio.TimeoutError` from one
fetch path where FastStream only catches `nats.errors.TimeoutError`; FastStream's task
supervisor restarts a crashed consume task once per distinct exception per hour, so
the second such timeout silently stops consumption (faststream#1525). This loop takes
what one fetch returns (a full batch under load, one message when idle), treats every
timeout as "nothing yet", and keeps going until stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Generic, Protocol, TypeVar

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

log = logging.getLogger(__name__)

P = TypeVar("P")

READY_WAIT = 0.01
"""How long the second fetch of a round waits for messages that are not there yet."""

class BatchConsumer(Protocol[P]):
    """Handles a pulled batch in two steps, so they can overlap across batches."""

    def prepare(self, msgs: list[Msg]) -> P:
        """CPU-only work (parsing, validation); runs while the previous batch commits."""
        ...

    async def commit(self, msgs: list[Msg], prepared: P) -> None:
        """The I/O, then ack/nak/term of every message. Batches commit one at a time,
        in the order they were pulled."""
        ...


class BatchPuller(Generic[P]):
    def __init__(self, js: JetStreamContext, *, stream: str, subject: str,
                 config: ConsumerConfig, batch_size: int, max_wait: float,
                 consumer: BatchConsumer[P]) -> None:
        self._js = js
        self._stream = stream
        self._subject = subject
        self._config = config
        self._batch_size = batch_size
        self._max_wait = max_wait
        self._consumer = consumer
        self._task: asyncio.Task[None] | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        self._sub = await self._js.pull_subscribe(
            self._subject, durable=self._config.durable_name, stream=self._stream,
            config=self._config)
        self._task = asyncio.create_task(self._run(self._sub),
                                         name=f"pull:{self._config.durable_name}")

    @property
    def running(self) -> bool:
        """Started and its loop alive (what the readiness endpoint asks)."""
        return self._task is not None and not self._task.done()

    async def stop(self, timeout: float) -> None:
        """Finish the batch in hand (its acks included), then stop fetching."""
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        if self._sub is not None:
            # Unsubscribed, so the connection's drain does not wait on an idle pull inbox.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _run(self, sub: JetStreamContext.PullSubscription) -> None:
        committing: asyncio.Task[None] | None = None
        try:
            while not self._stopping.is_set():
                # Wait for one message, then take whatever else is ready: a lone message
                # is handled at once, a backlog in batches of up to batch_size.
                first = await self._fetch(sub, 1, self._max_wait)
                if not first:
                    continue
                msgs = first + await self._fetch(sub, self._batch_size - 1, READY_WAIT)
                # Prepared while the previous batch is still committing: the database
                # and this process work at the same time instead of taking turns.
                try:
                    prepared = self._consumer.prepare(msgs)
                except Exception:
                    log.exception("preparing a batch on %s failed; redelivering it",
                                  self._subject)
                    for m in msgs:
                        await m.nak(delay=1.0)
                    continue
                if committing is not None:
                    await committing
                committing = asyncio.create_task(self._commit(msgs, prepared))
        finally:
            if committing is not None:
                await committing

    async def _commit(self, msgs: list[Msg], prepared: Any) -> None:
        try:
            await self._consumer.commit(msgs, prepared)
        except Exception:
            # The consumer decides ack/nak itself; anything escaping it leaves the batch
            # unacked, so JetStream redelivers it after ack_wait.
            log.exception("batch of %d on %s failed", len(msgs), self._subject)

    async def _fetch(self, sub: JetStreamContext.PullSubscription, n: int,
                     timeout: float) -> list[Msg]:
        if n <= 0:
            return []
        try:
            return await sub.fetch(n, timeout=timeout)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError):
            await asyncio.sleep(0.5)
            return []
        except Exception:
            # Never let the loop die: an unexpected error is logged and retried.
            log.exception("fetch failed on %s; retrying", self._subject)
            await asyncio.sleep(1.0)
            return []
