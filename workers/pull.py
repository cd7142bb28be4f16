"""A durable JetStream pull loop running the inbound pipeline (workers.inbound).

Why not FastStream's `PullSub(batch=True)`: its loop waits for a full batch or the
timeout (latency at low traffic), and nats-py raises `asyncio.TimeoutError` from one
fetch path where FastStream only catches `nats.errors.TimeoutError`; FastStream's task
supervisor restarts a crashed consume task once per distinct exception per hour, so
the second such timeout silently stops consumption (faststream#1525). This loop takes
one message when idle and a full batch under a backlog (it tops the batch up while the
stream says more is waiting), treats every timeout as "nothing yet", and keeps going
until stopped.

Batches overlap in two ways: the next batch is read (CPU) while the previous one waits
on the database, and a family may `hand_off` a batch once its writes are committed, so
the next one is decided while the first still publishes its events and settles its
messages (at most IN_FLIGHT batches at once; the family keeps their order).

Around the loop:
- on start the durable is created, or brought to the configuration in code (nats-py
  never updates an existing durable; fields the server cannot change are named in a
  warning and left as they are: recreating the durable would lose its position);
- a batch whose `decide` raises while the servers answer is decided again message by
  message, so a message that makes its batch's write fail holds back no other;
- every batch in hand gets in-progress acks every ack_wait/3 until it is settled, so a
  live worker never has a message redelivered under it;
- the consumer's MaxDeliver is finite; when JetStream gives up on a message it
  publishes a max-deliveries advisory (core NATS), on which the message is fetched by
  its stream sequence and dead-lettered (rule `max_deliveries`) with the error of every
  attempt. The advisory is not durable: a message exhausted while no worker listened is
  found at the next start from `delivery_failures` (when its failures were recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pymongo.errors import ConnectionFailure

from contracts.shared.dead_letter import dead_letter_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import describe
from store.deliveries import Attempt, DeliveryFailures
from workers.inbound import Batch, FailureLog, Family, Retry, read_batch
from workers.metrics import Metrics

log = logging.getLogger(__name__)

R = TypeVar("R")

READY_WAIT = 0.01
"""How long each further fetch of a round waits for messages that are not there yet."""
IN_FLIGHT = 2
"""Batches decided at once: one finishing (publishing, settling) after it handed off,
while the next one reads the store and writes."""
LATE_GRACE = 0.05
"""How long a stopping puller waits for answers to its last pulls before it takes them."""
FILL_ROUNDS = 8
"""Most fetches that top one batch up while the stream says more is waiting."""
ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
ADVISORY_QUEUE = "ledger-max-deliveries"
"""Queue group: one worker of many handles each advisory."""
DEAD_LETTER_TRIES = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Waits between tries at dead-lettering an exhausted message (the database may be down)."""
STALE_FAILURES = timedelta(days=1)
"""Failure records this old belong to messages another worker settled since."""
UNREACHABLE: tuple[type[Exception], ...] = (ConnectionFailure, nats.errors.Error, TimeoutError,
                                          OSError)
"""A server that does not answer: every message would fail alike, so a failed batch is
retried whole rather than message by message."""
MUTABLE = ("description", "ack_wait", "max_deliver", "backoff", "max_ack_pending",
           "filter_subject", "filter_subjects", "max_waiting", "headers_only",
           "inactive_threshold", "num_replicas", "sample_freq", "metadata")
"""Consumer fields an update may change (nats-server 2.10+); the others are immutable."""
COMPARED = (*MUTABLE, "deliver_policy", "ack_policy", "replay_policy")


def config_changes(have: ConsumerConfig, want: ConsumerConfig) -> dict[str, tuple[Any, Any]]:
    """The fields `want` sets that the existing consumer has otherwise."""
    out: dict[str, tuple[Any, Any]] = {}
    for name in COMPARED:
        wanted, had = getattr(want, name, None), getattr(have, name, None)
        if wanted is None:
            continue
        if isinstance(wanted, float) or isinstance(had, float):
            if had is None or abs(float(had) - float(wanted)) > 1e-3:
                out[name] = (had, wanted)
        elif isinstance(wanted, list):
            if [float(x) for x in wanted] != [float(x) for x in (had or [])]:
                out[name] = (had, wanted)
        elif wanted != had:
            out[name] = (had, wanted)
    return out


