"""The correction workers: thin adapters from NATS to `services.corrections`.

- requests (`corrections.requested.*`, durable pull consumer): record each request
  PENDING, then try to drive its plan, then ack. Once recorded, the correction no
  longer needs its message: what drives it to the end is whoever holds the plan's
  lease, or the recovery sweep (workers.recovery) that drives every plan with
  unfinished corrections and no live lease. So a request that waits behind a long correction is
  not redelivered again and again and can never run out of deliveries.
- cancels (`corrections.cancel.*`, durable pull consumer).
- operator fails (`corrections.fail.*`, durable pull consumer): end a stuck correction.
- operator retries (`corrections.retry.*`, durable pull consumer): a FAILED correction
  goes back to PENDING and its plan is driven again.
- dry runs (`corrections.dryrun.*`, core request-reply, queue group): read-only; every
  request is answered, with a bounded body.
- the outbox relay: republishes events a dead process committed but never published.

All pull consumers run the inbound pipeline (workers.inbound): an unreadable message is
dead-lettered and terminated, a failing one retried with backoff up to MaxDeliver, then
dead-lettered (rule max_deliveries).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from contracts.corrections import subjects
from contracts.corrections.dry_run import DryRunReport
from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.refusals import (
    CancelRefused,
    CorrectionRejected,
    DryRunError,
    FailRefused,
    RetryRefused,
)
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.wire import (
    read_cancel,
    read_fail,
    read_request,
    read_retry,
)
from contracts.impact.errors import TargetNotFound
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.subject_tokens import plan_of
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable, describe, guarded, truncate
from services.corrections.policy import CrashHook, no_crash
from services.corrections.service import CorrectionService
from store.deliveries import DeliveryFailures
from workers.inbound import Batch
from workers.pull import BatchPuller, durable_config
from workers.settings import Settings

log = logging.getLogger(__name__)

Service = Callable[[], CorrectionService]

ERROR_CODES: dict[type[Exception], str] = {
    TargetNotFound: "target_not_found",
    TargetInOtherPlan: "target_in_other_plan",
    TargetSuperseded: "target_superseded",
}


def crash_hook(step: str | None) -> CrashHook:
    """TEST ONLY: CORRECTIONS_CRASH_AT=<step> makes the worker SIGKILL itself at that step,
    so tests can show nothing is lost or doubled when a process dies there."""
    if not step:
        return no_crash

    def crash(at: str) -> None:
        if at == step:
            log.warning("CORRECTIONS_CRASH_AT=%s: killing the worker (test hook)", at)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


async def _reject(service: CorrectionService, batch: Batch[Any], m: Msg,
                  why: Unreadable) -> None:
    meta = m.metadata
    await service.reject(m.subject, dict(m.headers or {}), m.data,
                         stream_sequence=meta.sequence.stream, delivered=meta.num_delivered,
                         unreadable=why)
    await batch.term(m)


class _CorrectionFamily:
    """What requests and cancels share: the unreadable and exhausted paths."""

    prefix: str

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def unreadable(self, m: Msg, why: RuleViolation) -> Unreadable:
        return Unreadable(plan_of(m.subject, self.prefix), None, (why,))

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().reject(
            msg.subject, dict(msg.headers), msg.data, stream_sequence=msg.stream_sequence,
            delivered=msg.delivered, unreadable=Unreadable(
                plan_of(msg.subject, self.prefix), None, tuple(violations)))


class RequestConsumer(_CorrectionFamily):
    """corrections.requested.*: record each request PENDING (in stream order: the plan's
    order), try to drive the plans, then ack every recorded request."""

    prefix = subjects.REQUESTED_PREFIX

    def __init__(self, service: Service, settings: Settings,
                 crash: CrashHook = no_crash) -> None:
        super().__init__(service, settings)
        self._crash = crash

    def read(self, m: Msg, now: datetime) -> CorrectionRequest | Unreadable:
        return read_request(m.subject, m.data,
                            max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[CorrectionRequest | Unreadable]) -> None:
        svc = self._service()
        recorded: list[tuple[Msg, CorrectionRequest]] = []

        async def record(m: Msg, r: CorrectionRequest | Unreadable) -> None:
            if isinstance(r, Unreadable):
                await _reject(svc, batch, m, r)
            else:
                await svc.request_correction(r, arrival=m.metadata.sequence.stream,
                                             trace=m.headers)
                recorded.append((m, r))

        await batch.each(record)
        plans = list(dict.fromkeys(req.plan_id for _, req in recorded))
        results = await asyncio.gather(*(svc.run_plan(p) for p in plans),
                                       return_exceptions=True)
        for plan_id, res in zip(plans, results, strict=True):
            if isinstance(res, BaseException):
                log.warning("driving plan %s failed (%s); the sweep takes it up again",
                            plan_id, describe(res))
        self._crash("before_ack")
        for m, _ in recorded:
            await batch.ack(m)


class CancelConsumer(_CorrectionFamily):
    """corrections.cancel.*: cancel, or report the refusal."""

    prefix = subjects.CANCEL_PREFIX

    def read(self, m: Msg, now: datetime) -> CancelRequest | Unreadable:
        return read_cancel(m.subject, m.data,
                           max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[CancelRequest | Unreadable]) -> None:
        svc = self._service()

        async def cancel(m: Msg, r: CancelRequest | Unreadable) -> None:
            await self._cancel(svc, batch, m, r)

        await batch.each(cancel)

    async def _cancel(self, svc: CorrectionService, batch: Batch[Any], m: Msg,
                      r: CancelRequest | Unreadable) -> None:
        if isinstance(r, Unreadable):
            await _reject(svc, batch, m, r)
            return
        settings = self._settings
        waited = (m.metadata.num_delivered - 1) * settings.corrections_retry_delay
        if await svc.get_correction(r.correction_id) is None and \
                waited < settings.corrections_cancel_wait_seconds:
            # The request travels on another consumer and may simply not be recorded yet.
            await batch.nak(m, settings.corrections_retry_delay)
            return
        outcome = await svc.cancel_correction(r.correction_id, r.reason, plan_id=r.plan_id)
        if isinstance(outcome, CancelRefused):
            log.info("cancel refused: %s", outcome.reason)
        await batch.ack(m)


class FailConsumer(_CorrectionFamily):
    """corrections.fail.*: an operator ends a correction stuck in ANALYZING or EXECUTING
    FAILED, or the refusal is reported."""

    prefix = subjects.FAIL_PREFIX

    def read(self, m: Msg, now: datetime) -> FailRequest | Unreadable:
        return read_fail(m.subject, m.data, max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[FailRequest | Unreadable]) -> None:
        svc = self._service()

        async def fail(m: Msg, r: FailRequest | Unreadable) -> None:
            if isinstance(r, Unreadable):
                await _reject(svc, batch, m, r)
                return
            outcome = await svc.fail_correction(r.correction_id, r.reason, plan_id=r.plan_id)
            if isinstance(outcome, FailRefused):
                log.info("fail refused: %s", outcome.reason)
            await batch.ack(m)

        await batch.each(fail)


class RetryConsumer(_CorrectionFamily):
    """corrections.retry.*: an operator starts a new round of a FAILED correction, or the
    refusal is reported; then the retried plans are driven (the recovery sweep takes
    them up if this fails)."""

    prefix = subjects.RETRY_PREFIX

    def read(self, m: Msg, now: datetime) -> RetryRequest | Unreadable:
        return read_retry(m.subject, m.data, max_payload_bytes=self._settings.max_payload_bytes)

    async def decide(self, batch: Batch[RetryRequest | Unreadable]) -> None:
        svc = self._service()
        retried: list[str] = []

        async def retry(m: Msg, r: RetryRequest | Unreadable) -> None:
            if isinstance(r, Unreadable):
                await _reject(svc, batch, m, r)
                return
            outcome = await svc.retry_correction(
                r.correction_id, r.retry_id, plan_id=r.plan_id, reason=r.reason,
                requested_by=r.requested_by)
            if isinstance(outcome, RetryRefused):
                log.info("retry refused: %s", outcome.reason)
            else:
                retried.append(r.plan_id)
            await batch.ack(m)

        await batch.each(retry)
        plans = list(dict.fromkeys(retried))
        results = await asyncio.gather(*(svc.run_plan(p) for p in plans),
                                       return_exceptions=True)
        for plan_id, res in zip(plans, results, strict=True):
            if isinstance(res, BaseException):
                log.warning("driving plan %s failed (%s); the sweep takes it up again",
                            plan_id, describe(res))


async def answer_dry_run(svc: CorrectionService, subject: str, data: bytes,
                         max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> bytes:
    """The reply body: a DryRunReport, or a DryRunError saying why there is none."""
    plan = plan_of(subject, subjects.DRYRUN_PREFIX)
    r = guarded(lambda: read_request(subject, data, prefix=subjects.DRYRUN_PREFIX,
                                     max_payload_bytes=max_payload_bytes))
    if isinstance(r, RuleViolation):
        r = Unreadable(plan, None, (r,))
    if isinstance(r, Unreadable):
        err = DryRunError(error="invalid_request", message=r.reason,
                          correction_id=r.message_id, plan_id=plan)
        return err.model_dump_json().encode()
    try:
        report = await svc.generate_dry_run_report(r)
    except (TargetNotFound, TargetInOtherPlan, TargetSuperseded) as exc:
        err = DryRunError(error=ERROR_CODES[type(exc)], message=str(exc),
                          correction_id=r.correction_id, plan_id=r.plan_id,
                          decision_id=r.decision_id)
        return err.model_dump_json().encode()
    return report.model_dump_json().encode()


def _internal_error(subject: str, message: str) -> bytes:
    return DryRunError(error="internal_error", message=truncate(message),
                       plan_id=plan_of(subject, subjects.DRYRUN_PREFIX),
                       ).model_dump_json().encode()


async def start_dry_run(nc: Client, service: Service,
                        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Subscription:
    """Every request is answered: with the report, or a DryRunError, never over the
    connection's payload limit."""
    async def on_request(msg: Msg) -> None:
        try:
            body = await answer_dry_run(service(), msg.subject, msg.data, max_payload_bytes)
        except Exception as exc:
            log.warning("dry run on %s failed: %s", msg.subject, describe(exc))
            body = _internal_error(msg.subject, describe(exc))
        if len(body) > nc.max_payload:
            body = _internal_error(msg.subject, f"the report is {len(body)} bytes, over the "
                                   f"{nc.max_payload}-byte payload limit")
        if msg.reply:
            try:
                await msg.respond(body)
            except Exception as exc:
                log.warning("could not answer the dry run on %s: %s", msg.subject,
                            describe(exc))

    return await nc.subscribe(subjects.ALL_DRYRUNS, queue=subjects.DRYRUN_QUEUE, cb=on_request)


