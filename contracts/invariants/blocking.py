"""The blocking rule: an unresolved error violation of a plan, or of one of its
ancestors, refuses the plan's Execute-phase decisions. The recorder applies it to every
batch (contracts.recording.triage)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contracts.decisions.types import DecisionType
from contracts.invariants.violations import BLOCKED_TYPES
from contracts.shared.errors import DomainError


class ReconciliationBlocked(DomainError):
    """An Execute-phase decision of a plan with an unresolved error violation, its own or
    an ancestor plan's (`blocked_by`, the plan whose violations block it)."""

    def __init__(self, plan_id: str, decision_type: DecisionType,
                 violation_ids: Sequence[str], blocked_by: str | None = None) -> None:
        self.plan_id = plan_id
        self.decision_type = decision_type
        self.violation_ids = tuple(violation_ids)
        self.blocked_by = blocked_by or plan_id
        shown = ", ".join(self.violation_ids[:5]) + (
            " ..." if len(self.violation_ids) > 5 else "")
        whose = "" if self.blocked_by == plan_id else \
            f" of its ancestor plan {self.blocked_by}"
        super().__init__(
            f"plan {plan_id} is blocked by unresolved error violation(s){whose} {shown}: "
            f"{decision_type.value} (Execute phase) is refused until an operator resolves "
            f"them (agents invariant resolve {self.violation_ids[0]})")


def check_not_blocked(plan_id: str, decision_type: DecisionType,
                      blocking: Mapping[str, Sequence[str]],
                      ancestors: Sequence[str] = ()) -> None:
    """Raise ReconciliationBlocked if `decision_type` may not be recorded in `plan_id` now.

    `blocking` maps plan IDs to their unresolved blocking violation IDs; `ancestors` are
    the plan's ancestors, parent first. The plan's own violations are named first, then
    the nearest blocked ancestor's."""
    if decision_type not in BLOCKED_TYPES:
        return
    for plan in (plan_id, *ancestors):
        violations = blocking.get(plan)
        if violations:
            raise ReconciliationBlocked(plan_id, decision_type, violations, plan)
