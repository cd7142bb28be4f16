"""Reading correction messages off the wire: a command, or every reason it is unreadable.

Pure, so the rules are tested without a server. Never raising: any body, however
hostile, is a command or an `Unreadable` with a bounded list of reasons. A request must
carry its correction_id (the model would otherwise invent one per parse, and a
redelivery would become a second correction), and the body's plan_id must be the
subject's.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.corrections import subjects
from contracts.corrections.requests import (
    CancelRequest,
    CorrectionRequest,
    FailRequest,
    RetryRequest,
)
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.subject_tokens import plan_of
from contracts.shared.unreadable import Unreadable, ulid_or_none

M = TypeVar("M", bound=BaseModel)


def read_command(model: type[M], subject: str, prefix: str, data: bytes,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> M | Unreadable:
    """Any correction command (`model`) from `<prefix>.<plan_id>`: a command family's
    handler reads through it. Never raises: a body over the limit is refused unread,
    and whatever else reading throws is the message's `unreadable` violation."""
    subject_plan = ulid_or_none(plan_of(subject, prefix))
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(subject_plan, None, (big,))
    try:
        return _parse(model, subject, prefix, data)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Unreadable(subject_plan, None, (unreadable(exc, f"a {model.__name__}"),))


def _parse(model: type[M], subject: str, prefix: str, data: bytes) -> M | Unreadable:
    subject_plan = plan_of(subject, prefix)
    raw = json_object(data, f"a {model.__name__}")
    if isinstance(raw, RuleViolation):
        return Unreadable(ulid_or_none(subject_plan), None, (raw,))
    plan = ulid_or_none(raw.get("plan_id")) or ulid_or_none(subject_plan)
    cid = ulid_or_none(raw.get("correction_id"))
    broken = Violations()
    if raw.get("correction_id") is None:
        broken.add(RuleViolation(
            rule=Rule.SCHEMA, field="correction_id",
            message="correction_id is required: it identifies the correction across retries"))
    parsed: M | None = None
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    body_plan = getattr(parsed, "plan_id", None)
    if parsed is not None and (subject_plan is None or body_plan != subject_plan.upper()):
        broken.add(RuleViolation(
            rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
            message=f"plan_id {body_plan} does not match the subject {subject}"))
    if broken or parsed is None:
        return Unreadable(plan, cid, broken.result())
    return parsed


def read_request(subject: str, data: bytes, prefix: str = subjects.REQUESTED_PREFIX, *,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
                 ) -> CorrectionRequest | Unreadable:
    """A request from corrections.requested.<plan_id> (or .dryrun., with that prefix)."""
    return read_command(CorrectionRequest, subject, prefix, data, max_payload_bytes)


def read_cancel(subject: str, data: bytes, *,
                max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> CancelRequest | Unreadable:
    return read_command(CancelRequest, subject, subjects.CANCEL_PREFIX, data, max_payload_bytes)


def read_fail(subject: str, data: bytes, *,
              max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> FailRequest | Unreadable:
    """An operator's fail from corrections.fail.<plan_id>."""
    return read_command(FailRequest, subject, subjects.FAIL_PREFIX, data, max_payload_bytes)


def read_retry(subject: str, data: bytes, *,
               max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> RetryRequest | Unreadable:
    """An operator's retry from corrections.retry.<plan_id>."""
    return read_command(RetryRequest, subject, subjects.RETRY_PREFIX, data, max_payload_bytes)
