"""Reading an operator's request addressed to one plan (`<prefix>.<plan_id>`, Nats-Msg-Id
equal to its `request_id`): the request, or every reason it is unreadable.

Requests of several capabilities share this shape (`agents plan use`, an approval's
verdict), so the rules every one of them keeps are read here once: the body is a JSON
object within the payload limit, it carries its `request_id` (the model would otherwise
invent one per parse, and a redelivery would become a second request), its `plan_id` is
the subject's, and its Nats-Msg-Id is its request_id (so JetStream deduplicates a
retry). A capability adds the rules of its own model (`rules`). Pure and never raising:
any body, however hostile, is a request or an `Unreadable` with a bounded list of
reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.payload import json_object, too_large, unreadable
from contracts.shared.rules import Rule, RuleViolation, Violations
from contracts.shared.subject_tokens import plan_of
from contracts.shared.unreadable import Unreadable, ulid_or_none

R = TypeVar("R", bound=BaseModel)


def read_plan_request(model: type[R], subject: str, prefix: str, headers: Mapping[str, str],
                      data: bytes, *, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                      rules: Callable[[R], Iterable[RuleViolation]] = lambda _: ()
                      ) -> R | Unreadable:
    """The `model` request on `<prefix>.<plan_id>`, or every reason it is not one."""
    plan = ulid_or_none(plan_of(subject, prefix))
    big = too_large(data, max_payload_bytes)
    if big is not None:
        return Unreadable(plan, None, (big,))
    what = f"a {model.__name__}"
    try:
        return _parse(model, subject, plan, headers, data, what=what, rules=rules)
    except Exception as exc:  # hostile input: the message is at fault, never the batch
        return Unreadable(plan, None, (unreadable(exc, what),))


def _parse(model: type[R], subject: str, plan: str | None, headers: Mapping[str, str],
           data: bytes, *, what: str, rules: Callable[[R], Iterable[RuleViolation]]
           ) -> R | Unreadable:
    raw = json_object(data, what)
    if isinstance(raw, RuleViolation):
        return Unreadable(plan, None, (raw,))
    broken = Violations()
    if "request_id" not in raw:
        broken.add(RuleViolation(rule=Rule.SCHEMA, field="request_id",
                                 message="request_id is required: it identifies the "
                                 "request across retries"))
    parsed: R | None = None
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        broken.add_validation_error(exc)
    if parsed is not None:
        for v in (*_addressed(subject, plan, headers, parsed), *rules(parsed)):
            broken.add(v)
    if broken or parsed is None:
        return Unreadable(plan or ulid_or_none(raw.get("plan_id")),
                          ulid_or_none(raw.get("request_id")), broken.result())
    return parsed


def _addressed(subject: str, plan: str | None, headers: Mapping[str, str],
               request: BaseModel) -> list[RuleViolation]:
    """The body's plan is the subject's, and its Nats-Msg-Id its request_id."""
    out = []
    body_plan, request_id = getattr(request, "plan_id", None), getattr(request, "request_id", None)
    if body_plan != plan:
        out.append(RuleViolation(rule=Rule.SUBJECT_MATCHES_PLAN, field="plan_id",
                                 message=f"plan_id {body_plan} does not match the subject "
                                 f"{subject[:120]}"))
    msg_id = headers.get(MSG_ID_HEADER)
    if msg_id is None or msg_id.upper() != request_id:
        out.append(RuleViolation(
            rule=Rule.MSG_ID_MATCHES_REQUEST, field="request_id",
            message=f"header {MSG_ID_HEADER} must equal request_id {request_id} "
            f"(got {str(msg_id)[:40]!r}), so a retry is deduplicated"))
    return out
