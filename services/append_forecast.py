"""The child plan an append would create, and the invariants it would run under
(contracts.corrections.append_impact): for the dry run, and again when the append is
executed."""

from __future__ import annotations

from typing import Protocol

from contracts.corrections.append_impact import ChildPlanForecast, InvariantInForce
from contracts.decisions.model import Decision
from contracts.decisions.plans import PlanRecord
from contracts.invariants.model import Invariant
from contracts.invariants.precedence import effective_invariants
from contracts.shared.bounds import INLINE_IDS_MAX
from services.ports.invariants import InvariantRecords, ViolationRecords
from services.ports.records import PlanRecords


class AppendForecaster(Protocol):
    async def forecast(self, target: Decision, record: PlanRecord | None
                       ) -> ChildPlanForecast: ...


def _in_force(inv: Invariant) -> InvariantInForce:
    return InvariantInForce(id=inv.id, name=inv.name, scope=inv.scope.value,
                            scope_target=inv.scope_target, severity=inv.severity.value,
                            checked=inv.check is not None, consequence=inv.outcome.value)


class InvariantForecaster:
    def __init__(self, *, invariants: InvariantRecords, violations: ViolationRecords,
                 plans: PlanRecords, judged: bool = False) -> None:
        self._invariants = invariants
        self._violations = violations
        self._plans = plans
        self._judged = judged

    async def forecast(self, target: Decision, record: PlanRecord | None
                       ) -> ChildPlanForecast:
        """A child of `target`'s plan: its project and template, and its lineage's PLAN
        invariants (parent first), as a new plan of them would get."""
        parent = target.plan_id
        project = record.project if record else target.project
        template = record.action_template if record else target.action_template
        lineage = (parent, *(await self._plans.ancestors([parent])).get(parent, ()))
        inputs = await self._invariants.inputs_for(
            lineage, [project] if project else [], [template] if template else [])
        effective = effective_invariants(None, project, template, inputs, lineage)
        blocked = await self._violations.blocked_plans(lineage)
        return ChildPlanForecast(
            parent_plan_id=parent, spawned_from_decision_id=target.decision_id,
            project=project, action_template=template,
            invariants=[_in_force(i) for i in effective[:INLINE_IDS_MAX]],
            invariants_count=len(effective), judged=self._judged,
            blocked_by_plans=[p for p in lineage if p in blocked][:INLINE_IDS_MAX])
