"""The inbound pipeline, written once for every consumer: read -> validate -> decide ->
ack / nak(delay) / term.

- Read: each message is read by its family (`Family.read`) inside a guard. Anything it
  raises makes that one message `Family.unreadable` (rule `unreadable`, the exception's
  type and a truncated text), which the family dead-letters and terminates; the other
  messages of the batch go on.
- Decide: the family settles each message through the `Batch` (ack, term, nak for a
  wait that is not a failure, or `fail`). Whatever escapes `decide` (the database is
  down) fails only the messages not settled yet.
- A failure is a nak with the consumer's backoff delay for that delivery, and the error
  is remembered under `<stream>:<seq>` (`FailureLog`), so that when JetStream gives up
  after MaxDeliver the dead letter says what every attempt ran into (workers.pull).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from nats.aio.msg import Msg

from contracts.shared.dead_letter import dead_letter_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import describe, guarded, unreadable
from store.deliveries import MAX_ATTEMPTS_KEPT, Attempt, DeliveryFailures, Failure

log = logging.getLogger(__name__)

R = TypeVar("R")

READ_SLICE = 50
"""Messages read between two yields to the event loop: reading a batch is CPU work, and
the batch before it is meanwhile waiting on the database; its replies are taken up
between slices instead of after the whole batch."""
PERSIST_TIMEOUT = 5.0
"""How long recording one batch's failures may take; they stay in memory regardless."""
MEMORY_KEYS = 10_000
"""Messages whose failures this process keeps in memory (the oldest are forgotten)."""


@dataclass(frozen=True)
class Retry:
    """One consumer's bounded retries: MaxDeliver, and the delay before each retry."""

    max_deliver: int
    backoff: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.max_deliver < 1 or not self.backoff:
            raise ValueError("a consumer needs max_deliver >= 1 and at least one backoff delay")

    def delay(self, delivered: int) -> float:
        """The nak delay after a failed delivery number `delivered` (1-based)."""
        return self.backoff[min(max(delivered, 1), len(self.backoff)) - 1]

    def consumer_backoff(self, ack_wait: float) -> list[float]:
        """The consumer's BackOff (redelivery after an ack timeout: a worker died or hung).
        JetStream takes its first value as the ack wait, so none is shorter than ack_wait,
        and it must be shorter than MaxDeliver."""
        return [max(ack_wait, b) for b in self.backoff][:max(1, self.max_deliver - 1)]


def to_inbound(m: Msg) -> Inbound:
    meta = m.metadata
    return Inbound(subject=m.subject, headers=dict(m.headers or {}), data=m.data,
                   stream_sequence=meta.sequence.stream, delivered=meta.num_delivered)


class Family(Protocol[R]):
    """What a message family supplies to the pipeline."""

    def read(self, msg: Msg, now: datetime) -> R:
        """Parse and validate one message, CPU only; may raise (the pipeline guards it)."""
        ...

    def unreadable(self, msg: Msg, why: RuleViolation) -> R:
        """What a message whose `read` raised reads as: something `decide` dead-letters."""
        ...

    async def decide(self, batch: Batch[R]) -> None:
        """The I/O, settling every message through `batch`."""
        ...

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        """Keep (and report) a message JetStream gave up on, through the family's reject
        path; idempotent by `<stream>:<seq>`."""
        ...


class FailureLog:
    """The error of each failed delivery, by `<stream>:<seq>`: in this process's memory
    (always, so a database outage loses nothing here) and in `delivery_failures` (so
    another worker, or this one after a restart, can list them)."""

    def __init__(self, store: DeliveryFailures | None, consumer: str) -> None:
        self._store = store
        self._consumer = consumer
        self._memory: OrderedDict[str, list[Attempt]] = OrderedDict()
        self._queued: list[Failure] = []
        self._settled: list[str] = []

    def add(self, key: str, delivered: int, error: str) -> None:
        attempt = Attempt(delivered, error, utc_now())
        kept = self._memory.setdefault(key, [])
        self._memory.move_to_end(key)
        kept.append(attempt)
        del kept[:-MAX_ATTEMPTS_KEPT]
        while len(self._memory) > MEMORY_KEYS:
            self._memory.popitem(last=False)
        self._queued.append(Failure(key, self._consumer, attempt))

    def count(self, key: str) -> int:
        """Failed deliveries of the message this process remembers (at most
        MAX_ATTEMPTS_KEPT), the one just added included."""
        return len(self._memory.get(key, ()))

    def settled(self, key: str) -> None:
        """The message succeeded (or was dead-lettered) after failing here."""
        if self._memory.pop(key, None) is not None:
            self._settled.append(key)

    async def persist(self) -> None:
        """Write what was queued; on failure (the database is what failed, usually) it
        stays in memory only."""
        queued, self._queued = self._queued, []
        settled, self._settled = self._settled, []
        if self._store is None or not (queued or settled):
            return
        try:
            await asyncio.wait_for(self._write(queued, settled), PERSIST_TIMEOUT)
        except Exception as exc:  # best effort; memory still has them
            log.warning("could not record %d delivery failure(s): %s", len(queued),
                        describe(exc))

    async def _write(self, queued: list[Failure], settled: list[str]) -> None:
        assert self._store is not None
        if queued:
            await self._store.record(queued)
        if settled:
            await self._store.forget_many(settled)

    async def attempts(self, key: str) -> list[Attempt]:
        stored: list[Attempt] = []
        if self._store is not None:
            stored = await self._store.attempts(key)
        merged = {a.delivered: a for a in stored}
        merged.update({a.delivered: a for a in self._memory.get(key, [])})
        return [merged[k] for k in sorted(merged)][-MAX_ATTEMPTS_KEPT:]

    async def forget(self, key: str) -> None:
        self._memory.pop(key, None)
        if self._store is not None:
            await self._store.forget(key)


