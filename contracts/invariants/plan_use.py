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

from pydantic import Field

from contracts.invariants import subjects
from contracts.invariants.model import InvariantName
from contracts.shared.base import Frozen
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.ids import Ulid, new_id
from contracts.shared.plan_requests import read_plan_request
from contracts.shared.rules import Rule
from contracts.shared.unreadable import Unreadable


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
    Never raises (contracts.shared.plan_requests)."""
    return read_plan_request(PlanUseRequest, subject, subjects.TEMPLATES_PREFIX, headers, data,
                             max_payload_bytes=max_payload_bytes)
