"""The invariant workers: thin adapters from NATS to `services.invariants`.

- reconciler (`decisions.began.*` on DECISIONS, durable pull consumer): for each new
  plan root, publishes its invariant_enforced decisions to decisions.recorded.<plan_id>
  and acks the began events only after JetStream stored them. The recorder publishes a
  began event for each root it records, beside the root's persisted event, so the
  reconciler reads one message per plan, not one per decision. A body that is not a
  root, or cannot be read, is acked untouched (the recorder writes these events;
  anything else on the subject is someone else's, logged and acked).
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

from nats.aio.msg import Msg

from contracts.decisions.subjects import BEGAN_PREFIX, DECISIONS_STREAM, plan_of_subject
from contracts.decisions.types import DecisionType
from contracts.invariants import subjects
from contracts.invariants.errors import ViolationConflict
from contracts.invariants.families import TEMPLATES, VERDICTS, VIOLATIONS
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import read_violation
from contracts.recording.events import DecisionPersisted, read_persisted_root
from contracts.recording.families import BEGAN
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from contracts.trust.policy import Identity
from services.invariants import InvariantService
from store.errors import InvariantNotFound
from workers.approvals import VerdictConsumer
from workers.batch import Batch
from workers.deps import Deps, HandlerClass
from workers.templates import TemplateConsumer

log = logging.getLogger(__name__)

Service = Callable[[], InvariantService]

ROOT_TYPE = DecisionType.PROMPT_DEFINITION.value.encode()


class ReconcilerConsumer:
    """decisions.began.*: reconcile the roots of a batch together (one read of the
    roots, one of the invariants, one pipelined publish), then ack the whole batch."""

    def __init__(self, deps: Deps) -> None:
        self._service: Service = deps.invariants
        self._settings = deps.settings
        self._dead_letters = deps.dead_letters
        self.trust = deps.trust_for(BEGAN)  # None: the recorder's own events

    def read(self, m: Msg, now: datetime) -> DecisionPersisted | None:
        if ROOT_TYPE not in m.data:
            # Not a root (the recorder sends only roots here): nothing to reconcile, and
            # no need to parse it. Whatever a root's body holds, it names its type.
            return None
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
        # What is no root first (someone else's message): if reconciling fails, only
        # the roots are retried.
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
        plan = plan_of_subject(msg.subject, BEGAN_PREFIX)
        log.error("plan %s was never reconciled with its invariants: %s", plan,
                  "; ".join(v.message for v in violations[:1]))
        await self._dead_letters().keep([DeadLetter.of_message(
            id=dead_letter_id(DECISIONS_STREAM, msg.stream_sequence), subject=msg.subject,
            headers=dict(msg.headers), data=msg.data,
            plan_id=plan.upper() if plan and is_ulid(plan) else None, decision_id=None,
            errors=list(violations), rejected_at=utc_now(), delivered=msg.delivered)])

    def extra_deliveries(self) -> int:
        return 0


def _rejection(plan_id: str | None, violation_id: str | None, rule: Rule, field: str,
               message: str) -> Unreadable:
    return Unreadable(plan_id, violation_id,
                            (RuleViolation(rule=rule, field=field, message=message),))


class ViolationConsumer:
    """invariants.violations.*: store and announce each report, or dead-letter it."""

    def __init__(self, deps: Deps) -> None:
        self._service: Service = deps.invariants
        self._settings = deps.settings
        self.trust = deps.trust_for(VIOLATIONS)

    def extra_deliveries(self) -> int:
        return 0

    def read(self, m: Msg, now: datetime) -> InvariantViolation | Unreadable:
        return read_violation(m.subject, dict(m.headers or {}), m.data, now,
                              max_payload_bytes=self._settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> InvariantViolation | Unreadable:
        return Unreadable(_subject_plan(m.subject), None, (why,))

    async def decide(self, batch: Batch[InvariantViolation | Unreadable]) -> None:
        svc = self._service()

        async def handle(m: Msg, read: InvariantViolation | Unreadable) -> None:
            r = await self._report(svc, read, batch.identity(m)) \
                if isinstance(read, InvariantViolation) else read
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

    async def _report(self, svc: InvariantService, v: InvariantViolation,
                      identity: Identity) -> InvariantViolation | Unreadable:
        """The report as stored, or why it can never be: retrying would not change that."""
        refused = await svc.report_refusal(identity, v.plan_id)
        if refused is not None:
            return Unreadable(v.plan_id, v.violation_id, (refused,))
        try:
            return await svc.report_violation(v, identity)
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


HANDLERS: dict[str, HandlerClass[Any]] = {BEGAN.name: ReconcilerConsumer,
                                          VIOLATIONS.name: ViolationConsumer,
                                          TEMPLATES.name: TemplateConsumer,
                                          VERDICTS.name: VerdictConsumer}
"""The families the invariant workers consume, and the handler of each."""