Count = Callable[[str], None]
"""Told each settled message's outcome: ack, term, nak or fail."""


class Batch(Generic[R]):
    """A pulled batch with what each message read as, and how each was settled."""

    def __init__(self, msgs: list[Msg], reads: list[R], now: datetime, *, stream: str,
                 retry: Retry, failures: FailureLog, settled: set[int] | None = None,
                 count: Count | None = None) -> None:
        self.msgs = msgs
        self.reads = reads
        self.now = now
        self._stream = stream
        self._retry = retry
        self._failures = failures
        self._settled: set[int] = settled if settled is not None else set()
        self.count: Count | None = count
        """Called with each message's outcome once settled (the worker's metrics)."""
        self.handed_off = asyncio.Event()
        """Set once the next batch may be decided (see `hand_off`)."""

    def hand_off(self) -> None:
        """The next batch may be decided now, while this one finishes.

        A family calls it once its writes are committed, when what is left (publishing
        their events, settling the messages) no longer changes what the next batch reads
        from the store; it keeps that rest in batch order itself. The pipeline calls it
        when `decide` returns or raises, so a family that never calls it is decided one
        batch at a time."""
        self.handed_off.set()

    def split(self) -> list[Batch[R]]:
        """One batch per unsettled message, settling through this one."""
        return [Batch([m], [r], self.now, stream=self._stream, retry=self._retry,
                      failures=self._failures, settled=self._settled, count=self.count)
                for m, r in self.items if id(m) not in self._settled]

    @property
    def items(self) -> list[tuple[Msg, R]]:
        return list(zip(self.msgs, self.reads, strict=True))

    def unsettled(self) -> list[Msg]:
        return [m for m in self.msgs if id(m) not in self._settled]

    async def ack(self, m: Msg) -> None:
        self._done(m)
        await self._settle(m, m.ack(), "ack")

    async def term(self, m: Msg) -> None:
        self._done(m)
        await self._settle(m, m.term(), "term")

    def _done(self, m: Msg) -> None:
        meta = m.metadata
        if meta.num_delivered > 1:  # only a redelivery can have failed before
            self._failures.settled(dead_letter_id(self._stream, meta.sequence.stream))

    async def nak(self, m: Msg, delay: float) -> None:
        """Redeliver after `delay`: a wait, not a failure (nothing is recorded)."""
        await self._settle(m, m.nak(delay=delay), "nak")

    async def fail(self, m: Msg, error: BaseException | str) -> None:
        """This delivery failed: remember why, and redeliver after the backoff delay.

        The delay goes by this message's failures (CONSUMER_BACKOFF is "by failure
        count"), not by its deliveries: a decision that had waited eight deliveries for
        its parent and then met one failed publish (a stream leader killed) was held
        300 s, and the decisions under it waited for it past their parent wait (one of
        the causes of the losses of bench/cluster_fault_run.py, not the main one:
        docs/operations.md). Failures this process saw; another replica's are not
        counted, so a shared message backs off less, never more, and MaxDeliver still
        bounds it."""
        text = error if isinstance(error, str) else describe(error)
        meta = m.metadata
        key = dead_letter_id(self._stream, meta.sequence.stream)
        self._failures.add(key, meta.num_delivered, text)
        delay = self._retry.delay(self._failures.count(key))
        await self._settle(m, m.nak(delay=delay), "fail")

    async def fail_rest(self, error: BaseException | str) -> None:
        for m in self.unsettled():
            await self.fail(m, error)

    async def each(self, handle: Callable[[Msg, R], Awaitable[None]]) -> None:
        """`handle` each unsettled message in order; one raising fails only itself."""
        for m, r in self.items:
            if id(m) in self._settled:
                continue
            try:
                await handle(m, r)
            except Exception as exc:  # this message's failure alone
                log.warning("message on %s failed: %s", m.subject, describe(exc))
                await self.fail(m, exc)

    async def _settle(self, m: Msg, reply: Awaitable[None], outcome: str) -> None:
        if id(m) in self._settled:
            reply.close()  # type: ignore[attr-defined]
            return
        self._settled.add(id(m))
        if self.count is not None:
            self.count(outcome)
        try:
            await reply
        except Exception as exc:  # JetStream redelivers after the ack wait
            log.warning("could not settle a message on %s: %s", m.subject, describe(exc))

    async def in_progress(self) -> None:
        """Tell JetStream the unsettled messages are still being worked."""
        for m in self.unsettled():
            with contextlib.suppress(Exception):
                await m.in_progress()


async def read_batch(family: Family[R], msgs: list[Msg], *, stream: str, retry: Retry,
                     failures: FailureLog) -> Batch[R]:
    """Read every message through the guard, yielding to the event loop every
    READ_SLICE messages; never raises."""
    now = utc_now()
    reads: list[R] = []
    for i, m in enumerate(msgs):
        if i and not i % READ_SLICE:
            await asyncio.sleep(0)
        r = guarded(lambda m=m: family.read(m, now))  # type: ignore[misc]
        if isinstance(r, RuleViolation):
            r = family.unreadable(m, r)
        reads.append(r)
    return Batch(msgs, reads, now, stream=stream, retry=retry, failures=failures)


__all__ = ["Batch", "Failure", "FailureLog", "Family", "Retry", "read_batch", "to_inbound",
           "unreadable"]
