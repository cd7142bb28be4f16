"""The agent's gate: before acting on a decision, `await rec.gate(decision)` answers
approved, denied (with the operator's reason and guidance), expired, or changed.

A decision no invariant held is approved at once (its persisted event carries no hold);
a held one waits for its approval's verdict on `decisions.approval.<plan_id>.*`, read
from the stream (a verdict given before the call is found), so the agent never acts
before a person decided. A grant binds the content digest of the decision the
approver saw (contracts.invariants.approvals): the gate compares it with the decision
the agent passes, and a decision changed since is `changed`, not approved.

Waiting is bounded by the approval's expiry (APPROVAL_TTL_SECONDS); `timeout` bounds it
further (TimeoutError: still undecided, do not act). A decision held `awaiting_judge`
answers once the judge held it for a person and that person decided: a judge's release
or refusal is not announced on the bus, so pass a `timeout` there. A decision the recorder refused
raises its DecisionRejectedError, as `wait_persisted` does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

from clients._replay import StreamReplay
from clients.persisted import PersistedWaiting
from contracts.corrections.resume_points import DecisionRef
from contracts.decisions.model import Decision
from contracts.decisions.subjects import DECISIONS_STREAM
from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalEvent
from contracts.invariants.approvals import Approval, ApprovalStatus, decision_digest


class GateStatus(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CHANGED = "changed"
    """Granted for other content than the decision passed: not approved."""


@dataclass(frozen=True, slots=True)
class GateVerdict:
    status: GateStatus
    decision_id: str
    reason: str | None = None
    guidance: str | None = None
    decided_by: str | None = None
    append_correction_id: str | None = None
    held: bool = True
    """False: nothing held the decision (approved without a person)."""

    @property
    def approved(self) -> bool:
        return self.status is GateStatus.APPROVED


FINAL = {ApprovalStatus.GRANTED: GateStatus.APPROVED, ApprovalStatus.DENIED: GateStatus.DENIED,
         ApprovalStatus.EXPIRED: GateStatus.EXPIRED}


class ApprovalWaiting(PersistedWaiting):
    """The gate half of `DecisionRecorder` (clients.recorder)."""

    async def gate(self, decision: Decision | DecisionRef, *,
                   timeout: float | None = None) -> GateVerdict:
        """Wait until `decision` may be acted on, or a person said no (see the module).
        Given the Decision the agent is about to act on, a grant of other content is
        `changed`; given only a reference (its plan and ID), the workers' check that the
        approver saw the stored decision is the binding."""
        async with asyncio.timeout(timeout):
            persisted = await self.held_as(decision, timeout or 30.0)
            if persisted.hold is None:
                return GateVerdict(GateStatus.APPROVED, decision.decision_id, held=False)
            approval = await self._verdict(decision.plan_id.upper(), decision.decision_id)
        status = FINAL[approval.status]
        if status is GateStatus.APPROVED and isinstance(decision, Decision) \
                and approval.digest != decision_digest(decision):
            status = GateStatus.CHANGED
        return GateVerdict(status, decision.decision_id, reason=approval.reason,
                           guidance=approval.guidance, decided_by=approval.decided_by,
                           append_correction_id=approval.append_correction_id)

    async def _verdict(self, plan: str, decision_id: str) -> Approval:
        pattern = f"{subjects.APPROVAL_PREFIX}.{plan}.*"
        async with StreamReplay(self._nc, DECISIONS_STREAM, pattern, 1,
                                [pattern]) as replay:
            while True:
                msg = await replay.next()
                a = _final(msg.data or b"", decision_id)
                if a is not None:
                    return a


def _final(data: bytes, decision_id: str) -> Approval | None:
    """The approval an event announces, when it is `decision_id`'s final one."""
    try:
        event = ApprovalEvent.model_validate_json(data)
    except Exception:  # not an event this library can read: no verdict
        return None
    a = event.approval
    if a.decision_id != decision_id or a.status not in FINAL:
        return None
    return a
