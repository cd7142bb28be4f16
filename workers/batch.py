"""A pulled batch: what each message read as, and how each was settled.

A handler settles each message through the `Batch` (ack, term, nak for a wait that is
not a failure, or `fail`); a failure is a nak with the consumer's backoff delay for
that delivery, and its error is remembered (workers.failures).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from nats.aio.msg import Msg

from bootstrap.setting_types import Retry
from contracts.shared.dead_letter import dead_letter_id
from contracts.shared.persistence import LeaseFence
from contracts.shared.unreadable import describe
from contracts.trust.policy import Identity
from workers.failures import FailureLog
from workers.lane import Permit

log = logging.getLogger(__name__)

R = TypeVar("R")

Count = Callable[[str], None]
"""Told each settled message's outcome: ack, term, nak or fail."""


@dataclass(frozen=True)
class HeldLease:
    """The lease a consumer is pulled under (a recorder partition's: workers.leading):
    its fence, which the handler's write holds in its transaction, and what to call when
    the fence finds the lease another replica's (the puller stops pulling)."""

    fence: LeaseFence
    lost: Callable[[], None]


class Batch(Generic[R]):
    """A pulled batch with what each message read as, and how each was settled."""

    def __init__(self, msgs: list[Msg], reads: list[R], now: datetime, *, stream: str,
                 retry: Retry, failures: FailureLog, settled: set[int] | None = None,
                 count: Count | None = None,
                 identities: Sequence[Identity] | None = None) -> None:
        self.msgs = msgs
        self.reads = reads
        self.identities: list[Identity] = list(identities or [None] * len(msgs))
        """Who sent each message, as verified before it was read (workers.inbound)."""
        self._at = {id(m): i for i, m in enumerate(msgs)}
        self.now = now
        self._stream = stream
        self._retry = retry
        self._failures = failures
        self._settled: set[int] = settled if settled is not None else set()
        self.count: Count | None = count
        """Called with each message's outcome once settled (the worker's metrics)."""
        self.handed_off = asyncio.Event()
        """Set once the next batch may be decided (see `hand_off`)."""
        self.kept_alive_at = time.monotonic()
        """When JetStream last heard this batch was being worked: its pull, or its last
        in-progress acks."""
        self.lease: HeldLease | None = None
        """The lease its consumer is pulled under; None: pulled by every replica."""
        self.prepared: object | None = None
        """What its handler made of it ahead of deciding it (workers.inbound.Preparing)."""
        self.permit: Permit | None = None
        """Its room in its puller's lane (workers.lane), given back at hand-off."""

    def hand_off(self) -> None:
        """The next batch may be decided now, while this one finishes.

        A handler calls it once its writes are committed, when what is left (publishing
        their events, settling the messages) no longer changes what the next batch reads
        from the store; it keeps that rest in batch order itself. The pipeline calls it
        when `decide` returns or raises, so a handler that never calls it is decided one
        batch at a time. Its room in the read lane is given back with it."""
        self.handed_off.set()
        if self.permit is not None:
            self.permit.release()

    def extend(self, more: Batch[R]) -> None:
        """Take `more`'s messages (read since, from the same consumer) after this batch's
        own; it must not have been settled or handed off yet."""
        start = len(self.msgs)
        self.msgs += more.msgs
        self.reads += more.reads
        self.identities += more.identities
        self._at.update({id(m): start + i for i, m in enumerate(more.msgs)})

    def split(self) -> list[Batch[R]]:
        """One batch per unsettled message, settling through this one."""
        out = [Batch([m], [r], self.now, stream=self._stream, retry=self._retry,
                     failures=self._failures, settled=self._settled, count=self.count,
                     identities=[who])
               for m, r, who in zip(self.msgs, self.reads, self.identities, strict=True)
               if id(m) not in self._settled]
        for one in out:
            one.lease = self.lease
        return out

    def identity(self, m: Msg) -> Identity:
        """Who sent `m`, as verified (None: unsigned, accepted where that is allowed)."""
        return self.identities[self._at[id(m)]]

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
        self.kept_alive_at = time.monotonic()
        for m in self.unsettled():
            with contextlib.suppress(Exception):
                await m.in_progress()
