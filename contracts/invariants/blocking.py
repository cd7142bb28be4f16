"""The phase rule: while a plan, or one of its ancestors, has an unresolved error
violation or a decision awaiting a person's approval, the plan's Execute-phase
decisions are refused (rule reconciliation_blocked); Strategize decisions go on, so the
agent can record how it re-plans.

Refused rather than held (docs/decisions/0033-checked-invariants-and-gates.md): holding
every later Execute decision would queue work behind one approval that nobody asked
for, and an agent told "refused" re-plans or waits, while one told "held" may only
wait. The recorder applies the rule to every batch: to the stored violations in its
triage (contracts.recording.triage), and to the pending approvals and the violations
found in the same batch through its gate (contracts.invariants.gate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contracts.decisions.types import DecisionType
from contracts.invariants.violations import BLOCKED_TYPES
from contracts.shared.errors import DomainError


class PhaseBlocked(DomainError):
    """An Execute-phase decision of a plan the phase rule blocks: `blocked_by` is the
    plan (itself or an ancestor) whose violations or approvals block it."""

    def __init__(self, plan_id: str, decision_type: DecisionType, blocked_by: str | None,
                 message: str) -> None:
        self.plan_id = plan_id
        self.decision_type = decision_type
        self.blocked_by = blocked_by or plan_id
        super().__init__(message)


def _shown(ids: Sequence[str]) -> str:
    return ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")


class ReconciliationBlocked(PhaseBlocked):
    """Blocked by unresolved error violations (`violation_ids`)."""

    def __init__(self, plan_id: str, decision_type: DecisionType,
                 violation_ids: Sequence[str], blocked_by: str | None = None) -> None:
        self.violation_ids = tuple(violation_ids)
        by = blocked_by or plan_id
        whose = "" if by == plan_id else f" of its ancestor plan {by}"
        super().__init__(
            plan_id, decision_type, blocked_by,
            f"plan {plan_id} is blocked by unresolved error violation(s){whose} "
            f"{_shown(self.violation_ids)}: {decision_type.value} (Execute phase) is refused "
            f"until an operator resolves them (agents invariant resolve "
            f"{self.violation_ids[0]})")


class AwaitingApproval(PhaseBlocked):
    """Blocked by decisions awaiting a person's approval (`decision_ids`)."""

    def __init__(self, plan_id: str, decision_type: DecisionType,
                 decision_ids: Sequence[str], blocked_by: str | None = None) -> None:
        self.decision_ids = tuple(decision_ids)
        by = blocked_by or plan_id
        whose = "" if by == plan_id else f" (in its ancestor plan {by})"
        super().__init__(
            plan_id, decision_type, blocked_by,
            f"plan {plan_id} has decision(s) awaiting approval{whose} "
            f"{_shown(self.decision_ids)}: {decision_type.value} (Execute phase) is refused "
            "until a person decides on them")


def check_not_blocked(plan_id: str, decision_type: DecisionType,
                      blocking: Mapping[str, Sequence[str]],
                      ancestors: Sequence[str] = (),
                      approvals: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise ReconciliationBlocked if `decision_type` may not be recorded in `plan_id` now.

    `blocking` maps plan IDs to their unresolved blocking violation IDs, `approvals` to
    their decisions awaiting approval; `ancestors` are the plan's ancestors, parent
    first. The plan's own are named first, then the nearest blocked ancestor's."""
    if decision_type not in BLOCKED_TYPES:
        return
    for plan in (plan_id, *ancestors):
        violations = blocking.get(plan)
        if violations:
            raise ReconciliationBlocked(plan_id, decision_type, violations, plan)
        pending = (approvals or {}).get(plan)
        if pending:
            raise AwaitingApproval(plan_id, decision_type, pending, plan)
