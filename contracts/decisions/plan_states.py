"""A plan's states and its lifecycle table, apart from the plan record's model
(contracts.decisions.plans): the CLI names them in its options and colours, and
importing them costs no pydantic (so `agents --help` stays quick)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from contracts.shared.lifecycle import Lifecycle

__all__ = ["ENDINGS", "PLAN_LIFECYCLE", "PLAN_TRANSITIONS", "PlanStatus"]


class PlanStatus(StrEnum):
    ACTIVE = "active"
    ROLLED_BACK = "rolled_back"
    COMPLETED = "completed"
    ABANDONED = "abandoned"


PLAN_TRANSITIONS: Mapping[PlanStatus, frozenset[PlanStatus]] = MappingProxyType({
    PlanStatus.ACTIVE: frozenset({PlanStatus.ROLLED_BACK, PlanStatus.COMPLETED,
                                  PlanStatus.ABANDONED}),
    # A finished child plan is still rolled back when the decision that spawned it is
    # reverted: the rollback is about the parent's tree, whatever the child came to.
    PlanStatus.COMPLETED: frozenset({PlanStatus.ROLLED_BACK}),
    PlanStatus.ABANDONED: frozenset({PlanStatus.ROLLED_BACK}),
    PlanStatus.ROLLED_BACK: frozenset(),
})
ENDINGS = frozenset({PlanStatus.COMPLETED, PlanStatus.ABANDONED})
"""The states a plan's owner or an operator may end it in (`end_plan`)."""
PLAN_LIFECYCLE = Lifecycle("plan", PLAN_TRANSITIONS, PlanStatus.ACTIVE)
