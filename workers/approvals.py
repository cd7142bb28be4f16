"""Approvals in the workers: the verdict consumer (`invariants.verdicts.*`, operators'
grants and denials, services.approvals applies them) and the expiry sweep every worker
runs (APPROVAL_SWEEP_SECONDS). Thin: the rules are the service's and the domain's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalVerdict, read_verdict
from contracts.invariants.families import VERDICTS
from contracts.shared.unreadable import Unreadable
from contracts.trust.policy import Identity
from services.approvals import ApprovalService
from workers.batch import Batch
from workers.deps import Deps
from workers.plan_requests import PlanRequestConsumer

log = logging.getLogger(__name__)

SWEEP_LIMIT = 100
"""Approvals one sweep expires; a longer backlog takes the next sweeps."""


class VerdictConsumer(PlanRequestConsumer[ApprovalVerdict]):
    """invariants.verdicts.*: apply each operator's grant or denial
    (workers.plan_requests)."""

    family = VERDICTS
    prefix = subjects.VERDICTS_PREFIX
    read_request = staticmethod(read_verdict)

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        self._approvals = deps.approvals

    async def decide(self, batch: Batch[ApprovalVerdict | Unreadable]) -> None:
        if self._approvals is None:
            raise RuntimeError("the workers did not wire the approval service")
        await super().decide(batch)

    async def apply(self, request: ApprovalVerdict, identity: Identity) -> None:
        assert self._approvals is not None  # decide checked it
        outcome = await self._approvals().decide(request, identity)
        log.info("verdict %s on decision %s: %s%s", request.verdict.value,
                 request.decision_id, outcome.status.value,
                 f" ({outcome.rule.value})" if outcome.rule else "")


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
