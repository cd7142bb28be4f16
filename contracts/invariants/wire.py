"""Violation reports off the wire, and the events announcing what became of them.

Pure, so every reason a report is refused is tested without a server. A report is
refused (dead-lettered, never retried) when it is not a JSON InvariantViolation, when
it names another plan than its subject, when its Nats-Msg-Id is not its violation_id
(a retry would not be deduplicated), or when it carries the resolution fields, which
only an operator sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.invariants import subjects
from contracts.invariants.violations import LEDGER_FIELDS, InvariantViolation
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES, MAX_TEXT_BYTES
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import (
    ERRORS_DOC,
    BoundedViolations,
    EchoText,
    Rule,
    RuleViolation,
    Violations,
)
from contracts.shared.unreadable import Unreadable, ulid_or_none


def read_violation(subject: str, headers: Mapping[str, str], data: bytes,
                   received_at: datetime, *,
                   max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
                   ) -> InvariantViolation | Unreadable:
    """An InvariantViolation from invariants.violations.<plan_id>, or every reason it is
    not (the first MAX_ERRORS). Never raises: a body over `max_payload_bytes` is refused
    unread, and whatever else reading throws is the report's `unreadable` violation."""
    subject_plan = ulid_or_none(subjects.plan_of(subject))
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(subject_plan, None, (big,))
    try:
        return _parse(subject, headers, data, received_at)
    except Exception as exc:  # hostile input: the report is at fault, never the batch
        return Unreadable(subject_plan, None,
                                (unreadable(exc, "an InvariantViolation"),))


def _parse(subject: str, headers: Mapping[str, str], data: bytes,
           received_at: datetime) -> InvariantViolation | Unreadable:
    subject_plan = ulid_or_none(subjects.plan_of(subject))
    raw = json_object(data, "an InvariantViolation")
    if isinstance(raw, RuleViolation):
        return Unreadable(subject_plan, None, (raw,))
    plan = ulid_or_none(raw.get("plan_id")) or subject_plan
    vid = ulid_or_none(raw.get("violation_id"))
    broken = Violations()
    broken.extend(_reporter_fields(raw))
    if raw.get("reported_at") is None:
        raw["reported_at"] = received_at
    parsed: InvariantViolation | None = None
    try:
        parsed = InvariantViolation.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    if parsed is not None:
        broken.extend(_addressing(parsed, subject, subject_plan, headers))
    if broken or parsed is None:
        return Unreadable(plan, vid, broken.result())
    return parsed


def _reporter_fields(raw: Mapping[str, object]) -> list[RuleViolation]:
    """The report names itself, and leaves the resolution to an operator."""
    broken: list[RuleViolation] = []
    if "violation_id" not in raw:
        broken.append(RuleViolation(
            rule=Rule.SCHEMA, field="violation_id",
            message="violation_id is required: it identifies the report across retries"))
    for name in ("resolved_at", "resolved_by"):
        if raw.get(name) is not None:
            broken.append(RuleViolation(
                rule=Rule.RESOLVED_BY_OPERATOR, field=name,
                message=f"{name} is set when an operator resolves the violation "
                "(agents invariant resolve); leave it out"))
    for name in LEDGER_FIELDS[2:]:
        if raw.get(name) not in (None, False):
            broken.append(RuleViolation(
                rule=Rule.SET_BY_LEDGER, field=name,
                message=f"{name} is set by the ledger from the report's verified signature; "
                "leave it out"))
    return broken


def _addressing(parsed: InvariantViolation, subject: str, subject_plan: str | None,
                headers: Mapping[str, str]) -> list[RuleViolation]:
    """The subject names the report's plan, and its Nats-Msg-Id is its violation_id."""
    broken: list[RuleViolation] = []
    if subject_plan != parsed.plan_id:
        broken.append(RuleViolation(
            rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
            message=f"published on {subject!r} but plan_id is {parsed.plan_id}; "
            f"publish to {subjects.VIOLATIONS_PREFIX}.{parsed.plan_id}"))
    msg_id = headers.get(MSG_ID_HEADER)
    if msg_id is None or msg_id.upper() != parsed.violation_id:
        broken.append(RuleViolation(
            rule=Rule.MSG_ID_MATCHES_VIOLATION, field="violation_id",
            message=f"header {MSG_ID_HEADER} must equal violation_id "
            f"{parsed.violation_id} (got {msg_id!r}), so a retry is deduplicated"))
    return broken


class ViolationEventType(StrEnum):
    INVARIANT_VIOLATED = "INVARIANT_VIOLATED"
    INVARIANT_VIOLATION_RESOLVED = "INVARIANT_VIOLATION_RESOLVED"


SUBJECT_SUFFIX: Mapping[ViolationEventType, str] = {
    ViolationEventType.INVARIANT_VIOLATED: subjects.VIOLATED,
    ViolationEventType.INVARIANT_VIOLATION_RESOLVED: subjects.RESOLVED,
}


class ViolationEvent(BaseModel):
    """On invariants.events.<plan_id>.violated (INVARIANT_VIOLATED) and .resolved."""

    model_config = ConfigDict(frozen=True)

    event_type: ViolationEventType = Field(description="INVARIANT_VIOLATED or "
                                           "INVARIANT_VIOLATION_RESOLVED.")
    violation: InvariantViolation = Field(description="The violation, as stored.")
    invariant_name: str | None = Field(description="Name of the violated invariant "
                                       "(None if it was removed meanwhile).")
    plan_blocked: bool = Field(description="Whether the plan's Execute phase is blocked "
                               "once this event's change is committed.")

    @property
    def subject(self) -> str:
        return subjects.event(self.violation.plan_id, SUBJECT_SUFFIX[self.event_type])

    @property
    def msg_id(self) -> str:
        return subjects.event_msg_id(self.violation.violation_id,
                                     SUBJECT_SUFFIX[self.event_type])


class ViolationRejected(BaseModel):
    """On invariants.rejected.<plan_id|unknown>: a report kept in dead_letters, not stored."""

    model_config = ConfigDict(frozen=True)

    dead_letter_id: EchoText = Field(
        description="ID of the dead_letters document that keeps it.")
    subject: EchoText = Field(description="Subject it was published on (cut at "
                              f"{MAX_TEXT_BYTES} bytes).")
    plan_id: EchoText | None = Field(description="Its plan, when it could be read.")
    violation_id: EchoText | None = Field(
        description="Its violation_id, when it could be read.")
    errors: BoundedViolations = Field(description=ERRORS_DOC)
    rejected_at: datetime = Field(description="When it was rejected.")