def _delivered_late(sub: JetStreamContext.PullSubscription) -> list[Msg]:
    """What a pull delivered after its fetch had returned: nats-py keeps it in the
    subscription's queue for the next fetch (and drains it the same way there); at a
    stop there is no next fetch, so it is taken here."""
    queue = sub._sub._pending_queue
    out: list[Msg] = []
    while not queue.empty():
        msg = queue.get_nowait()
        sub._sub._pending_size -= len(msg.data)
        if not JetStreamContext.is_status_msg(msg):
            out.append(msg)
    return out


def _pending_after(msgs: Sequence[Msg]) -> int:
    """Messages the stream says are still waiting for the consumer after the last of
    `msgs` (0 when unknown: the batch then goes as it is)."""
    try:
        return int(msgs[-1].metadata.num_pending or 0) if msgs else 0
    except Exception:  # not a JetStream message: nothing known
        return 0


def durable_config(durable: str, subject: str, *, ack_wait: float, max_ack_pending: int,
                   deliver: DeliverPolicy = DeliverPolicy.ALL) -> ConsumerConfig:
    """The shape every worker durable shares: explicit acks, one subject filter.

    MaxDeliver and BackOff are left out on purpose: the `BatchPuller` sets them from its
    `Retry`, so they come from one place (the settings)."""
    return ConsumerConfig(
        durable_name=durable, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=deliver, ack_wait=ack_wait, max_ack_pending=max_ack_pending)


async def ensure_consumer(js: JetStreamContext, stream: str, want: ConsumerConfig) -> None:
    """Create the durable, or update it to `want`; an immutable difference is logged."""
    durable = want.durable_name or ""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        await js.add_consumer(stream, want)
        return
    changes = config_changes(info.config, want)
    if not changes:
        return
    fixed = {k: v for k, v in changes.items() if k not in MUTABLE}
    if fixed:
        log.warning("consumer %s on %s differs in fields the server cannot update: %s; "
                    "keeping them (delete the consumer to apply them, losing its position)",
                    durable, stream, ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in
                                               fixed.items()))
        want = dataclasses.replace(want, **{k: getattr(info.config, k) for k in fixed})
    if any(k in MUTABLE for k in changes):
        await js.add_consumer(stream, want)  # the same durable: an update
        log.info("consumer %s on %s updated: %s", durable, stream,
                 ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items()
                           if k in MUTABLE))


