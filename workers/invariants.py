"""The invariant workers: thin adapters from NATS to `services.invariants`.

- reconciler (`decisions.persisted.*` on DECISIONS, durable pull consumer): for each new
  plan root, publishes its invariant_enforced decisions to decisions.recorded.<plan_id>
  and acks the persisted events only after JetStream stored them. Non-root events are
  acked untouched, and so is a body that cannot be read (the recorder writes these
  events; anything else on the subject is someone else's, logged and acked).
- violations (`invariants.violations.*` on INVARIANTS, durable pull consumer): store
  each report and announce it; a report that can never be stored is dead-lettered,
  reported on invariants.rejected.<plan_id> and terminated, never retried.

Both run the inbound pipeline (workers.inbound): a failure is retried with backoff up
to MaxDeliver, then the message is dead-lettered (rule max_deliveries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy

from contracts.decisions.subjects import DECISIONS_STREAM, PERSISTED_PREFIX, plan_of_subject
from contracts.invariants import subjects
from contracts.invariants.errors import ViolationConflict
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import (
    ViolationEvent,
    ViolationRejected,
    read_violation,
)
from contracts.recording.events import DecisionPersisted, read_persisted_root
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from services.invariants import InvariantService
from store.dead_letters import DeadLetterRepository
from store.deliveries import DeliveryFailures
from store.errors import InvariantNotFound
from workers.inbound import Batch
from workers.pull import BatchPuller, durable_config
from workers.settings import Settings

log = logging.getLogger(__name__)

Service = Callable[[], InvariantService]


class ReconcilerConsumer:
    """decisions.persisted.*: reconcile the roots of a batch together (one read of the
    roots, one of the invariants, one pipelined publish), then ack the whole batch."""

    def __init__(self, service: Service, settings: Settings,
                 dead_letters: Callable[[], DeadLetterRepository] | None = None) -> None:
        self._service = service
        self._settings = settings
        self._dead_letters = dead_letters

    def read(self, m: Msg, now: datetime) -> DecisionPersisted | None:
        read = read_persisted_root(m.data, self._settings.max_payload_bytes)
        if isinstance(read, RuleViolation):
            return self.unreadable(m, read)
        return read

    def unreadable(self, m: Msg, why: RuleViolation) -> DecisionPersisted | None:
        # The recorder wrote it, so this is someone else's message on our subject; there
        # is nothing to reconcile in it.
        log.warning("ignoring an unreadable event on %s: %s", m.subject, why.message)
        return None

    async def decide(self, batch: Batch[DecisionPersisted | None]) -> None:
        # Non-roots first: if reconciling fails, only the roots are retried.
        roots: list[tuple[Msg, DecisionPersisted]] = []
        for m, r in batch.items:
            if r is None:
                await batch.ack(m)
            else:
                roots.append((m, r))
        if not roots:
            return
        recorded = await self._service().reconcile([r for _, r in roots])
        if recorded:
            log.info("published %d invariant_enforced decision(s) for %d root(s)",
                     len(recorded), len(roots))
        for m, _ in roots:
            await batch.ack(m)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        """A root never reconciled: kept in dead_letters (no event: the plan runs
        without its invariant_enforced decisions, which an operator should know)."""
        plan = plan_of_subject(msg.subject, PERSISTED_PREFIX)
        log.error("plan %s was never reconciled with its invariants: %s", plan,
                  "; ".join(v.message for v in violations[:1]))
        if self._dead_letters is None:
            return
        await self._dead_letters().keep([DeadLetter.of_message(
            id=dead_letter_id(DECISIONS_STREAM, msg.stream_sequence), subject=msg.subject,
            headers=dict(msg.headers), data=msg.data,
            plan_id=plan.upper() if plan and is_ulid(plan) else None, decision_id=None,
            errors=list(violations), rejected_at=utc_now(), delivered=msg.delivered)])


def _rejection(plan_id: str | None, violation_id: str | None, rule: Rule, field: str,
               message: str) -> Unreadable:
    return Unreadable(plan_id, violation_id,
                            (RuleViolation(rule=rule, field=field, message=message),))


class ViolationConsumer:
    """invariants.violations.*: store and announce each report, or dead-letter it."""

    def __init__(self, service: Service, settings: Settings) -> None:
        self._service = service
        self._settings = settings

    def read(self, m: Msg, now: datetime) -> InvariantViolation | Unreadable:
        return read_violation(m.subject, dict(m.headers or {}), m.data, now,
                              max_payload_bytes=self._settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> InvariantViolation | Unreadable:
        return Unreadable(_subject_plan(m.subject), None, (why,))

    async def decide(self, batch: Batch[InvariantViolation | Unreadable]) -> None:
        svc = self._service()

        async def handle(m: Msg, read: InvariantViolation | Unreadable) -> None:
            r = await self._report(svc, read) if isinstance(read, InvariantViolation) \
                else read
            if isinstance(r, Unreadable):
                meta = m.metadata
                await svc.reject_report(m.subject, dict(m.headers or {}), m.data,
                                        stream_sequence=meta.sequence.stream,
                                        delivered=meta.num_delivered, unreadable=r)
                await batch.term(m)
            else:
                await batch.ack(m)

        await batch.each(handle)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().reject_report(
            msg.subject, dict(msg.headers), msg.data, stream_sequence=msg.stream_sequence,
            delivered=msg.delivered,
            unreadable=Unreadable(_subject_plan(msg.subject), None, tuple(violations)))

    async def _report(self, svc: InvariantService,
                      v: InvariantViolation) -> InvariantViolation | Unreadable:
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


def _subject_plan(subject: str) -> str | None:
    plan = subjects.plan_of(subject)
    return plan.upper() if plan and is_ulid(plan) else None


def invariant_pullers(js: JetStreamContext, settings: Settings, service: Service,
                      dead_letters: Callable[[], DeadLetterRepository] | None = None,
                      failures: DeliveryFailures | None = None) -> list[BatchPuller[Any]]:
    persisted = f"{PERSISTED_PREFIX}.*"
    return [
        # NEW: the first start over an existing ledger does not reconcile old plans with
        # today's invariants; from then on the durable consumer misses nothing.
        BatchPuller(js, stream=DECISIONS_STREAM, subject=persisted,
                    config=durable_config(subjects.RECONCILER_DURABLE, persisted,
                                          ack_wait=settings.invariants_ack_wait_seconds,
                                          max_ack_pending=20_000,
                                          deliver=DeliverPolicy.NEW),
                    batch_size=settings.reconciler_batch_size, max_wait=1.0,
                    consumer=ReconcilerConsumer(service, settings, dead_letters),
                    retry=settings.retry(), failures=failures),
        BatchPuller(js, stream=subjects.INVARIANTS_STREAM, subject=subjects.ALL_VIOLATIONS,
                    config=durable_config(subjects.VIOLATIONS_DURABLE, subjects.ALL_VIOLATIONS,
                                          ack_wait=settings.invariants_ack_wait_seconds,
                                          max_ack_pending=20_000),
                    batch_size=settings.invariants_batch_size, max_wait=1.0,
                    consumer=ViolationConsumer(service, settings),
                    retry=settings.retry(), failures=failures),
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
