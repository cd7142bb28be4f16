"""A person's approval of a held decision: its lifecycle, what it binds, who may give it.

A decision that breaks a checked error invariant whose consequence is `hold` (`agents
invariant add --needs-approval`) is recorded awaiting approval: the recorder writes its
hold and an `Approval` in `requested` in the batch's transaction. An operator grants or
denies it (`agents approval approve|deny`, the console, or any NATS client on
`invariants.verdicts.<plan_id>`); past its `expires_at` it expires. Lifecycle: one
transition table (`TRANSITIONS`), a named error for any other move.

What an approval binds:

- the decision's content (`decision_digest`): the digest of every field the agent wrote
  (the per-field digests of contracts.trust.chain), bound when the approval is
  requested. A verdict names the digest the approver saw; another digest is refused
  (`approval_digest`), and the agent's client compares the granted digest with the
  decision it is about to act on (a changed decision is not approved);
- the approver's verified identity: an operator whose projects cover the plan's
  (`approver_refused` for any other principal, `operator_scope` outside its projects);
  the verdict's signature is kept on the record;
- a time: `expires_at` (APPROVAL_TTL_SECONDS after it was requested); a verdict after it
  is refused (`approval_expired`).

Pure: the facts (the approval as stored, the plan's project, the verified identity, the
clock) come from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from hashlib import sha256
from types import MappingProxyType
from typing import Any

from pydantic import Field

from contracts.decisions.model import Decision
from contracts.invariants.holds import Hold, HoldStatus
from contracts.shared.base import Frozen
from contracts.shared.errors import DomainError
from contracts.shared.ids import Ulid
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.trust.canonical import canonical
from contracts.trust.chain import field_digests
from contracts.trust.ownership import out_of_scope
from contracts.trust.policy import Identity

DEFAULT_TTL = timedelta(hours=1)
MAX_REASON = 2000
MAX_GUIDANCE = 10_000


class ApprovalStatus(StrEnum):
    REQUESTED = "requested"
    GRANTED = "granted"
    DENIED = "denied"
    EXPIRED = "expired"


TRANSITIONS: Mapping[ApprovalStatus, frozenset[ApprovalStatus]] = MappingProxyType({
    ApprovalStatus.REQUESTED: frozenset({ApprovalStatus.GRANTED, ApprovalStatus.DENIED,
                                         ApprovalStatus.EXPIRED}),
    ApprovalStatus.GRANTED: frozenset(),
    ApprovalStatus.DENIED: frozenset(),
    ApprovalStatus.EXPIRED: frozenset(),
})
"""A verdict is final: a granted approval is not taken back (a revert corrects what the
decision caused), a denied one is not granted later (the agent was told to stop)."""

HOLD_AFTER: Mapping[ApprovalStatus, HoldStatus] = MappingProxyType({
    ApprovalStatus.GRANTED: HoldStatus.RELEASED,
    ApprovalStatus.DENIED: HoldStatus.REFUSED,
    ApprovalStatus.EXPIRED: HoldStatus.REFUSED,
})
"""What the decision's hold becomes with each verdict."""


class ApprovalTransitionRefused(DomainError):
    def __init__(self, decision_id: str, old: ApprovalStatus, new: ApprovalStatus) -> None:
        self.decision_id, self.old, self.new = decision_id, old, new
        super().__init__(f"the approval of decision {decision_id} is {old.value}; it cannot "
                         f"become {new.value}")


def check_transition(decision_id: str, old: ApprovalStatus, new: ApprovalStatus) -> None:
    if new not in TRANSITIONS[old]:
        raise ApprovalTransitionRefused(decision_id, old, new)


class Approval(Frozen):
    """The approval of one held decision (`_id` = its decision_id in the store): who
    decided, when, on what content, and why."""

    decision_id: Ulid
    plan_id: Ulid
    status: ApprovalStatus
    digest: str = Field(description="The decision's content digest (decision_digest) "
                        "when the approval was requested: what a verdict binds.")
    invariant_names: list[str] = Field(default_factory=list,
                                       description="The invariants that demand it.")
    requested_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = Field(default=None, description="The verified approver "
                                   "(None: expired, or an unsigned development ledger).")
    verified: bool = False
    signature: dict[str, Any] | None = Field(
        default=None, description="The verdict's signature as verified (contracts.trust).")
    reason: str | None = Field(default=None, max_length=MAX_REASON)
    guidance: str | None = Field(default=None, max_length=MAX_GUIDANCE)
    append_correction_id: Ulid | None = Field(
        default=None, description="The append correction a denial with guidance asked for.")
    request_id: Ulid | None = Field(default=None,
                                    description="The verdict that decided it.")


