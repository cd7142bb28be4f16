"""Reading the upkeep commands off the wire (a comment, a plan ending, a dead-letter
discard): a command, or every reason it is unreadable.

Pure and never raising, like every reader: a body over the limit is refused unread,
and whatever reading throws is that message's `unreadable` violation. The subject's
token must agree with the body: the plan for a comment or an ending (rule
subject_matches_plan), the stream of the letter for a discard.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.dead_letter_care import DiscardRequest, stream_of
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.subject_tokens import plan_of
from contracts.shared.unreadable import Unreadable, ulid_or_none

M = TypeVar("M", bound=BaseModel)


def read_upkeep(model: type[M], subject: str, prefix: str, data: bytes,
                max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> M | Unreadable:
    """`model` from `<prefix>.<token>`; never raises."""
    token = plan_of(subject, prefix)
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(ulid_or_none(token), None, (big,))
    try:
        return _parse(model, subject, token, data)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Unreadable(ulid_or_none(token), None, (unreadable(exc, f"a {model.__name__}"),))


def _parse(model: type[M], subject: str, token: str | None, data: bytes) -> M | Unreadable:
    raw = json_object(data, f"a {model.__name__}")
    if isinstance(raw, RuleViolation):
        return Unreadable(ulid_or_none(token), None, (raw,))
    broken = Violations()
    parsed: M | None = None
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    if parsed is not None:
        mismatch = _mismatch(parsed, subject, token)
        if mismatch is not None:
            broken.add(mismatch)
    plan = ulid_or_none(getattr(parsed, "plan_id", None) or raw.get("plan_id") or token)
    if broken or parsed is None:
        return Unreadable(plan, None, broken.result())
    return parsed


def _mismatch(parsed: BaseModel, subject: str, token: str | None) -> RuleViolation | None:
    if isinstance(parsed, DiscardRequest):
        if stream_of(parsed.dead_letter_id) != token:
            return RuleViolation(rule=Rule.SCHEMA, field="dead_letter_id",
                                 message=f"dead letter {parsed.dead_letter_id} is not of "
                                 f"the subject's stream ({subject})")
        return None
    plan = getattr(parsed, "plan_id", None)
    if token is None or plan != token.upper():
        return RuleViolation(rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
                             message=f"plan_id {plan} does not match the subject {subject}")
    return None
