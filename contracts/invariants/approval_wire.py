"""Approvals on the wire: an operator's verdict (inbound, `invariants.verdicts.<plan_id>`),
what became of it (kept under its request_id), and the events announcing an approval's
every step (`decisions.approval.<plan_id>.<status>`, on the DECISIONS stream).

A verdict is read here with every rule that needs only the message (its plan matches
the subject, its Nats-Msg-Id is its request_id, a denial's guidance only with a denial);
whether the approval may be decided (contracts.invariants.approvals) needs the stored
approval and is the worker's. Never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from pydantic import Field

from contracts.invariants import subjects
from contracts.invariants.approvals import MAX_GUIDANCE, MAX_REASON, Approval, ApprovalStatus
from contracts.shared.base import Frozen
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import Ulid, new_id
from contracts.shared.plan_requests import read_plan_request
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.unreadable import Unreadable

MAX_DIGEST = 80


class Verdict(StrEnum):
    GRANT = "grant"
    DENY = "deny"


VERDICT_STATUS = {Verdict.GRANT: ApprovalStatus.GRANTED, Verdict.DENY: ApprovalStatus.DENIED}


class ApprovalVerdict(Frozen):
    """An operator grants or denies the approval a held decision awaits."""

    request_id: Ulid = Field(default_factory=new_id, description="ULID chosen by the "
                             "sender (also the Nats-Msg-Id): a retry is the same verdict.")
    plan_id: Ulid = Field(description="The decision's plan (the subject's token).")
    decision_id: Ulid = Field(description="The held decision.")
    verdict: Verdict = Field(description="grant or deny.")
    digest: str = Field(max_length=MAX_DIGEST, description="The content digest of the "
                        "decision the approver looked at (agents approval show prints it); "
                        "another digest than the approval binds is refused.")
    reason: str | None = Field(default=None, max_length=MAX_REASON,
                               description="Why, in words (kept on the record).")
    guidance: str | None = Field(default=None, max_length=MAX_GUIDANCE,
                                 description="A denial's instructions for the agent.")
    append_correction_id: Ulid | None = Field(
        default=None, description="A denial that asks, in the same step, for an append "
        "correction with its guidance: the correction's ID (the sender requests it).")


class VerdictStatus(StrEnum):
    APPLIED = "applied"
    REFUSED = "refused"


class VerdictOutcome(Frozen):
    """What became of a verdict (kept under its request_id, which the sender waits on)."""

    request_id: Ulid
    plan_id: Ulid
    decision_id: Ulid
    verdict: Verdict
    status: VerdictStatus
    rule: Rule | None = None
    reason: str | None = None
    decided_by: str | None = None
    at: datetime


class ApprovalEvent(Frozen):
    """approval.requested / granted / denied / expired, with the approval as it is now."""

    event_type: ApprovalStatus
    approval: Approval

    @property
    def subject(self) -> str:
        return subjects.approval_event(self.approval.plan_id, self.event_type.value)

    @property
    def msg_id(self) -> str:
        return subjects.approval_msg_id(self.approval.decision_id, self.event_type.value)


def read_verdict(subject: str, headers: Mapping[str, str], data: bytes, *,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
                 ) -> ApprovalVerdict | Unreadable:
    """The verdict on `invariants.verdicts.<plan_id>`, or every reason it is not one.
    Never raises (contracts.shared.plan_requests)."""
    return read_plan_request(ApprovalVerdict, subject, subjects.VERDICTS_PREFIX, headers, data,
                             max_payload_bytes=max_payload_bytes, rules=_verdict_rules)


def _verdict_rules(v: ApprovalVerdict) -> list[RuleViolation]:
    """A grant carries no guidance, and an append needs a denial's guidance."""
    out = []
    if v.verdict is Verdict.GRANT and (v.guidance or v.append_correction_id):
        out.append(RuleViolation(rule=Rule.SCHEMA, field="guidance",
                                 message="guidance and append_correction_id go with a "
                                 "denial, not a grant"))
    if v.append_correction_id and not v.guidance:
        out.append(RuleViolation(rule=Rule.SCHEMA, field="append_correction_id",
                                 message="an append correction needs the denial's guidance"))
    return out