DIGEST_SKIP = frozenset({"sequence_number", "superseded_by", "superseded_at",
                         "superseded_by_correction"})
"""What the recorder or a later correction sets: not what the agent decided."""


def decision_digest(d: Decision) -> str:
    """`sha256:` of the canonical JSON of the per-field digests of what the agent wrote
    (contracts.trust.chain: dates at millisecond precision, as MongoDB keeps them), so
    the digest of a decision as published, as recorded and as read back is one."""
    fields = field_digests(d.model_dump(mode="python"), DIGEST_SKIP)
    return "sha256:" + sha256(canonical(fields)).hexdigest()


def approver_refused(approval: Approval | None, identity: Identity, project: str | None,
                     digest: str, now: datetime, *, unsigned_ok: bool = False
                     ) -> RuleViolation | None:
    """Why this verdict may not decide `approval` (None: it may). In order: it exists
    and is still requested, it has not expired, the approver is a verified operator in
    scope (`unsigned_ok`: a ledger without principals, where nothing is verified), and
    the approver saw the content the approval binds."""
    if approval is None:
        return RuleViolation(rule=Rule.APPROVAL_EXISTS, field="decision_id",
                             message="no approval was requested for this decision (agents "
                             "approval list shows those awaiting one)")
    if approval.status is not ApprovalStatus.REQUESTED:
        return RuleViolation(rule=Rule.APPROVAL_CLOSED, field="decision_id",
                             message=f"the approval of decision {approval.decision_id} is "
                             f"{approval.status.value} already; a verdict is final")
    if now >= approval.expires_at:
        return RuleViolation(rule=Rule.APPROVAL_EXPIRED, field="decision_id",
                             message=f"the approval of decision {approval.decision_id} "
                             f"expired at {approval.expires_at.isoformat()}")
    refused = _who_refused(approval, identity, project, unsigned_ok)
    if refused is not None:
        return refused
    if digest != approval.digest:
        return RuleViolation(rule=Rule.APPROVAL_DIGEST, field="digest",
                             message=f"the verdict names content {digest[:23]}..., decision "
                             f"{approval.decision_id} awaits approval of {approval.digest[:23]}"
                             "...: look at the decision again (agents approval show)")
    return None


def _who_refused(approval: Approval, identity: Identity, project: str | None,
                 unsigned_ok: bool) -> RuleViolation | None:
    if identity is None and not unsigned_ok:
        return RuleViolation(rule=Rule.APPROVER_REFUSED, field="decision_id",
                             message="an approval names its approver: sign the verdict "
                             "with an operator's key (NATS_NKEY_SEED)")
    if identity is not None and identity.principal.role is not Role.OPERATOR:
        return RuleViolation(rule=Rule.APPROVER_REFUSED, field="decision_id",
                             message=f"{identity.principal.name} is a "
                             f"{identity.principal.role.value}; only an operator approves")
    return out_of_scope(identity, approval.plan_id, project)


def expired(approval: Approval, now: datetime) -> bool:
    return approval.status is ApprovalStatus.REQUESTED and now >= approval.expires_at


def outbox_key(decision_id: str) -> str:
    """The outbox key of an approval's events (requested, then its verdict or expiry)."""
    return f"approval:{decision_id}"


MAX_LISTED = 1000
"""Approvals one read lists at most (the queue, a plan's pending ones)."""

REQUESTED_ORDER = 0
DECIDED_ORDER = 1
"""Outbox order of an approval's two events."""


def requested(h: Hold, now: datetime, ttl: timedelta) -> Approval:
    """The approval a hold awaiting approval opens (a hold written before approvals had
    no digest: `unknown`, which no verdict names, so it can only expire)."""
    return Approval(decision_id=h.decision_id, plan_id=h.plan_id,
                    status=ApprovalStatus.REQUESTED, digest=h.digest or "unknown",
                    invariant_names=[r.invariant_name for r in h.reasons],
                    requested_at=now, expires_at=now + ttl)
