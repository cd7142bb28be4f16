"""Approvals in the workers: the verdict consumer (`invariants.verdicts.*`, operators'
grants and denials, services.approvals applies them) and the expiry sweep every worker
runs (APPROVAL_SWEEP_SECONDS). Thin: the rules are the service's and the domain's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from nats.aio.msg import Msg

from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalVerdict, read_verdict
from contracts.invariants.families import VERDICTS
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.unreadable import Unreadable
from services.approvals import ApprovalService
from services.invariants import InvariantService
from workers.batch import Batch
from workers.deps import Deps

log = logging.getLogger(__name__)

SWEEP_LIMIT = 100
"""Approvals one sweep expires; a longer backlog takes the next sweeps."""


def _subject_plan(subject: str) -> str | None:
    plan = subjects.plan_of(subject, subjects.VERDICTS_PREFIX)
    return plan.upper() if plan and is_ulid(plan) else None


class VerdictConsumer:
    """invariants.verdicts.*: apply each verdict (its outcome, applied or refused with
    its rule, is kept under its request_id); an unreadable one is dead-lettered and
    reported on invariants.rejected.<plan_id>, never retried."""

    def __init__(self, deps: Deps) -> None:
        self._approvals = deps.approvals
        self._service: Callable[[], InvariantService] = deps.invariants
        self._settings = deps.settings
        self.trust = deps.trust_for(VERDICTS)

    def extra_deliveries(self) -> int:
        return 0

    def read(self, m: Msg, now: datetime) -> ApprovalVerdict | Unreadable:
        return read_verdict(m.subject, dict(m.headers or {}), m.data,
                            max_payload_bytes=self._settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> ApprovalVerdict | Unreadable:
        return Unreadable(_subject_plan(m.subject), None, (why,))

    async def decide(self, batch: Batch[ApprovalVerdict | Unreadable]) -> None:
        if self._approvals is None:
            raise RuntimeError("the workers did not wire the approval service")
        svc = self._approvals()

        async def handle(m: Msg, read: ApprovalVerdict | Unreadable) -> None:
            if isinstance(read, ApprovalVerdict):
                outcome = await svc.decide(read, batch.identity(m))
                log.info("verdict %s on decision %s: %s%s", read.verdict.value,
                         read.decision_id, outcome.status.value,
                         f" ({outcome.rule.value})" if outcome.rule else "")
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
            delivered=msg.delivered,
            unreadable=Unreadable(_subject_plan(msg.subject), None, tuple(violations)))


async def expiry_loop(service: Callable[[], ApprovalService], every: float) -> None:
    """Expire due approvals every `every` seconds; a failed sweep (the database is
    down) is logged and tried at the next."""
    while True:
        try:
            expired = await service().expire_due(SWEEP_LIMIT)
        except Exception:
            log.exception("the approvals' expiry sweep failed; trying again")
            expired = 0
        if expired < SWEEP_LIMIT:
            await asyncio.sleep(every)
