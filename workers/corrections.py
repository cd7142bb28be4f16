"""The correction workers: thin adapters from NATS to `services.corrections`.

- requests (`corrections.requested.*`, durable pull consumer): record each request
  PENDING, then drive its plan. A request is acked only once its correction is
  terminal (committed); while another driver holds its plan it is nak'ed with a
  delay, so if that driver dies the redelivery drives the plan again.
- cancels (`corrections.cancel.*`, durable pull consumer).
- operator fails (`corrections.fail.*`, durable pull consumer): end a stuck correction.
- dry runs (`corrections.dryrun.*`, core request-reply, queue group): read-only.
- the outbox relay: republishes events a dead process committed but never published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from contracts import correction_subjects as subjects
from contracts.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.correction_events import (
    AttemptTransitioned,
    CancelRefused,
    CorrectionRejected,
    CorrectionTransitioned,
    DryRunError,
    FailRefused,
)
from contracts.correction_wire import Unreadable, read_cancel, read_fail, read_request
from contracts.corrections import CancelRequest, CorrectionRequest, FailRequest, bounded_text
from contracts.errors import TargetInOtherPlan, TargetNotFound, TargetSuperseded
from contracts.impact import DryRunReport
from contracts.timestamps import utc_now
from services.corrections import CorrectionService, CrashHook, no_crash
from workers.pull import BatchPuller
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


def _consumer(durable: str, subject: str, settings: Settings) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=durable, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL, ack_wait=settings.corrections_ack_wait_seconds,
        max_deliver=-1,  # a request is redelivered until its correction is terminal
        max_ack_pending=1000)


async def _heartbeat(msgs: list[Msg], every: float) -> None:
    """Tell JetStream the messages in hand are still being worked (a long revert)."""
    while True:
        await asyncio.sleep(every)
        for m in msgs:
            with contextlib.suppress(Exception):
                await m.in_progress()


async def _reject(service: CorrectionService, m: Msg, why: Unreadable) -> None:
    meta = m.metadata
    await service.reject(m.subject, dict(m.headers or {}), m.data,
                         stream_sequence=meta.sequence.stream, delivered=meta.num_delivered,
                         unreadable=why)
    await m.term()


class RequestConsumer:
    """corrections.requested.*: record each request PENDING (in stream order: the plan's
    order), drive the plans, ack what is terminal, nak the rest with a delay."""

    def __init__(self, service: Service, settings: Settings,
                 crash: CrashHook = no_crash) -> None:
        self._service = service
        self._settings = settings
        self._crash = crash

    def prepare(self, msgs: list[Msg]) -> list[CorrectionRequest | Unreadable]:
        limit = self._settings.max_payload_bytes
        return [read_request(m.subject, m.data, max_payload_bytes=limit) for m in msgs]

    async def commit(self, msgs: list[Msg], prepared: list[CorrectionRequest | Unreadable]
                     ) -> None:
        beat = asyncio.create_task(
            _heartbeat(msgs, self._settings.corrections_ack_wait_seconds / 3))
        try:
            await self._commit(msgs, prepared)
        finally:
            beat.cancel()

    async def _commit(self, msgs: list[Msg],
                      prepared: list[CorrectionRequest | Unreadable]) -> None:
        svc, delay = self._service(), self._settings.corrections_retry_delay
        readable: list[tuple[Msg, CorrectionRequest]] = []
        for m, r in zip(msgs, prepared, strict=True):
            if isinstance(r, Unreadable):
                await _reject(svc, m, r)
            else:
                readable.append((m, r))
        try:
            for m, req in readable:
                await svc.request_correction(req, arrival=m.metadata.sequence.stream)
            plans = list(dict.fromkeys(req.plan_id for _, req in readable))
            results = await asyncio.gather(*(svc.drive_plan(p) for p in plans),
                                           return_exceptions=True)
            for plan_id, res in zip(plans, results, strict=True):
                if isinstance(res, BaseException):
                    log.warning("driving plan %s failed; its requests will be redelivered",
                                plan_id, exc_info=res)
            self._crash("before_ack")
            for m, req in readable:
                c = await svc.get_correction(req.correction_id)
                if c is not None and c.is_terminal:
                    await m.ack()
                else:
                    await m.nak(delay=delay)
        except Exception:
            log.exception("correction batch failed; it will be redelivered")
            for m, _ in readable:
                await m.nak(delay=delay)


class CancelConsumer:
    """corrections.cancel.*: cancel, or report the refusal."""

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def prepare(self, msgs: list[Msg]) -> list[CancelRequest | Unreadable]:
        limit = self._settings.max_payload_bytes
        return [read_cancel(m.subject, m.data, max_payload_bytes=limit) for m in msgs]

    async def commit(self, msgs: list[Msg], prepared: list[CancelRequest | Unreadable]
                     ) -> None:
        svc = self._service()
        for m, r in zip(msgs, prepared, strict=True):
            try:
                await self._cancel(svc, m, r)
            except Exception:
                log.exception("cancel on %s failed; it will be redelivered", m.subject)
                await m.nak(delay=self._settings.corrections_retry_delay)

    async def _cancel(self, svc: CorrectionService, m: Msg,
                      r: CancelRequest | Unreadable) -> None:
        if isinstance(r, Unreadable):
            await _reject(svc, m, r)
            return
        settings = self._settings
        waited = (m.metadata.num_delivered - 1) * settings.corrections_retry_delay
        if await svc.get_correction(r.correction_id) is None and \
                waited < settings.corrections_cancel_wait_seconds:
            # The request travels on another consumer and may simply not be recorded yet.
            await m.nak(delay=settings.corrections_retry_delay)
            return
        outcome = await svc.cancel_correction(r.correction_id, r.reason, plan_id=r.plan_id)
        if isinstance(outcome, CancelRefused):
            log.info("cancel refused: %s", outcome.reason)
        await m.ack()


class FailConsumer:
    """corrections.fail.*: an operator ends a correction stuck in ANALYZING or EXECUTING
    FAILED, or the refusal is reported."""

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def prepare(self, msgs: list[Msg]) -> list[FailRequest | Unreadable]:
        limit = self._settings.max_payload_bytes
        return [read_fail(m.subject, m.data, max_payload_bytes=limit) for m in msgs]

    async def commit(self, msgs: list[Msg], prepared: list[FailRequest | Unreadable]
                     ) -> None:
        svc = self._service()
        for m, r in zip(msgs, prepared, strict=True):
            try:
                if isinstance(r, Unreadable):
                    await _reject(svc, m, r)
                    continue
                outcome = await svc.fail_correction(r.correction_id, r.reason,
                                                    plan_id=r.plan_id)
                if isinstance(outcome, FailRefused):
                    log.info("fail refused: %s", outcome.reason)
                await m.ack()
            except Exception:
                log.exception("fail on %s failed; it will be redelivered", m.subject)
                await m.nak(delay=self._settings.corrections_retry_delay)


async def answer_dry_run(svc: CorrectionService, subject: str, data: bytes,
                         max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> bytes:
    """The reply body: a DryRunReport, or a DryRunError saying why there is none."""
    plan = subjects.plan_of(subject, subjects.DRYRUN_PREFIX)
    r = read_request(subject, data, prefix=subjects.DRYRUN_PREFIX,
                     max_payload_bytes=max_payload_bytes)
    if isinstance(r, Unreadable):
        err = DryRunError(error="invalid_request", message=r.reason,
                          correction_id=r.correction_id, plan_id=plan)
        return err.model_dump_json().encode()
    try:
        report = await svc.generate_dry_run_report(r)
    except (TargetNotFound, TargetInOtherPlan, TargetSuperseded) as exc:
        err = DryRunError(error=ERROR_CODES[type(exc)], message=str(exc),
                          correction_id=r.correction_id, plan_id=r.plan_id,
                          decision_id=r.decision_id)
        return err.model_dump_json().encode()
    return report.model_dump_json().encode()


async def start_dry_run(nc: Client, service: Service,
                        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Subscription:
    async def on_request(msg: Msg) -> None:
        try:
            body = await answer_dry_run(service(), msg.subject, msg.data, max_payload_bytes)
        except Exception as exc:
            log.exception("dry run on %s failed", msg.subject)
            body = DryRunError(error="internal_error",
                               message=bounded_text(f"{type(exc).__name__}: {exc}"),
                               plan_id=subjects.plan_of(msg.subject, subjects.DRYRUN_PREFIX),
                               ).model_dump_json().encode()
        if msg.reply:
            await msg.respond(body)

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
            consumer: RequestConsumer | CancelConsumer | FailConsumer) -> BatchPuller[Any]:
    config = _consumer(durable, subject, settings)
    common: dict[str, Any] = {"stream": subjects.CORRECTIONS_STREAM, "subject": subject,
                              "config": config, "batch_size": settings.corrections_batch_size,
                              "max_wait": 1.0}
    return BatchPuller(js, consumer=consumer, **common)


def correction_pullers(js: JetStreamContext, settings: Settings, service: Service,
                       crash: CrashHook = no_crash) -> list[BatchPuller[Any]]:
    return [
        _puller(js, subjects.CORRECTOR_DURABLE, subjects.ALL_REQUESTED, settings,
                RequestConsumer(service, settings, crash)),
        _puller(js, subjects.CANCELLER_DURABLE, subjects.ALL_CANCELS, settings,
                CancelConsumer(service, settings)),
        _puller(js, subjects.FAILER_DURABLE, subjects.ALL_FAILS, settings,
                FailConsumer(service, settings)),
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
    "target_superseded | invalid_request | internal_error). Nothing is written."
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

    broker.publisher(
        f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{{status}}", title="corrections.events",
        schema=CorrectionTransitioned,
        description="One per lifecycle transition, exactly once, in order per correction "
        "(status: pending, analyzing, executing, applied, failed, cancelled). Lists carry "
        "their first 100 IDs and a count, so an event stays far under the payload limit. "
        "Nats-Msg-Id: <correction_id>:<status>. Subscribe e.g. corrections.events.*.applied.")
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
        f"{subjects.FAIL_REFUSED_PREFIX}.{{plan_id}}", title="corrections.fail_refused",
        schema=FailRefused,
        description="An operator's fail of a correction that is not analyzing or executing "
        "(or of no correction of the plan).")
    broker.publisher(
        f"{subjects.REJECTED_PREFIX}.{{plan_id}}", title="corrections.rejected",
        schema=CorrectionRejected,
        description="An unreadable request or cancel, kept in dead_letters; plan_id "
        "'unknown' when unreadable.")
