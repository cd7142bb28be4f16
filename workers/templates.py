"""The template consumer: `agents plan use` requests off invariants.templates.* applied
by services.plan_templates, through the inbound pipeline like every consumer."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from nats.aio.msg import Msg

from contracts.invariants import subjects
from contracts.invariants.families import TEMPLATES
from contracts.invariants.plan_use import PlanUseRequest, read_plan_use
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.unreadable import Unreadable
from services.invariants import InvariantService
from workers.batch import Batch
from workers.deps import Deps

log = logging.getLogger(__name__)

Service = Callable[[], InvariantService]


def _subject_plan(subject: str, prefix: str) -> str | None:
    plan = subjects.plan_of(subject, prefix)
    return plan.upper() if plan and is_ulid(plan) else None


class TemplateConsumer:
    """invariants.templates.*: apply each `agents plan use` request (its outcome, applied
    or refused, is kept under its request_id for whoever waits on it); an unreadable one
    is dead-lettered and reported on invariants.rejected.<plan_id>, never retried."""

    def __init__(self, deps: Deps) -> None:
        self._templates = deps.templates
        self._service: Service = deps.invariants
        self._settings = deps.settings
        self.trust = deps.trust_for(TEMPLATES)

    def extra_deliveries(self) -> int:
        return 0

    def read(self, m: Msg, now: datetime) -> PlanUseRequest | Unreadable:
        return read_plan_use(m.subject, dict(m.headers or {}), m.data,
                             max_payload_bytes=self._settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> PlanUseRequest | Unreadable:
        return Unreadable(_subject_plan(m.subject, subjects.TEMPLATES_PREFIX), None, (why,))

    async def decide(self, batch: Batch[PlanUseRequest | Unreadable]) -> None:
        if self._templates is None:
            raise RuntimeError("the workers did not wire the template service")
        svc = self._templates()

        async def handle(m: Msg, read: PlanUseRequest | Unreadable) -> None:
            if isinstance(read, PlanUseRequest):
                outcome = await svc.use(read, batch.identity(m))
                log.info("plan use %s on %s: %s", read.action_template, read.plan_id,
                         outcome.status.value)
                await batch.ack(m)
                return
            meta = m.metadata
            await self._service().reject_report(
                m.subject, dict(m.headers or {}), m.data, stream_sequence=meta.sequence.stream,
                delivered=meta.num_delivered, unreadable=read)
            await batch.term(m)

        await batch.each(handle)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().reject_report(
            msg.subject, dict(msg.headers), msg.data, stream_sequence=msg.stream_sequence,
            delivered=msg.delivered, unreadable=Unreadable(
                _subject_plan(msg.subject, subjects.TEMPLATES_PREFIX), None, tuple(violations)))