async def relay_loop(service: Service, settings: Settings) -> None:
    """Republish what a dead process left in the outbox: all of it at start, then every
    interval whatever is older than the grace period (fresher events are their step's)."""
    first = True
    while True:
        try:
            before = None if first else utc_now() - timedelta(
                seconds=settings.outbox_relay_grace)
            n = await service().relay(before)
            if n:
                log.info("relayed the pending events of %d correction(s)", n)
            first = False
        except Exception:
            log.exception("outbox relay failed; retrying")
        await asyncio.sleep(settings.outbox_relay_interval)


def _puller(js: JetStreamContext, durable: str, subject: str, settings: Settings,
            consumer: RequestConsumer | CancelConsumer | FailConsumer | RetryConsumer, *,
            failures: DeliveryFailures | None, waits: int = 0) -> BatchPuller[Any]:
    config = durable_config(durable, subject, ack_wait=settings.corrections_ack_wait_seconds,
                            max_ack_pending=1000)
    common: dict[str, Any] = {"stream": subjects.CORRECTIONS_STREAM, "subject": subject,
                              "config": config, "batch_size": settings.corrections_batch_size,
                              "max_wait": 1.0, "retry": settings.retry(waits),
                              "failures": failures}
    return BatchPuller(js, consumer=consumer, **common)


