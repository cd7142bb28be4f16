"""The correction workers: thin adapters from NATS to `services.corrections`.

- requests (`corrections.requested.*`): record each request PENDING, then try to drive
  its plan, then ack. Once recorded, the correction no longer needs its message: the
  plan's lease holder or the recovery sweep (workers.recovery) drives it to the end, so
  a request waiting behind a long correction is never redelivered again and again.
- cancels (`corrections.cancel.*`); operator fails (`corrections.fail.*`) end a stuck
  correction; operator retries (`corrections.retry.*`) put a FAILED one back to PENDING.

Each is a durable pull consumer declared with its family (contracts.corrections.families)
running the inbound pipeline (workers.inbound): an unreadable message is dead-lettered
and terminated, a failing one retried with backoff up to MaxDeliver, then dead-lettered
(rule max_deliveries). Dry runs: workers.dry_run; the outbox relay: workers.relay.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from nats.aio.msg import Msg

from clients.queued import queued_cancel
from contracts.corrections import families
from contracts.corrections.refusals import CancelRefused, FailRefused, RetryRefused
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.wire import read_cancel, read_fail, read_request, read_retry
from contracts.shared.families import MessageFamily
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.subject_tokens import plan_of
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable, describe
from contracts.trust.policy import Identity
from services.corrections.service import CorrectionService
from workers.batch import Batch
from workers.deps import Deps, HandlerClass
from workers.inbound import identify_stored

log = logging.getLogger(__name__)

Service = Callable[[], CorrectionService]


class _Commands:
    """What every command handler shares: the unreadable and exhausted paths."""

    family: MessageFamily

    def __init__(self, deps: Deps) -> None:
        self._service: Service = deps.corrections
        self._settings = deps.settings
        self.trust = deps.trust_for(self.family)

    @property
    def prefix(self) -> str:
        return self.family.name

    def extra_deliveries(self) -> int:
        return 0

    def unreadable(self, m: Msg, why: RuleViolation) -> Unreadable:
        return Unreadable(plan_of(m.subject, self.prefix), None, (why,))

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().reject(
            msg.subject, dict(msg.headers), msg.data, stream_sequence=msg.stream_sequence,
            delivered=msg.delivered, unreadable=Unreadable(
                plan_of(msg.subject, self.prefix), None, tuple(violations)))

    async def _reject(self, batch: Batch[Any], m: Msg, why: Unreadable) -> None:
        meta = m.metadata
        await self._service().reject(m.subject, dict(m.headers or {}), m.data,
                                     stream_sequence=meta.sequence.stream,
                                     delivered=meta.num_delivered, unreadable=why)
        await batch.term(m)

    async def _each(self, batch: Batch[Any], act: Callable[[Msg, Any], Awaitable[None]]
                    ) -> None:
        """`act` on each readable command in order; an unreadable one is rejected, and so
        is one a verified operator sends about a plan outside its projects."""
        svc = self._service()

        async def one(m: Msg, r: Any) -> None:
            if not isinstance(r, Unreadable):
                refused = await svc.scope_refusal(batch.identity(m), r.plan_id)
                if refused is not None:
                    r = Unreadable(r.plan_id, r.correction_id, (refused,))
            if isinstance(r, Unreadable):
                await self._reject(batch, m, r)
            else:
                await act(m, r)

        await batch.each(one)


async def _drive(svc: CorrectionService, plan_ids: Sequence[str]) -> None:
    """Drive each plan once, together; a failure is logged (the sweep takes it up)."""
    plans = list(dict.fromkeys(plan_ids))
    results = await asyncio.gather(*(svc.run_plan(p) for p in plans),
                                   return_exceptions=True)
    for plan_id, res in zip(plans, results, strict=True):
        if isinstance(res, BaseException):
            log.warning("driving plan %s failed (%s); the sweep takes it up again",
                        plan_id, describe(res))


class RequestConsumer(_Commands):
    """corrections.requested.*: record each request PENDING (in stream order: the plan's
    order), try to drive the plans, then ack every recorded request."""

    family = families.REQUESTED

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        self._crash = deps.crash
        self._nc = deps.nc
        self._cancel_trust = deps.trust_for(families.CANCEL)

    def read(self, m: Msg, now: datetime) -> CorrectionRequest | Unreadable:
        return read_request(m.subject, m.data,
                            max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[CorrectionRequest | Unreadable]) -> None:
        svc = self._service()
        recorded: list[tuple[Msg, CorrectionRequest]] = []

        async def record(m: Msg, r: CorrectionRequest) -> None:
            arrival = m.metadata.sequence.stream
            await svc.request_correction(r, arrival=arrival, trace=m.headers,
                                         identity=batch.identity(m))
            recorded.append((m, r))
            queued = await self._queued_cancel(r, arrival)
            if queued is not None:  # cancelled while queued: before it runs
                cancel, who = queued
                await svc.cancel_correction(r.correction_id, cancel.reason, plan_id=r.plan_id,
                                            identity=who)

        await self._each(batch, record)
        await _drive(svc, [req.plan_id for _, req in recorded])
        self._crash("before_ack")
        for m, _ in recorded:
            await batch.ack(m)


    async def _queued_cancel(self, r: CorrectionRequest, arrival: int
                             ) -> tuple[CancelRequest, Identity] | None:
        """A cancel of this request already in the stream after it, and who sent it as
        verified: an operator cancelled it while it was queued (the workers stopped or
        behind). Applied as the request is recorded, before the plan is driven, so it
        never runs; the cancel consumer then finds it cancelled. The cancel is held to
        what its own consumer would hold it to (its signature, the operator's projects):
        one that would be refused there is left to that consumer, which refuses it.
        Looking costs one stream read per request (usually "none"); a failure to look
        leaves the cancel to its own consumer."""
        if self._nc is None:
            return None
        try:
            found = await queued_cancel(self._nc, r.correction_id, r.plan_id, arrival)
        except Exception as exc:  # the stream read is best effort; recording is not
            log.warning("looking for a queued cancel of %s failed (%s)", r.correction_id,
                        describe(exc))
            return None
        if found is None:
            return None
        who = identify_stored(self._cancel_trust, found.subject, found.headers, found.data,
                              found.stored_at or utc_now()) \
            if self._cancel_trust is not None else None
        if isinstance(who, RuleViolation) or \
                await self._service().scope_refusal(who, r.plan_id) is not None:
            return None
        return found.request, who


class CancelConsumer(_Commands):
    """corrections.cancel.*: cancel, or report the refusal."""

    family = families.CANCEL

    def read(self, m: Msg, now: datetime) -> CancelRequest | Unreadable:
        return read_cancel(m.subject, m.data,
                           max_payload_bytes=self._settings.max_payload_bytes)

    def extra_deliveries(self) -> int:
        """A cancel waiting for its request is redelivered: waits, not failures."""
        s = self._settings
        return math.ceil(s.corrections_cancel_wait_seconds / s.corrections_retry_delay) + 1

    async def decide(self, batch: Batch[CancelRequest | Unreadable]) -> None:
        svc = self._service()

        async def cancel(m: Msg, r: CancelRequest) -> None:
            settings = self._settings
            waited = (m.metadata.num_delivered - 1) * settings.corrections_retry_delay
            if await svc.get_correction(r.correction_id) is None and \
                    waited < settings.corrections_cancel_wait_seconds:
                # The request travels on another consumer and may not be recorded yet.
                await batch.nak(m, settings.corrections_retry_delay)
                return
            outcome = await svc.cancel_correction(r.correction_id, r.reason,
                                                  plan_id=r.plan_id,
                                                  identity=batch.identity(m))
            if isinstance(outcome, CancelRefused):
                log.info("cancel refused: %s", outcome.reason)
            await batch.ack(m)

        await self._each(batch, cancel)


class FailConsumer(_Commands):
    """corrections.fail.*: an operator ends a correction stuck in ANALYZING or EXECUTING
    FAILED, or the refusal is reported."""

    family = families.FAIL

    def read(self, m: Msg, now: datetime) -> FailRequest | Unreadable:
        return read_fail(m.subject, m.data, max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[FailRequest | Unreadable]) -> None:
        svc = self._service()

        async def fail(m: Msg, r: FailRequest) -> None:
            outcome = await svc.fail_correction(r.correction_id, r.reason, plan_id=r.plan_id,
                                                identity=batch.identity(m))
            if isinstance(outcome, FailRefused):
                log.info("fail refused: %s", outcome.reason)
            await batch.ack(m)

        await self._each(batch, fail)


class RetryConsumer(_Commands):
    """corrections.retry.*: an operator starts a new round of a FAILED correction, or the
    refusal is reported; then the retried plans are driven (the recovery sweep takes
    them up if this fails)."""

    family = families.RETRY

    def read(self, m: Msg, now: datetime) -> RetryRequest | Unreadable:
        return read_retry(m.subject, m.data, max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[RetryRequest | Unreadable]) -> None:
        svc = self._service()
        retried: list[str] = []

        async def retry(m: Msg, r: RetryRequest) -> None:
            outcome = await svc.retry_correction(
                r.correction_id, r.retry_id, plan_id=r.plan_id, reason=r.reason,
                identity=batch.identity(m))
            if isinstance(outcome, RetryRefused):
                log.info("retry refused: %s", outcome.reason)
            else:
                retried.append(r.plan_id)
            await batch.ack(m)

        await self._each(batch, retry)
        await _drive(svc, retried)


HANDLERS: dict[str, HandlerClass[Any]] = {
    families.REQUESTED.name: RequestConsumer, families.CANCEL.name: CancelConsumer,
    families.FAIL.name: FailConsumer, families.RETRY.name: RetryConsumer}
"""The command families the correction workers consume, and the handler of each."""
