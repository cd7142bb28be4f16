"""`agents plan use PLAN TEMPLATE`: an operator (or the plan's owner) applies an action
template to a plan, and the template's ACTION invariants are promoted into the plan's
scope.

The request travels on `invariants.templates.<plan_id>` (Nats-Msg-Id: its request_id)
and is read here, every rule that needs only the message; the worker then applies it
(services.plan_templates) and keeps the outcome under the request_id, which the CLI
waits for. A plan takes one template: the same one again is a no-op, another one is
refused (`template_conflict`): which invariants bind a running plan does not change
by an accident of typing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from pydantic import Field, ValidationError

from contracts.invariants import subjects
from contracts.invariants.model import InvariantName
from contracts.shared.base import Frozen
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import MSG_ID_HEADER, Ulid, new_id
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.unreadable import Unreadable, ulid_or_none


class PlanUseRequest(Frozen):
    """Apply `action_template` to `plan_id`."""

    request_id: Ulid = Field(default_factory=new_id, description="ULID chosen by the "
                             "sender (also the Nats-Msg-Id): a retry is the same request.")
    plan_id: Ulid = Field(description="The plan; its root must be recorded.")
    action_template: InvariantName = Field(
        description="The action template: its ACTION invariants bind the plan from now on.",
        examples=["db-migration"])


class PlanUseStatus(StrEnum):
    APPLIED = "applied"
    REFUSED = "refused"


class PlanUseOutcome(Frozen):
    """What became of a request (kept under its request_id)."""

    request_id: Ulid
    plan_id: Ulid
    action_template: str
    status: PlanUseStatus
    promoted: list[Ulid] = Field(default_factory=list, description="The ACTION invariants "
                                 "promoted to the plan's scope (in force for it now).")
    rule: Rule | None = Field(default=None, description="Why it was refused.")
    reason: str | None = None
    requested_by: str | None = Field(default=None, description="The verified principal.")
    at: datetime


def read_plan_use(subject: str, headers: Mapping[str, str], data: bytes, *,
                  max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
                  ) -> PlanUseRequest | Unreadable:
    """The request on `invariants.templates.<plan_id>`, or every reason it is not one.
    Never raises."""
    plan = ulid_or_none(subjects.plan_of(subject, subjects.TEMPLATES_PREFIX))
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(plan, None, (big,))
    try:
        return _parse(subject, plan, headers, data)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Unreadable(plan, None, (unreadable(exc, "a PlanUseRequest"),))


def _parse(subject: str, plan: str | None, headers: Mapping[str, str],
           data: bytes) -> PlanUseRequest | Unreadable:
    raw = json_object(data, "a PlanUseRequest")
    if isinstance(raw, RuleViolation):
        return Unreadable(plan, None, (raw,))
    rid = ulid_or_none(raw.get("request_id"))
    broken = Violations()
    if "request_id" not in raw:
        broken.add(RuleViolation(rule=Rule.SCHEMA, field="request_id",
                                 message="request_id is required: it identifies the "
                                 "request across retries"))
    parsed: PlanUseRequest | None = None
    try:
        parsed = PlanUseRequest.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    if parsed is not None:
        if parsed.plan_id != plan:
            broken.add(RuleViolation(
                rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
                message=f"plan_id {parsed.plan_id} does not match the subject {subject}"))
        msg_id = headers.get(MSG_ID_HEADER)
        if msg_id is None or msg_id.upper() != parsed.request_id:
            broken.add(RuleViolation(
                rule=Rule.MSG_ID_MATCHES_REQUEST, field="request_id",
                message=f"header {MSG_ID_HEADER} must equal request_id {parsed.request_id} "
                f"(got {str(msg_id)[:40]!r}), so a retry is deduplicated"))
    if broken or parsed is None:
        return Unreadable(plan or ulid_or_none(raw.get("plan_id")), rid, broken.result())
    return parsed
