"""A durable JetStream pull loop running the inbound pipeline (workers.inbound).

Why not FastStream's `PullSub(batch=True)`: its loop waits for a full batch or the
timeout (latency at low traffic), and its task supervisor restarts a crashed consume
task once per distinct exception per hour, so the second `asyncio.TimeoutError` (which
nats-py raises from one fetch path, where FastStream catches only nats' own) silently
stops consumption (faststream#1525). This loop takes one message when idle and a full
batch under a backlog, treats every timeout as "nothing yet", and keeps going.

Batches overlap in two ways: the next batch is read (CPU) while the previous one waits
on the database, and a handler may `hand_off` a batch once its writes are committed,
so the next one is decided while the first still publishes its events and settles its
messages (at most IN_FLIGHT batches at once; the handler keeps their order). Until the
previous batch hands off, the next one keeps taking (and reading) what arrives, so under
a steady flow a batch is what arrived during one commit.

Around the loop: the durable is created or brought to its configuration, then watched
(re-created from where it stopped if deleted or changed: workers.consumer_watch); a
batch whose `decide` raises while the servers answer is decided again message by
message, so a message that makes its batch's write fail holds back no other; every
batch in hand gets in-progress acks every ack_wait/3 until it is settled; and what
exhausts its MaxDeliver is dead-lettered (workers.exhaustion).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from bootstrap.setting_types import Retry
from contracts.shared.unreadable import describe
from services.tasks import stop_task, wait_event
from store.deliveries import DeliveryFailures
from workers.batch import Batch, HeldLease
from workers.consumer_watch import CHECK_EVERY, ConsumerWatch, watch_durable
from workers.exhaustion import Exhaustion
from workers.failures import FailureLog
from workers.fetch import LATE_GRACE, READY_WAIT, Fetcher
from workers.inbound import Handler, Preparing, decide, read_batch
from workers.lane import Lane, Permit
from workers.metrics import Metrics

log = logging.getLogger(__name__)

R = TypeVar("R")

IN_FLIGHT = 2
"""Batches decided at once: one finishing (publishing, settling) after it handed off,
while the next one reads the store and writes."""


def _giving_back(permit: Permit) -> Callable[[asyncio.Task[None]], None]:
    """A done callback that gives `permit` back (a no-op once the batch handed off)."""
    def give_back(_: asyncio.Task[None]) -> None:
        permit.release()
    return give_back


class BatchPuller(Generic[R]):
    def __init__(self, js: JetStreamContext, *, stream: str, subject: str,
                 config: ConsumerConfig, batch_size: int, max_wait: float,
                 consumer: Handler[R], retry: Retry,
                 failures: DeliveryFailures | None = None,
                 backoff_after_ack_wait: bool = True, check_every: float = CHECK_EVERY,
                 lane: Lane | None = None) -> None:
        """`backoff_after_ack_wait=False`: a message whose worker died comes back after
        the ack wait every time, instead of after the consumer's BackOff at its delivery
        count (see workers.recorder for why the recorder wants that).

        `lane`: shared with the other partitions of this durable pulled in this process,
        so their batches take turns to be read and written (workers.lane)."""
        self._js = js
        self._stream = stream
        self._subject = subject
        self._retry = retry
        self._config = config
        config.max_deliver = retry.max_deliver
        config.backoff = (retry.consumer_backoff(config.ack_wait or 30.0)
                          if backoff_after_ack_wait else [])
        self._durable = config.durable_name or ""
        self.metrics: Metrics | None = None
        """Set by the app before `start` to count what this consumer does."""
        self.lease: HeldLease | None = None
        """Set by workers.leading before `start`: the lease this durable is pulled under,
        handed to each batch (Batch.lease)."""
        self._batch_size = batch_size
        self._max_wait = max_wait
        self._handler = consumer
        self._lane = lane
        self._held: list[Msg] = []
        """Pulled and in no batch yet (the carry, or a batch's first messages waiting for
        room in the lane): kept alive like a batch in hand (`_heartbeat`)."""
        self._held_since = 0.0
        self._failures = FailureLog(failures, self._durable)
        self._exhaustion = Exhaustion(js, stream=stream, durable=self._durable, retry=retry,
                                      handler=consumer, failures=self._failures,
                                      store=failures)
        self._task: asyncio.Task[None] | None = None
        self._beat: asyncio.Task[None] | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._live: set[Batch[R]] = set()
        self._carry: list[Msg] = []
        self._counters: dict[str, Any] = {}
        self._stopping = asyncio.Event()
        self._check_every = check_every
        self.watch: ConsumerWatch | None = None

    @property
    def durable(self) -> str:
        return self._durable

    async def start(self, hold_off: float = 0.0) -> None:
        """`hold_off`: seconds to wait before the first pull (workers.leading: what a
        replica that died holding this durable had pulled comes back first)."""
        self.watch = await watch_durable(self._js, self._stream, self._config,
                                         self._check_every)
        await self._exhaustion.start()
        self._sub = await self._js.pull_subscribe_bind(durable=self._durable,
                                                       stream=self._stream)
        self._task = asyncio.create_task(self._run(self._sub, hold_off),
                                         name=f"pull:{self._durable}")
        self._beat = asyncio.create_task(self._heartbeat(), name=f"beat:{self._durable}")

    @property
    def stream(self) -> str:
        return self._stream

    @property
    def ack_wait(self) -> float:
        return float(self._config.ack_wait or 30.0)

    @property
    def consumers(self) -> list[tuple[str, str]]:
        """(stream, durable) of what it pulls: the metrics sample their lag."""
        return [(self._stream, self._durable)]

    @property
    def running(self) -> bool:
        """Started and its loop alive (what the readiness endpoint asks)."""
        return self._task is not None and not self._task.done()

    @property
    def problem(self) -> str | None:
        """Why the durable is not as declared (missing, changed), or None."""
        return self.watch.problem if self.watch is not None else None

    async def stop(self, timeout: float) -> None:
        """Finish the batch in hand (its acks included), then stop fetching."""
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                await stop_task(self._task)
        await stop_task(self._beat)
        if self.watch is not None:
            await self.watch.stop()
        await self._exhaustion.stop()
        if self._sub is not None:
            # Unsubscribed, so the connection's drain does not wait on an idle pull inbox.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _run(self, sub: JetStreamContext.PullSubscription, hold_off: float) -> None:
        assert self.watch is not None
        if hold_off > 0:
            await wait_event(self._stopping, hold_off)
        fetcher = Fetcher(sub, self._batch_size, self._subject, stream=self._stream,
                          durable=self._durable, failed=self.watch.poke)
        # Batches being decided, oldest first: at most IN_FLIGHT, and only the newest may
        # not have handed off yet.
        flight: list[tuple[Batch[R], asyncio.Task[None]]] = []
        try:
            # Messages already fetched beyond the last batch (`_carry`), and those a pull
            # delivered after its fetch had returned, are decided even when a stop comes:
            # left unsettled they would be redelivered after the ack wait, to another
            # replica, after a graceful stop that should have settled them.
            while True:
                if self._stopping.is_set() and not self._carry:
                    await asyncio.sleep(LATE_GRACE)
                    self._carry = self._hold(fetcher.delivered_late())
                    if not self._carry:
                        break
                # Wait for one message, then take whatever else is ready: a lone message
                # is handled at once, a backlog in batches of up to batch_size.
                first = self._carry or self._hold(await fetcher.fetch(1, self._max_wait))
                if not first:
                    continue
                flight.append(await self._next(fetcher, first, flight))
                flight = [(b, t) for b, t in flight if not t.done()]
        finally:
            for _, task in flight:
                await task

    async def _next(self, fetcher: Fetcher, first: list[Msg],
                    flight: list[tuple[Batch[R], asyncio.Task[None]]]
                    ) -> tuple[Batch[R], asyncio.Task[None]]:
        """The batch `first` begins, read and prepared, and the task that decides it once
        its turn to be written has come (at most IN_FLIGHT of this loop's at once)."""
        permit = await self._lane.begin() if self._lane is not None else None
        try:
            batch, pulled = await self._begin(fetcher, first, flight, self._held_since)
            if isinstance(self._handler, Preparing):
                await self._prepare(self._handler, batch)
            while len(flight) >= IN_FLIGHT:
                await flight.pop(0)[1]
            if self._lane is not None and permit is not None:
                permit = await self._lane.write(permit)
                batch.permit = permit  # given back when it hands off
            task = asyncio.create_task(self._commit(batch, pulled))
        except BaseException:
            if permit is not None:
                permit.release()
            raise
        if permit is not None:  # a commit cancelled before it began
            task.add_done_callback(_giving_back(permit))
        return batch, task

    async def _prepare(self, handler: Preparing[R], batch: Batch[R]) -> None:
        """`handler.prepare(batch)`, never raising: a batch it fails on is decided
        unprepared, where whatever fails is its messages' failure (retried, dead-lettered
        in the end), never the loop's."""
        try:
            await handler.prepare(batch)
        except Exception as exc:  # hostile input is normal input: the loop goes on
            batch.prepared = None
            log.warning("preparing a batch of %d on %s failed (%s); it is decided as it is",
                        len(batch.msgs), self._subject, describe(exc))

    def _hold(self, msgs: list[Msg]) -> list[Msg]:
        """`msgs`, just pulled, held outside any batch until one takes them."""
        self._held, self._held_since = msgs, time.monotonic()
        return msgs

    async def _begin(self, fetcher: Fetcher, first: list[Msg],
                     flight: list[tuple[Batch[R], asyncio.Task[None]]], alive_at: float
                     ) -> tuple[Batch[R], float]:
        """The next batch (`first` and whatever else is ready, read, then topped up with
        what arrives until the batch before it hands off) and when it was pulled."""
        msgs = first if self._stopping.is_set() else await fetcher.fill(first)
        # A fetch can return more than asked (a pull's late deliveries): the rest
        # starts the next batch.
        msgs, self._carry = msgs[:self._batch_size], self._hold(msgs[self._batch_size:])
        # Read while the previous batch is still committing: the database and
        # this process work at the same time instead of taking turns.
        pulled = time.monotonic()
        batch = await self._read(msgs)
        batch.count = self._count
        batch.kept_alive_at = alive_at  # when JetStream last heard of `first`
        batch.lease = self.lease
        self._live.add(batch)
        if flight:
            # Its writes must be committed before this batch reads the store; what
            # arrives meanwhile joins it.
            await self._top_up(fetcher, batch, flight[-1][0].handed_off)
            await flight[-1][0].handed_off.wait()
        return batch, pulled

    async def _top_up(self, fetcher: Fetcher, batch: Batch[R], previous: asyncio.Event
                      ) -> None:
        """Read what arrives into `batch` until the batch before it hands off (the wait
        this batch has anyway) or it is full: a batch is what arrived during one commit,
        so batches grow with the load, while a message that arrives when nothing is
        being committed still goes at once (at most READY_WAIT later).

        A batch closed when the one before began to commit lets a steady flow settle
        into slivers, each paying a whole round of reads, a transaction and a publish:
        one recorder partition of six took 1,293 decisions in 165 batches while another
        took 1,400 in 3 (bench/bench_recorder.py, the workers' batch-size metric).
        While the stream is quiet this polls every READY_WAIT, which costs a pull
        request and its empty answer per wait, and only while a batch is committing
        with the next one begun."""
        topped = False
        while not previous.is_set() and not self._stopping.is_set() and not self._carry \
                and len(batch.msgs) < self._batch_size:
            topped = True
            await self._take(batch, await fetcher.fetch(self._batch_size - len(batch.msgs),
                                                        READY_WAIT))
        if topped and not self._carry:
            # What the last pull delivered after its fetch returned would otherwise wait,
            # unread and not kept alive, for the next batch's fetch (beyond the room left,
            # it starts that batch).
            await self._take(batch, fetcher.delivered_late())

    async def _take(self, batch: Batch[R], more: list[Msg]) -> None:
        """`more` (newer than anything in hand: the carry is empty) into `batch` up to its
        size; the rest starts the next batch."""
        room = max(0, self._batch_size - len(batch.msgs))
        more, self._carry = more[:room], self._hold(more[room:])
        if more:
            batch.extend(await self._read(more))

    async def _read(self, msgs: list[Msg]) -> Batch[R]:
        return await read_batch(self._handler, msgs, stream=self._stream,
                                retry=self._retry, failures=self._failures)

    def _count(self, outcome: str) -> None:
        if self.metrics is None:
            return
        counter = self._counters.get(outcome)
        if counter is None:  # looked up once per outcome, not once per message
            counter = self._counters[outcome] = self.metrics.messages.labels(
                self._stream, self._durable, outcome)
        counter.inc()

    async def _commit(self, batch: Batch[R], pulled: float) -> None:
        try:
            await decide(self._handler, batch, self._subject)
        finally:
            self._live.discard(batch)
            batch.hand_off()
            if self.metrics is not None:
                self.metrics.batch_size.labels(self._durable).observe(len(batch.msgs))
                self.metrics.batch_seconds.labels(self._durable).observe(
                    time.monotonic() - pulled)
        await self._failures.persist()

    async def _heartbeat(self) -> None:
        # Only a batch JetStream has not heard of for a third of the ack wait: one pulled
        # a moment ago is far from its ack wait, and an in-progress ack is one publish
        # per message (under a backlog, sending them for every batch in hand cost more
        # CPU than recording them).
        every = max(0.5, (self._config.ack_wait or 30.0) / 3)
        while True:
            await asyncio.sleep(every / 4)
            due = time.monotonic() - every
            for batch in list(self._live):
                if batch.kept_alive_at <= due:
                    await batch.in_progress()
            if self._held and self._held_since <= due:
                self._held_since = time.monotonic()
                for m in list(self._held):
                    with contextlib.suppress(Exception):
                        await m.in_progress()
