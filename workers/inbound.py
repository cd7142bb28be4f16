"""The inbound pipeline, written once for every consumer: read -> validate -> decide ->
ack / nak(delay) / term.

- Verify: who sent each message is checked first (`Handler.trust`, contracts.trust):
  its signature against the principals, the key's validity at the signing time, that
  time against the stream's timestamp for the message, the signer's role against the
  family's. A refusal is the message's rule (`unsigned`, `bad_signature`, ...), dead-
  lettered like any other; the verified principal (or None: unsigned where that is
  allowed) travels with the message in its batch (`Batch.identity`).
- Read: each message is read by its handler (`Handler.read`) inside a guard. Anything
  it raises makes that one message `Handler.unreadable` (rule `unreadable`, the
  exception's type and a truncated text), which the handler dead-letters and
  terminates; the other messages of the batch go on.
- Decide: the handler settles each message through the `Batch` (workers.batch).
  Whatever escapes `decide` (the database is down) fails only the messages not settled
  yet.
- A failure is a nak with the consumer's backoff delay for that delivery, and the error
  is remembered (workers.failures), so that when JetStream gives up after MaxDeliver
  the dead letter says what every attempt ran into (workers.exhaustion).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

import nats.errors
from nats.aio.msg import Msg

from bootstrap.setting_types import Retry
from contracts.shared.inbound import Inbound
from contracts.shared.partitions import unpartitioned
from contracts.shared.persistence import StoreUnreachable
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import describe, guarded
from contracts.trust.policy import FamilyTrust, Identity
from services.turns import Turns
from workers.batch import Batch
from workers.failures import FailureLog

R = TypeVar("R")

log = logging.getLogger(__name__)

UNREACHABLE: tuple[type[Exception], ...] = (StoreUnreachable, nats.errors.Error, TimeoutError,
                                          OSError)
"""A server that does not answer: every message would fail alike, so a failed batch is
retried whole rather than message by message."""


def to_inbound(m: Msg) -> Inbound:
    meta = m.metadata
    return Inbound(subject=m.subject, headers=dict(m.headers or {}), data=m.data,
                   stream_sequence=meta.sequence.stream, delivered=meta.num_delivered,
                   stream_time=meta.timestamp)


def identify(trust: FamilyTrust | None, m: Msg) -> Identity | RuleViolation:
    """Who sent `m`, as verified (None: unsigned where allowed, or an event family), or
    the rule its signature breaks. Never raises."""
    if trust is None:
        return None
    return identify_stored(trust, m.subject, dict(m.headers or {}), m.data,
                           m.metadata.timestamp)


def identify_stored(trust: FamilyTrust, subject: str, headers: dict[str, str], data: bytes,
                    stored_at: datetime) -> Identity | RuleViolation:
    """`identify` for a message read from its stream rather than delivered (a queued
    cancel found beside its request). Never raises."""
    # Signed as published: a partitioned family is stored under `<name>.<k>.<token>`
    # (contracts.shared.partitions), and the signature covers `<name>.<token>`.
    signed = unpartitioned(trust.kind, subject)
    return guarded(lambda: trust.identify(headers, signed, data, stored_at))


class Handler(Protocol[R]):
    """What a consumer's handler supplies to the pipeline."""

    trust: FamilyTrust | None
    """The check of who sent its family's messages (TrustPolicy.for_family), made before
    `read`; None only for an event family, which the workers themselves publish."""

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
        """Keep (and report) a message JetStream gave up on, through the handler's reject
        path; idempotent by `<stream>:<seq>`."""
        ...


@runtime_checkable
class Preparing(Protocol[R]):
    """A handler with CPU work on a read batch that need not wait for the batch before
    it: the pull loop runs `prepare` before the batch waits its turn to be written
    (workers.lane), and the handler's `decide` takes what it left in `batch.prepared`
    (or does the work itself, for a batch never prepared)."""

    async def prepare(self, batch: Batch[R]) -> None:
        """CPU work, yielding now and then: the batch before is being written."""
        ...


async def read_batch(handler: Handler[R], msgs: list[Msg], *, stream: str, retry: Retry,
                     failures: FailureLog) -> Batch[R]:
    """Read every message through the guard; never raises. Reading is CPU work while
    the batch before is waiting on the database: the loop gets a turn every few
    milliseconds (services.turns), so that batch's replies are taken up meanwhile."""
    now = utc_now()
    reads: list[R] = []
    identities: list[Identity] = []
    turns = Turns()
    for m in msgs:
        await turns.take()
        who = identify(handler.trust, m)
        if isinstance(who, RuleViolation):
            reads.append(handler.unreadable(m, who))
            identities.append(None)
            continue
        r = guarded(lambda m=m: handler.read(m, now))  # type: ignore[misc]
        if isinstance(r, RuleViolation):
            r = handler.unreadable(m, r)
        reads.append(r)
        identities.append(who)
    return Batch(msgs, reads, now, stream=stream, retry=retry, failures=failures,
                 identities=identities)


async def decide(handler: Handler[R], batch: Batch[R], subject: str) -> None:
    """`handler.decide(batch)`; when it raises while the servers answer, each unsettled
    message is decided alone, so one that makes its batch's write fail holds back no
    other. Whatever is left unsettled fails (and is retried with backoff)."""
    try:
        await handler.decide(batch)
    except Exception as exc:  # the batch's I/O failed: retry what is left
        left = len(batch.unsettled())
        if left > 1 and not isinstance(exc, UNREACHABLE):
            log.warning("batch of %d on %s failed (%s); deciding its %d unsettled "
                        "message(s) one by one", len(batch.msgs), subject, describe(exc),
                        left)
            for one in batch.split():
                await _decide_alone(handler, one)
        else:
            log.warning("batch of %d on %s failed (%s); %d message(s) will be retried",
                        len(batch.msgs), subject, describe(exc), left)
            await batch.fail_rest(exc)
    else:
        # A handler that forgot a message must not leave it to the ack wait.
        await batch.fail_rest("the consumer left this message undecided")


async def _decide_alone(handler: Handler[R], one: Batch[R]) -> None:
    try:
        await handler.decide(one)
    except Exception as exc:  # this message's failure alone
        await one.fail_rest(exc)


__all__ = ["Batch", "FailureLog", "Handler", "Retry", "decide", "read_batch", "to_inbound"]
