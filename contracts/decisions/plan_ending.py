"""Marking a plan completed or abandoned: the request, and the rules it must pass.

Its owner (the principal that recorded its root) or an operator may end a plan; a plan
with no verified owner (recorded unsigned) may be ended by anyone who may publish the
request, which NATS permissions limit to agents and operators. Only an active plan
ends (the plan lifecycle's table, contracts.decisions.plans), and never while one of
its corrections is unfinished: it would end a plan whose tree is about to change.
Each refusal is a named error raised before anything is written. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from contracts.decisions.plan_states import ENDINGS, PLAN_LIFECYCLE, PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.shared.actor import Actor
from contracts.shared.base import Frozen
from contracts.shared.errors import DomainError, IllegalTransition
from contracts.shared.ids import Ulid

REASON_MAX_CHARS = 1000


class EndPlanRequest(Frozen):
    """Published to `decisions.end_plan.<plan_id>` (Nats-Msg-Id
    `end_plan:<plan_id>:<status>`: one ending per plan and state)."""

    plan_id: Ulid = Field(description="The plan; must match the subject.")
    status: Literal["completed", "abandoned"] = Field(description="How it ends.")
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS,
                               description="Why, kept with the plan's record.")

    def msg_id(self) -> str:
        return f"end_plan:{self.plan_id}:{self.status}"


class EndRefusal(StrEnum):
    UNKNOWN_PLAN = "unknown_plan"
    NOT_ACTIVE = "not_active"
    NOT_OWNER = "not_owner"
    CORRECTIONS_OPEN = "corrections_open"


class PlanEndRefused(DomainError):
    """Why a plan was not ended, in one sentence; `refusal` names the rule."""

    def __init__(self, refusal: EndRefusal, plan_id: str, message: str) -> None:
        self.refusal = refusal
        self.plan_id = plan_id
        super().__init__(message)


def end_plan(plan_id: str, record: PlanRecord | None, *, recorded: bool,
             to: PlanStatus, actor: Actor, owner: str | None, open_corrections: int,
             at: datetime, reason: str | None = None) -> PlanRecord:
    """The plan's record once ended in `to`; PlanEndRefused when a rule forbids it.
    `recorded`: whether the plan holds a decision (a plan exists through them);
    `owner`: the principal that recorded its root, None when none was verified."""
    if to not in ENDINGS:
        raise ValueError(f"a plan is ended completed or abandoned, not {to.value}")
    if record is None and not recorded:
        raise PlanEndRefused(EndRefusal.UNKNOWN_PLAN, plan_id,
                             f"no plan {plan_id} is recorded")
    current = record or PlanRecord(plan_id=plan_id, created_at=at)
    try:
        PLAN_LIFECYCLE.check(current.status, to)
    except IllegalTransition:
        raise PlanEndRefused(EndRefusal.NOT_ACTIVE, plan_id,
                             f"plan {plan_id} is {current.status.value}: only an active "
                             "plan can be marked completed or abandoned") from None
    if owner is not None and not actor.is_operator() and actor.name != owner:
        raise PlanEndRefused(EndRefusal.NOT_OWNER, plan_id,
                             f"plan {plan_id} belongs to {owner}; {actor.label} is neither "
                             "its owner nor an operator")
    if open_corrections:
        raise PlanEndRefused(EndRefusal.CORRECTIONS_OPEN, plan_id,
                             f"plan {plan_id} has {open_corrections} correction(s) not "
                             "finished; wait for them (or cancel them) first")
    return current.model_copy(update={
        "status": to, "ended_as": to, "ended_at": at, "ended_by": actor.label,
        "end_reason": reason})