def correction_pullers(js: JetStreamContext, settings: Settings, service: Service,
                       crash: CrashHook = no_crash,
                       failures: DeliveryFailures | None = None) -> list[BatchPuller[Any]]:
    return [
        _puller(js, subjects.CORRECTOR_DURABLE, subjects.ALL_REQUESTED, settings,
                RequestConsumer(service, settings, crash), failures=failures),
        _puller(js, subjects.CANCELLER_DURABLE, subjects.ALL_CANCELS, settings,
                CancelConsumer(service, settings), failures=failures,
                # A cancel waiting for its request is redelivered: waits, not failures.
                waits=math.ceil(settings.corrections_cancel_wait_seconds
                                / settings.corrections_retry_delay) + 1),
        _puller(js, subjects.FAILER_DURABLE, subjects.ALL_FAILS, settings,
                FailConsumer(service, settings), failures=failures),
        _puller(js, subjects.RETRIER_DURABLE, subjects.ALL_RETRIES, settings,
                RetryConsumer(service, settings), failures=failures),
    ]


REQUEST_DOC = (
    "Operators publish a CorrectionRequest with header Nats-Msg-Id = correction_id; a second "
    "request with the same correction_id creates nothing. The correction is recorded PENDING, "
    "then run: the plan's corrections one at a time in arrival order. Unreadable requests "
    "are dead-lettered and reported on corrections.rejected.<plan_id>."
)
DRYRUN_DOC = (
    "Core NATS request-reply (not captured by any stream): send a CorrectionRequest, receive "
    "a DryRunReport, or a DryRunError (error: target_not_found | target_in_other_plan | "
    "invalid_request | internal_error). A superseded target gets a report whose warnings and "
    "current_replacement_id name the decision that replaced it. Nothing is written."
)
FAIL_DOC = (
    "An operator ends a correction stuck in ANALYZING or EXECUTING as FAILED; the reason "
    "becomes its error and is kept in its history (a failed event follows, and its "
    "executing attempt ends failed). Otherwise the refusal is published to "
    "corrections.fail_refused.<plan_id>. Nats-Msg-Id: fail:<correction_id>:<sha256(reason)[:16]>."
)
CANCEL_DOC = (
    "Cancel a PENDING or ANALYZING correction (a cancelled event follows). Otherwise the "
    "refusal is published to corrections.cancel_refused.<plan_id>."
)
RETRY_DOC = (
    "An operator starts a new round of a FAILED correction: failed -> pending (a pending "
    "event with round n+1 and the retry's reason follows), then it is analysed again and "
    "executed in a new attempt; earlier attempts stay listed. Refused on "
    "corrections.retry_refused.<plan_id> when it is not failed or its target can no "
    "longer be corrected. Nats-Msg-Id: retry:<correction_id>:<retry_id>."
)


