"""Plan records (collection `plans`): where a child plan came from and whether it stands.

A plan exists through its decisions; a record is written for the plans the
correction path creates (append) or changes (revert rolls child plans back), so
that "which plans were rolled back, and why" is answered without scanning decisions.

A plan's lifecycle is one table (PLAN_TRANSITIONS, in contracts.decisions.plan_states):
active, then completed or abandoned by its owner or an operator (`end_plan`, with named
refusals), or rolled back by a revert of the decision that spawned it, whichever state
it is in but rolled back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, Self

from pydantic import Field, model_validator

from contracts.decisions.guidance import Guidance
from contracts.decisions.plan_states import PLAN_LIFECYCLE, PlanStatus
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid
from contracts.shared.timestamps import UtcTime, utc_now


class PlanRecord(Frozen):
    """One document of `plans`, keyed by plan_id."""

    plan_id: Ulid = Field(description="ULID of the plan.")
    parent_plan_id: Ulid | None = Field(
        default=None, description="Plan it was spawned from; None for a top-level plan."
    )
    spawned_from_decision_id: Ulid | None = Field(
        default=None, description="Decision of the parent plan that spawned it."
    )
    guidance: Guidance | None = Field(
        default=None, description="Operator guidance it carries (plans spawned by append)."
    )
    status: PlanStatus = Field(default=PlanStatus.ACTIVE, description="active, rolled_back "
                               "or completed.")
    created_at: UtcTime = Field(default_factory=utc_now, description="UTC creation time.")
    project: str | None = Field(default=None, description="Project the plan targets.")
    action_template: str | None = Field(default=None, description="Action template it uses.")
    root_decision_id: Ulid | None = Field(
        default=None, description="Its root prompt_definition decision, once recorded."
    )
    owner: str | None = Field(
        default=None, description="The principal that signed its root (verified); a child "
        "plan an append spawned has its parent plan's. None: no verified owner.")
    delegates: list[str] = Field(
        default_factory=list, description="Principals its root names besides the owner: "
        "they too may record into it, report against it and start its child plans.")
    rolled_back_by: Ulid | None = Field(
        default=None, description="The correction that rolled it back; None while it stands."
    )
    rolled_back_at: UtcTime | None = Field(
        default=None, description="UTC time it was rolled back; None while it stands."
    )
    ended_as: PlanStatus | None = Field(
        default=None, description="completed or abandoned, once marked so (kept if it is "
        "rolled back later).")
    ended_at: UtcTime | None = Field(
        default=None, description="UTC time it was marked completed or abandoned.")
    ended_by: str | None = Field(
        default=None, description="Who marked it completed or abandoned: the verified "
        "principal, or 'unverified'.")
    end_reason: str | None = Field(default=None, description="Why, as they said.")

    def status_at(self, moment: datetime) -> PlanStatus:
        """Its status as it was at `moment`: a plan rolled back or ended later was
        active then; one completed and rolled back later was completed in between."""
        if self.rolled_back_at is not None and self.rolled_back_at <= moment:
            return PlanStatus.ROLLED_BACK
        if self.ended_as is not None and self.ended_at is not None \
                and self.ended_at <= moment:
            return self.ended_as
        if self.rolled_back_at is None and self.ended_at is None:
            return self.status  # no times recorded: only its status now is known
        return PlanStatus.ACTIVE

    def transition(self, to: PlanStatus) -> PlanRecord:
        PLAN_LIFECYCLE.check(self.status, to)
        return self.model_copy(update={"status": to})

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.parent_plan_id is None) != (self.spawned_from_decision_id is None):
            raise ValueError("parent_plan_id and spawned_from_decision_id go together")
        if self.parent_plan_id == self.plan_id:
            raise ValueError("a plan cannot be its own parent")
        return self



MAX_PLAN_DEPTH = 64
"""Ancestors followed at most: a chain longer than this (or a cycle, which the lineage
rules refuse but stored data from before them may hold) is cut there."""


class ParentOf(Protocol):
    """Known parent links (a dict, or the recorder's LRU cache)."""

    def get(self, plan_id: str, /) -> str | None: ...


def ancestry(plan_id: str, parent_of: ParentOf) -> tuple[str, ...]:
    """The plan's ancestors, parent first, from the known parent links. Stops at a plan
    without a known parent, at a cycle, or after MAX_PLAN_DEPTH plans; never raises."""
    out: list[str] = []
    seen = {plan_id}
    current = parent_of.get(plan_id)
    while current is not None and current not in seen and len(out) < MAX_PLAN_DEPTH:
        out.append(current)
        seen.add(current)
        current = parent_of.get(current)
    return tuple(out)
