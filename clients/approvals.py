"""The agent's gate: before acting on a decision, `await rec.gate(decision)` answers
approved, denied (with the operator's reason and guidance), expired, or changed.

A decision no invariant held is approved at once (its persisted event carries no hold);
a held one waits for its approval's verdict on `decisions.approval.<plan_id>.*`, read
from the stream (a verdict given before the call is found), so the agent never acts
before a person decided. A grant binds the content digest of the decision the
approver saw (contracts.invariants.approvals): the gate compares it with the decision
the agent passes, and a decision changed since is `changed`, not approved.

A decision held `awaiting_judge` waits for the judge: its release (`decisions.hold.<plan_id>.
released`: approved, unless the judge ruled on other content than the decision passed),
its refusal (`refused`, with the broken invariants as the reason), or its hold for a
person (then the approval's verdict, as above). Both families are read in one pass over
the stream (`decisions.*.<plan_id>.*`).

Waiting is bounded by the approval's expiry (APPROVAL_TTL_SECONDS); `timeout` bounds it
further (TimeoutError: still undecided, do not act). A decision the recorder refused
raises its DecisionRejectedError, as `wait_persisted` does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from enum import StrEnum

from clients._replay import StreamReplay
from clients.persisted import PersistedWaiting
from contracts.corrections.resume_points import DecisionRef
from contracts.decisions.model import Decision
from contracts.decisions.subjects import DECISIONS_STREAM
from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalEvent
from contracts.invariants.approvals import Approval, ApprovalStatus, decision_digest
from contracts.invariants.hold_wire import HoldEvent
from contracts.invariants.holds import Hold, HoldStatus

JUDGE = "judge"
"""`decided_by` of a verdict the judge gave without a person."""
MAX_REASON = 2000


class GateStatus(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CHANGED = "changed"
    """Granted for other content than the decision passed: not approved."""
    REFUSED = "refused"
    """The judge found an error invariant broken: not to be acted on."""


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
            final = await self._verdict(decision.plan_id.upper(), decision.decision_id)
        verdict = _judged(final, decision.decision_id) if isinstance(final, Hold) \
            else _decided(final)
        if verdict.status is GateStatus.APPROVED and isinstance(decision, Decision) \
                and final.digest != decision_digest(decision):
            verdict = replace(verdict, status=GateStatus.CHANGED)
        return verdict

    async def _verdict(self, plan: str, decision_id: str) -> Approval | Hold:
        """The approval's final step or the judge's settlement, whichever the stream holds
        first for `decision_id`."""
        wake = [f"{subjects.APPROVAL_PREFIX}.{plan}.*", f"{subjects.HOLD_PREFIX}.{plan}.*"]
        async with StreamReplay(self._nc, DECISIONS_STREAM, subjects.gate_events(plan), 1,
                                wake) as replay:
            while True:
                msg = await replay.next()
                found = _final(msg.subject or "", msg.data or b"", decision_id)
                if found is not None:
                    return found


def _decided(a: Approval) -> GateVerdict:
    return GateVerdict(FINAL[a.status], a.decision_id, reason=a.reason, guidance=a.guidance,
                       decided_by=a.decided_by, append_correction_id=a.append_correction_id)


def _judged(h: Hold, decision_id: str) -> GateVerdict:
    if h.status is HoldStatus.RELEASED:
        return GateVerdict(GateStatus.APPROVED, decision_id, decided_by=JUDGE)
    why = "; ".join(f"{r.invariant_name}: {r.detail}" if r.detail else r.invariant_name
                    for r in h.reasons)
    return GateVerdict(GateStatus.REFUSED, decision_id, decided_by=JUDGE,
                       reason=why[:MAX_REASON] or "refused by the judge")


def _final(subject: str, data: bytes, decision_id: str) -> Approval | Hold | None:
    """What an event on the gate's subjects settles for `decision_id`, if anything: an
    approval's final step, or a hold the judge released or refused."""
    try:
        if subject.startswith(f"{subjects.HOLD_PREFIX}."):
            h = HoldEvent.model_validate_json(data).hold
            return h if h.decision_id == decision_id else None
        a = ApprovalEvent.model_validate_json(data).approval
    except Exception:  # not an event this library can read: no verdict
        return None
    if a.decision_id != decision_id or a.status not in FINAL:
        return None
    return a