def document_corrections(broker: NatsBroker, *, for_docs: bool) -> None:
    """Describe the correction subjects in the AsyncAPI document (our own pull loops and a
    raw nats-py subscription do the work, as for the recorder)."""
    if for_docs:
        @broker.subscriber(f"{subjects.REQUESTED_PREFIX}.{{plan_id}}",
                           title="corrections.requested", description=REQUEST_DOC)
        async def request(body: CorrectionRequest) -> None:  # pragma: no cover - docs only
            raise NotImplementedError

        @broker.subscriber(f"{subjects.DRYRUN_PREFIX}.{{plan_id}}",
                           title="corrections.dryrun", description=DRYRUN_DOC)
        async def dryrun(body: CorrectionRequest) -> DryRunReport:  # pragma: no cover
            raise NotImplementedError

        @broker.subscriber(f"{subjects.CANCEL_PREFIX}.{{plan_id}}",
                           title="corrections.cancel", description=CANCEL_DOC)
        async def cancel(body: CancelRequest) -> None:  # pragma: no cover - docs only
            raise NotImplementedError

        @broker.subscriber(f"{subjects.FAIL_PREFIX}.{{plan_id}}",
                           title="corrections.fail", description=FAIL_DOC)
        async def fail(body: FailRequest) -> None:  # pragma: no cover - docs only
            raise NotImplementedError

        @broker.subscriber(f"{subjects.RETRY_PREFIX}.{{plan_id}}",
                           title="corrections.retry", description=RETRY_DOC)
        async def retry(body: RetryRequest) -> None:  # pragma: no cover - docs only
            raise NotImplementedError

    broker.publisher(
        f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{{status}}", title="corrections.events",
        schema=CorrectionTransitioned,
        description="One per lifecycle transition, exactly once, in order per correction "
        "(status: pending, analyzing, executing, applied, failed, cancelled). Lists carry "
        "their first 100 IDs and a count, so an event stays far under the payload limit. "
        "Nats-Msg-Id: <correction_id>:<status>, or <correction_id>:<status>:r<round> after "
        "an operator's retry. Subscribe e.g. corrections.events.*.applied.")
    broker.publisher(
        f"{subjects.ATTEMPTS_PREFIX}.{{plan_id}}.{{state}}", title="corrections.attempts",
        schema=AttemptTransitioned,
        description="One per attempt state change (pending, executing, complete, failed). "
        "Nats-Msg-Id: attempt:<attempt_id>:<state>.")
    broker.publisher(
        f"{subjects.CANCEL_REFUSED_PREFIX}.{{plan_id}}", title="corrections.cancel_refused",
        schema=CancelRefused,
        description="A cancel that came too late (or named no correction of the plan).")
    broker.publisher(
        f"{subjects.REJECTED_PREFIX}.{{plan_id}}", title="corrections.rejected",
        schema=CorrectionRejected,
        description="An unreadable request or cancel, kept in dead_letters; plan_id "
        "'unknown' when unreadable.")
    broker.publisher(
        f"{subjects.FAIL_REFUSED_PREFIX}.{{plan_id}}", title="corrections.fail_refused",
        schema=FailRefused,
        description="An operator's fail of a correction that is not analyzing or executing "
        "(or of no correction of the plan).")
    broker.publisher(
        f"{subjects.RETRY_REFUSED_PREFIX}.{{plan_id}}", title="corrections.retry_refused",
        schema=RetryRefused,
        description="An operator's retry of a correction that is not failed (or of no "
        "correction of the plan), or whose target can no longer be corrected. "
        "Nats-Msg-Id: retry_refused:<correction_id>:<status>:<round>.")
    broker.publisher(
        f"{subjects.RESUME_PREFIX}.{{plan_id}}", title="corrections.resume",
        schema=ResumeInstruction,
        description="Where the plan's runtime goes on, once per applied correction, in the "
        "stream (a runtime that was down gets it when it comes back). revert: go back to "
        "target.actor_state_ref and record what follows under resume_at (the replacement); "
        "append: run the child plan, its decisions under resume_at (the child's root). "
        "plan_id is the corrected plan. Nats-Msg-Id: resume:<correction_id>. "
        "Client: DecisionRecorder.on_resume (docs/clients.md).")
