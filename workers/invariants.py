"""The invariant workers: thin adapters from NATS to `services.invariants`.

- reconciler (`decisions.persisted.*` on DECISIONS, durable pull consumer): for each new
  plan root, publishes its invariant_enforced decisions to decisions.recorded.<plan_id>
  and acks the persisted events only after JetStream stored them. Non-root events are
  acked untouched.
- violations (`invariants.violations.*` on INVARIANTS, durable pull consumer): store
  each report and announce it; a report that can never be stored is dead-lettered,
  reported on invariants.rejected.<plan_id> and terminated, never retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from contracts import invariant_subjects as subjects
from contracts.invariant_wire import (
    UnreadableReport,
    ViolationEvent,
    ViolationRejected,
    read_violation,
)
from contracts.invariants import InvariantViolation, ViolationConflict
from contracts.recording import DecisionPersisted, read_persisted_root
from contracts.rules import Rule, RuleViolation
from contracts.subjects import DECISIONS_STREAM, PERSISTED_PREFIX
from contracts.timestamps import utc_now
from services.invariants import InvariantService
from store.invariants import InvariantNotFound
from workers.pull import BatchPuller
from workers.settings import Settings

log = logging.getLogger(__name__)

Service = Callable[[], InvariantService]


class ReconcilerConsumer:
    """decisions.persisted.*: reconcile the roots of a batch together (one read of the
    roots, one of the invariants, one pipelined publish), then ack the whole batch."""

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def prepare(self, msgs: list[Msg]) -> list[DecisionPersisted]:
        roots: list[DecisionPersisted] = []
        for m in msgs:
            read = read_persisted_root(m.data, self._settings.max_payload_bytes)
            if isinstance(read, DecisionPersisted):
                roots.append(read)
            elif read is not None:
                # The recorder wrote it, so this is someone else's message on our subject;
                # there is nothing to reconcile in it.
                log.warning("ignoring an unreadable event on %s: %s", m.subject, read)
        return roots

    async def commit(self, msgs: list[Msg], prepared: list[DecisionPersisted]) -> None:
        try:
            recorded = await self._service().reconcile(prepared)
        except Exception:
            log.exception("reconciling %d root(s) failed; the batch will be redelivered",
                          len(prepared))
            for m in msgs:
                await m.nak(delay=self._settings.invariants_retry_delay)
            return
        if recorded:
            log.info("published %d invariant_enforced decision(s) for %d root(s)",
                     len(recorded), len(prepared))
        for m in msgs:
            await m.ack()


def _rejection(plan_id: str | None, violation_id: str | None, rule: Rule, field: str,
               message: str) -> UnreadableReport:
    return UnreadableReport(plan_id, violation_id,
                            (RuleViolation(rule=rule, field=field, message=message),))


class ViolationConsumer:
    """invariants.violations.*: store and announce each report, or dead-letter it."""

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def prepare(self, msgs: list[Msg]) -> list[InvariantViolation | UnreadableReport]:
        now, limit = utc_now(), self._settings.max_payload_bytes
        return [read_violation(m.subject, dict(m.headers or {}), m.data, now,
                               max_payload_bytes=limit) for m in msgs]

    async def commit(self, msgs: list[Msg],
                     prepared: list[InvariantViolation | UnreadableReport]) -> None:
        svc = self._service()
        for m, read in zip(msgs, prepared, strict=True):
            try:
                r = await self._report(svc, read) if isinstance(read, InvariantViolation) \
                    else read
                if isinstance(r, UnreadableReport):
                    meta = m.metadata
                    await svc.reject_report(m.subject, dict(m.headers or {}), m.data,
                                            stream_sequence=meta.sequence.stream,
                                            delivered=meta.num_delivered, unreadable=r)
                    await m.term()
                else:
                    await m.ack()
            except Exception:
                log.exception("violation report on %s failed; it will be redelivered",
                              m.subject)
                await m.nak(delay=self._settings.invariants_retry_delay)

    async def _report(self, svc: InvariantService,
                      v: InvariantViolation) -> InvariantViolation | UnreadableReport:
        """The report as stored, or why it can never be: retrying would not change that."""
        try:
            return await svc.report_violation(v)
        except InvariantNotFound:
            return _rejection(v.plan_id, v.violation_id, Rule.INVARIANT_EXISTS,
                              "invariant_id", f"invariant {v.invariant_id} does not exist "
                              "(agents invariant list shows the invariants)")
        except ViolationConflict as exc:
            return _rejection(v.plan_id, v.violation_id, Rule.VIOLATION_ID_CONFLICT,
                              "violation_id", str(exc))


def _config(durable: str, subject: str, ack_wait: float, *,
            deliver: DeliverPolicy) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=durable, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=deliver, ack_wait=ack_wait,
        max_deliver=-1,  # failures are the database's, not the message's: retry until fixed
        max_ack_pending=20_000)


def invariant_pullers(js: JetStreamContext, settings: Settings,
                      service: Service) -> list[BatchPuller[Any]]:
    persisted = f"{PERSISTED_PREFIX}.*"
    return [
        # NEW: the first start over an existing ledger does not reconcile old plans with
        # today's invariants; from then on the durable consumer misses nothing.
        BatchPuller(js, stream=DECISIONS_STREAM, subject=persisted,
                    config=_config(subjects.RECONCILER_DURABLE, persisted,
                                   settings.invariants_ack_wait_seconds,
                                   deliver=DeliverPolicy.NEW),
                    batch_size=settings.reconciler_batch_size, max_wait=1.0,
                    consumer=ReconcilerConsumer(service, settings)),
        BatchPuller(js, stream=subjects.INVARIANTS_STREAM, subject=subjects.ALL_VIOLATIONS,
                    config=_config(subjects.VIOLATIONS_DURABLE, subjects.ALL_VIOLATIONS,
                                   settings.invariants_ack_wait_seconds,
                                   deliver=DeliverPolicy.ALL),
                    batch_size=settings.invariants_batch_size, max_wait=1.0,
                    consumer=ViolationConsumer(service, settings)),
    ]


VIOLATIONS_DOC = (
    "Agents report an InvariantViolation with header Nats-Msg-Id = violation_id (a retry "
    "is the same report). Leave out resolved_at and resolved_by. The report is stored "
    "once and announced on invariants.events.<plan_id>.violated; an unresolved 'error' "
    "blocks the plan's Execute-phase decisions (rule reconciliation_blocked) until an "
    "operator resolves it. Unreadable reports, reports naming an unknown invariant and "
    "reused violation_ids are dead-lettered and reported on invariants.rejected.<plan_id>."
)


def document_invariants(broker: NatsBroker, *, for_docs: bool) -> None:
    """Describe the invariant subjects in the AsyncAPI document (our own pull loops do
    the work, as for the recorder)."""
    if for_docs:
        @broker.subscriber(f"{subjects.VIOLATIONS_PREFIX}.{{plan_id}}",
                           title="invariants.violations", description=VIOLATIONS_DOC)
        async def report(body: InvariantViolation) -> None:  # pragma: no cover - docs only
            raise NotImplementedError

    broker.publisher(
        f"{subjects.EVENTS_PREFIX}.{{plan_id}}.{{what}}", title="invariants.events",
        schema=ViolationEvent,
        description="INVARIANT_VIOLATED on .violated when a report is stored, "
        "INVARIANT_VIOLATION_RESOLVED on .resolved when an operator resolves it; exactly "
        "once each. Nats-Msg-Id: violation:<violation_id>:<what>.")
    broker.publisher(
        f"{subjects.REJECTED_PREFIX}.{{plan_id}}", title="invariants.rejected",
        schema=ViolationRejected,
        description="A violation report that will never be stored, kept in dead_letters; "
        "plan_id 'unknown' when unreadable. Nats-Msg-Id: rejected:<stream seq>.")
