"""Reading correction messages off the wire: a command, or every reason it is unreadable.

Pure, so the rules are tested without a server. A request must carry its
correction_id (the model would otherwise invent one per parse, and a redelivery
would become a second correction), and the body's plan_id must be the subject's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts import correction_subjects as subjects
from contracts.corrections import CancelRequest, CorrectionRequest, FailRequest
from contracts.payload import json_object
from contracts.rules import Rule, RuleViolation, violations_from

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Unreadable:
    plan_id: str | None
    correction_id: str | None
    violations: tuple[RuleViolation, ...]

    @property
    def reason(self) -> str:
        return "; ".join(str(v) for v in self.violations)


def _read(model: type[M], subject: str, prefix: str, data: bytes) -> M | Unreadable:
    subject_plan = subjects.plan_of(subject, prefix)
    raw = json_object(data, f"a {model.__name__}")
    if isinstance(raw, RuleViolation):
        return Unreadable(subject_plan, None, (raw,))
    plan = raw.get("plan_id") if isinstance(raw.get("plan_id"), str) else subject_plan
    cid = raw.get("correction_id") if isinstance(raw.get("correction_id"), str) else None
    broken: list[RuleViolation] = []
    if cid is None:
        broken.append(RuleViolation(
            rule=Rule.SCHEMA, field="correction_id",
            message="correction_id is required: it identifies the correction across retries"))
    parsed: M | None = None
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        broken.extend(violations_from(exc))
    body_plan = getattr(parsed, "plan_id", None)
    if parsed is not None and (subject_plan is None or body_plan != subject_plan.upper()):
        broken.append(RuleViolation(
            rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
            message=f"plan_id {body_plan} does not match the subject {subject}"))
    if broken or parsed is None:
        return Unreadable(plan, cid, tuple(broken))
    return parsed


def read_request(subject: str, data: bytes,
                 prefix: str = subjects.REQUESTED_PREFIX) -> CorrectionRequest | Unreadable:
    """A request from corrections.requested.<plan_id> (or .dryrun., with that prefix)."""
    return _read(CorrectionRequest, subject, prefix, data)


def read_cancel(subject: str, data: bytes) -> CancelRequest | Unreadable:
    return _read(CancelRequest, subject, subjects.CANCEL_PREFIX, data)


def read_fail(subject: str, data: bytes) -> FailRequest | Unreadable:
    """An operator's fail from corrections.fail.<plan_id>."""
    return _read(FailRequest, subject, subjects.FAIL_PREFIX, data)