class BatchPuller(Generic[R]):
    def __init__(self, js: JetStreamContext, *, stream: str, subject: str,
                 config: ConsumerConfig, batch_size: int, max_wait: float,
                 consumer: Family[R], retry: Retry,
                 failures: DeliveryFailures | None = None,
                 backoff_after_ack_wait: bool = True) -> None:
        """`backoff_after_ack_wait=False`: a message whose worker died comes back after
        the ack wait every time, instead of after the consumer's BackOff at its delivery
        count (see workers.recorder for why the recorder wants that)."""
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
        self._batch_size = batch_size
        self._max_wait = max_wait
        self._family = consumer
        self._store = failures
        self._failures = FailureLog(failures, self._durable)
        self._task: asyncio.Task[None] | None = None
        self._beat: asyncio.Task[None] | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._advisories: Any = None
        self._exhausting: set[asyncio.Task[None]] = set()
        self._live: set[Batch[R]] = set()
        self._carry: list[Msg] = []
        self._stopping = asyncio.Event()

    @property
    def durable(self) -> str:
        return self._durable

    async def start(self) -> None:
        await ensure_consumer(self._js, self._stream, self._config)
        nc = self._js._nc  # the advisory is core NATS, on the same connection
        self._advisories = await nc.subscribe(
            f"{ADVISORY}.{self._stream}.{self._durable}", queue=ADVISORY_QUEUE,
            cb=self._on_advisory)
        self._sub = await self._js.pull_subscribe_bind(durable=self._durable,
                                                       stream=self._stream)
        self._task = asyncio.create_task(self._run(self._sub), name=f"pull:{self._durable}")
        self._beat = asyncio.create_task(self._heartbeat(), name=f"beat:{self._durable}")
        self._spawn(self._sweep())

    @property
    def stream(self) -> str:
        return self._stream

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
        for task in (self._beat, *self._exhausting):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for sub in (self._sub, self._advisories):
            if sub is not None:
                # Unsubscribed, so the connection's drain does not wait on an idle pull inbox.
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    async def _run(self, sub: JetStreamContext.PullSubscription) -> None:
        # Batches being decided, oldest first: at most IN_FLIGHT, and only the newest may
        # not have handed off yet.
        flight: list[tuple[Batch[R], asyncio.Task[None]]] = []
        try:
            # Messages already fetched beyond the last batch (`_carry`), and those a pull
            # delivered after its fetch had returned, are decided even when a stop comes:
            # left unsettled they would be redelivered after the ack wait (the
            # several-worker fault run counted up to 12 such after a SIGTERM).
            while True:
                if self._stopping.is_set() and not self._carry:
                    await asyncio.sleep(LATE_GRACE)
                    self._carry = _delivered_late(sub)
                    if not self._carry:
                        break
                # Wait for one message, then take whatever else is ready: a lone message
                # is handled at once, a backlog in batches of up to batch_size.
                first = self._carry or await self._fetch(sub, 1, self._max_wait)
                if not first:
                    continue
                msgs = first if self._stopping.is_set() else await self._fill(sub, first)
                # A fetch can return more than asked (what an earlier pull delivered
                # late comes with it): the rest starts the next batch.
                msgs, self._carry = msgs[:self._batch_size], msgs[self._batch_size:]
                # Read while the previous batch is still committing: the database and
                # this process work at the same time instead of taking turns.
                pulled = time.monotonic()
                batch = await read_batch(self._family, msgs, stream=self._stream,
                                         retry=self._retry, failures=self._failures)
                batch.count = self._count
                self._live.add(batch)
                if flight:
                    # Its writes must be committed before this batch reads the store.
                    await flight[-1][0].handed_off.wait()
                while len(flight) >= IN_FLIGHT:
                    await flight.pop(0)[1]
                flight.append((batch, asyncio.create_task(self._commit(batch, pulled))))
                flight = [(b, t) for b, t in flight if not t.done()]
        finally:
            for _, task in flight:
                await task

    async def _fill(self, sub: JetStreamContext.PullSubscription, msgs: list[Msg]) -> list[Msg]:
        """Top the batch up to batch_size while the stream says more is waiting.

        One fetch of the rest is not enough under a backlog: when its short wait runs
        out before the server's answer (both cores busy), it returns the few messages
        already in hand and the rest arrive a moment later, so batches alternated
        between full ones and slivers of two or three, each costing a whole round of
        reads, a transaction and a publish (the recorder's). The last message's `num_pending` says
        whether more is waiting; when nothing is, the batch goes as it is, so a lone
        message is not held back. A fetch that comes back empty while more was said to be
        waiting is a short wait that ran out on a busy machine, not the end of the backlog:
        the round goes on (at most FILL_ROUNDS fetches, READY_WAIT each when empty)."""
        out = list(msgs)
        waiting = _pending_after(out)
        for _ in range(FILL_ROUNDS):
            want = self._batch_size - len(out)
            if want <= 0 or waiting == 0:
                break
            more = await self._fetch(sub, want, READY_WAIT)
            out += more
            if more:
                waiting = _pending_after(more)
        return out

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.messages.labels(self._stream, self._durable, outcome).inc()

    async def _commit(self, batch: Batch[R], pulled: float) -> None:
        try:
            await self._family.decide(batch)
        except Exception as exc:  # the batch's I/O failed: retry what is left
            left = len(batch.unsettled())
            if left > 1 and not isinstance(exc, UNREACHABLE):
                # Maybe one message's doing (the servers answer): decide each alone, so
                # the others are not held back with it.
                log.warning("batch of %d on %s failed (%s); deciding its %d unsettled "
                            "message(s) one by one", len(batch.msgs), self._subject,
                            describe(exc), left)
                for one in batch.split():
                    await self._decide_alone(one)
            else:
                log.warning("batch of %d on %s failed (%s); %d message(s) will be retried",
                            len(batch.msgs), self._subject, describe(exc), left)
                await batch.fail_rest(exc)
        else:
            # A family that forgot a message must not leave it to the ack wait.
            await batch.fail_rest("the consumer left this message undecided")
        finally:
            self._live.discard(batch)
            batch.hand_off()
            if self.metrics is not None:
                self.metrics.batch_size.labels(self._durable).observe(len(batch.msgs))
                self.metrics.batch_seconds.labels(self._durable).observe(
                    time.monotonic() - pulled)
        await self._failures.persist()

    async def _decide_alone(self, one: Batch[R]) -> None:
        try:
            await self._family.decide(one)
        except Exception as exc:  # this message's failure alone
            await one.fail_rest(exc)

    async def _heartbeat(self) -> None:
        every = max(0.5, (self._config.ack_wait or 30.0) / 3)
        while True:
            await asyncio.sleep(every)
            for batch in list(self._live):
                await batch.in_progress()

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

    # --- retries exhausted ---------------------------------------------------------

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._exhausting.add(task)
        task.add_done_callback(self._exhausting.discard)

    async def _on_advisory(self, msg: Msg) -> None:
        try:
            body = json.loads(msg.data)
            seq, deliveries = int(body["stream_seq"]), int(body.get("deliveries") or 0)
        except Exception as exc:  # not an advisory we can use
            log.error("unreadable max-deliveries advisory on %s: %s", msg.subject,
                      describe(exc))
            return
        self._spawn(self._exhausted(seq, deliveries))

    async def _sweep(self) -> None:
        """Dead-letter what exhausted its deliveries while no worker heard the advisory."""
        if self._store is None:
            return
        try:
            keys = await self._store.exhausted(self._durable, self._retry.max_deliver)
        except Exception as exc:  # tried again at the next start
            log.warning("could not look for exhausted messages of %s: %s", self._durable,
                        describe(exc))
            return
        for key in keys:
            await self._exhausted(int(key.rsplit(":", 1)[1]), self._retry.max_deliver)
        with contextlib.suppress(Exception):
            await self._store.forget_older_than(self._durable, utc_now() - STALE_FAILURES)

    async def _exhausted(self, seq: int, deliveries: int) -> None:
        key = dead_letter_id(self._stream, seq)
        for wait in (*DEAD_LETTER_TRIES, None):
            try:
                await self._dead_letter(seq, deliveries)
                return
            except Exception as exc:  # retried, then logged as lost
                if wait is None:
                    log.error("could not dead-letter %s after its last delivery: %s; it "
                              "stays in the stream, unacknowledged", key, describe(exc))
                    return
                await asyncio.sleep(wait)

    async def _dead_letter(self, seq: int, deliveries: int) -> None:
        key = dead_letter_id(self._stream, seq)
        try:
            raw = await self._js.get_msg(self._stream, seq)
        except NotFoundError:
            log.error("%s exhausted its deliveries on %s but the stream no longer holds it",
                      key, self._durable)
            await self._failures.forget(key)
            return
        msg = Inbound(subject=raw.subject or "", headers=dict(raw.headers or {}),
                      data=raw.data or b"", stream_sequence=seq, delivered=deliveries)
        attempts = await self._failures.attempts(key)
        await self._family.dead_letter(msg, exhausted_violations(
            self._durable, deliveries, self._retry.max_deliver, attempts))
        await self._failures.forget(key)
        log.error("%s on %s was delivered %d times without success; dead-lettered",
                  key, msg.subject, deliveries,
                  extra={"dead_letter_id": key, "subject": msg.subject})


def exhausted_violations(durable: str, deliveries: int, max_deliver: int,
                         attempts: Sequence[Attempt]) -> list[RuleViolation]:
    """The dead letter's errors: that retries ran out, then each attempt's error."""
    head = RuleViolation(
        rule=Rule.MAX_DELIVERIES,
        message=f"consumer {durable} delivered it {deliveries} times (MaxDeliver "
        f"{max_deliver}) without success; " + (
            f"{len(attempts)} failed attempt(s) follow" if attempts else
            "no failure was recorded (each delivery timed out: a worker died or hung "
            "holding it, or it was still waiting)"))
    return [head, *(RuleViolation(
        rule=Rule.MAX_DELIVERIES, field=None,
        message=f"delivery {a.delivered} at {a.at:%Y-%m-%dT%H:%M:%SZ}: {a.error}")
        for a in attempts)]
