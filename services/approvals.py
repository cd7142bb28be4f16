"""Approvals: an operator's verdict on a held decision, and the expiry of those nobody
decided on in time.

A verdict (contracts.invariants.approval_wire) is applied once: its outcome, applied or
refused with its rule, is kept under its request_id (the CLI and the console wait on
it). The rules are contracts.invariants.approvals'; the facts are read here: the
approval as stored, the plan's project (an operator acts within its projects), and the
decision as stored now, whose digest must still be the one the approval binds (a
decision changed in the store since it was held is not approved).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.invariants.approval_wire import (
    VERDICT_STATUS,
    ApprovalVerdict,
    VerdictOutcome,
    VerdictStatus,
)
from contracts.invariants.approvals import (
    Approval,
    ApprovalStatus,
    approver_refused,
    decision_digest,
    outbox_key,
)
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.trust.policy import Identity, principal_name
from services import outbox
from services.ports.gates import ApprovalRecords, HoldRecords
from services.ports.publishing import EventPublisher
from services.ports.records import DecisionRecords, OutboxRecords, PlanRecords

log = logging.getLogger(__name__)


class ApprovalService:
    def __init__(self, approvals: ApprovalRecords, *, holds: HoldRecords,
                 decisions: DecisionRecords, plans: PlanRecords, outbox: OutboxRecords,
                 publisher: EventPublisher, unsigned_ok: bool,
                 clock: Callable[[], datetime] = utc_now) -> None:
        """`unsigned_ok`: no principals file, so no verdict can be verified (a
        development ledger); otherwise an unsigned verdict is refused."""
        self.records = approvals
        self._holds = holds
        self._decisions = decisions
        self._plans = plans
        self._outbox = outbox
        self._publisher = publisher
        self._unsigned_ok = unsigned_ok
        self._clock = clock

    async def decide(self, v: ApprovalVerdict, identity: Identity) -> VerdictOutcome:
        """Apply the verdict (or answer its kept outcome)."""
        kept = await self.records.outcome(v.request_id)
        if kept is not None:
            return kept
        now = self._clock()
        approval = await self.records.get(v.decision_id)
        if approval is not None and approval.plan_id != v.plan_id:
            approval = None  # named under another plan: not this plan's to decide
        refused = await self._refusal(v, approval, identity, now)
        if refused is None and approval is not None:
            decided = approval.model_copy(update={
                "status": VERDICT_STATUS[v.verdict], "decided_at": now,
                "decided_by": principal_name(identity), "verified": identity is not None,
                "signature": identity.signature.model_dump() if identity else None,
                "reason": v.reason, "guidance": v.guidance,
                "append_correction_id": v.append_correction_id, "request_id": v.request_id})
            if await self._apply(decided, now):
                return await self._keep(v, identity, now)
            refused = RuleViolation(rule=Rule.APPROVAL_CLOSED, field="decision_id",
                                    message="another verdict (or the expiry) decided it first")
        if approval is not None and refused is not None \
                and refused.rule is Rule.APPROVAL_EXPIRED:
            await self._expire(approval, now)
        return await self._keep(v, identity, now, refused)

    async def _refusal(self, v: ApprovalVerdict, approval: Approval | None,
                       identity: Identity, now: datetime) -> RuleViolation | None:
        plan = await self._plans.get(v.plan_id)
        refused = approver_refused(approval, identity, plan.project if plan else None,
                                   v.digest, now, unsigned_ok=self._unsigned_ok)
        if refused is not None or approval is None:
            return refused
        d = await self._decisions.get(v.decision_id)
        if d is None or decision_digest(d) != approval.digest:
            return RuleViolation(rule=Rule.APPROVAL_DIGEST, field="decision_id",
                                 message=f"decision {v.decision_id} as stored is not the "
                                 "content the approval binds: it changed since it was held")
        return None

    async def expire_due(self, limit: int = 100) -> int:
        """Expire the approvals past their expires_at; how many this call expired."""
        now = self._clock()
        done = 0
        for a in await self.records.due(now, limit):
            done += await self._expire(a, now)
        return done

    async def _expire(self, a: Approval, now: datetime) -> bool:
        expired = a.model_copy(update={"status": ApprovalStatus.EXPIRED, "decided_at": now})
        if not await self._apply(expired, now):
            return False
        log.info("the approval of decision %s expired", a.decision_id)
        return True

    async def _apply(self, decided: Approval, now: datetime) -> bool:
        hold = await self._holds.get(decided.decision_id)
        names = {r.invariant_id: r.invariant_name for r in hold.reasons} if hold else {}
        if not await self.records.decide(decided, names, now):
            return False
        await outbox.flush(self._outbox, self._publisher, outbox_key(decided.decision_id))
        return True

    async def _keep(self, v: ApprovalVerdict, identity: Identity, now: datetime,
                    refused: RuleViolation | None = None) -> VerdictOutcome:
        outcome = VerdictOutcome(
            request_id=v.request_id, plan_id=v.plan_id, decision_id=v.decision_id,
            verdict=v.verdict,
            status=VerdictStatus.REFUSED if refused else VerdictStatus.APPLIED,
            rule=refused.rule if refused else None,
            reason=refused.message if refused else None,
            decided_by=principal_name(identity), at=now)
        await self.records.keep(outcome)
        return await self.records.outcome(v.request_id) or outcome

    async def current_digest(self, decision_id: str) -> str | None:
        """The digest of the decision as stored now (what a verdict must name)."""
        return await current_digest(self._decisions, decision_id)


class _Gets(Protocol):
    async def get(self, decision_id: str) -> Decision | None: ...


async def current_digest(decisions: _Gets, decision_id: str) -> str | None:
    """The digest of the decision as stored now: what a verdict must name (the console
    and the CLI send it, the verdict consumer compares it)."""
    d = await decisions.get(decision_id)
    return decision_digest(d) if d else None
