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

from pydantic import Field, ValidationError

from contracts.invariants import subjects
from contracts.invariants.approvals import MAX_GUIDANCE, MAX_REASON, Approval, ApprovalStatus
from contracts.shared.base import Frozen
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import MSG_ID_HEADER, Ulid, new_id
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.unreadable import Unreadable, ulid_or_none

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
    """The verdict on `invariants.verdicts.<plan_id>`, or every reason it is not one."""
    plan = ulid_or_none(subjects.plan_of(subject, subjects.VERDICTS_PREFIX))
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(plan, None, (big,))
    try:
        return _parse(subject, plan, headers, data)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Unreadable(plan, None, (unreadable(exc, "an ApprovalVerdict"),))


def _parse(subject: str, plan: str | None, headers: Mapping[str, str],
           data: bytes) -> ApprovalVerdict | Unreadable:
    raw = json_object(data, "an ApprovalVerdict")
    if isinstance(raw, RuleViolation):
        return Unreadable(plan, None, (raw,))
    rid = ulid_or_none(raw.get("request_id"))
    broken = Violations()
    if "request_id" not in raw:
        broken.add(RuleViolation(rule=Rule.SCHEMA, field="request_id",
                                 message="request_id is required: it identifies the "
                                 "verdict across retries"))
    parsed: ApprovalVerdict | None = None
    try:
        parsed = ApprovalVerdict.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    if parsed is not None:
        for v in _message_rules(subject, plan, headers, parsed):
            broken.add(v)
    if broken or parsed is None:
        return Unreadable(plan or ulid_or_none(raw.get("plan_id")), rid, broken.result())
    return parsed


def _message_rules(subject: str, plan: str | None, headers: Mapping[str, str],
                   v: ApprovalVerdict) -> list[RuleViolation]:
    out = []
    if v.plan_id != plan:
        out.append(RuleViolation(rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
                                 message=f"plan_id {v.plan_id} does not match the subject "
                                 f"{subject[:120]}"))
    msg_id = headers.get(MSG_ID_HEADER)
    if msg_id is None or msg_id.upper() != v.request_id:
        out.append(RuleViolation(
            rule=Rule.MSG_ID_MATCHES_REQUEST, field="request_id",
            message=f"header {MSG_ID_HEADER} must equal request_id {v.request_id} "
            f"(got {str(msg_id)[:40]!r}), so a retry is deduplicated"))
    if v.verdict is Verdict.GRANT and (v.guidance or v.append_correction_id):
        out.append(RuleViolation(rule=Rule.SCHEMA, field="guidance",
                                 message="guidance and append_correction_id go with a "
                                 "denial, not a grant"))
    if v.append_correction_id and not v.guidance:
        out.append(RuleViolation(rule=Rule.SCHEMA, field="append_correction_id",
                                 message="an append correction needs the denial's guidance"))
    return out
