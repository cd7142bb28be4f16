"""`agents plan use PLAN TEMPLATE`: apply an action template to a plan, promoting the
template's ACTION invariants into the plan's scope (contracts.invariants.plan_use).

Applied: the plan's document names the template (the invariants' version moves, so the
recorder's gate evaluates them from its next batch), and each ACTION invariant of the
template now in force for the plan gets its invariant_enforced decision under the
plan's root, published to the recorder like the reconciler's (one enforced decision
per invariant, so the tree says from when it bound the plan). Idempotent: a request is
answered once and its outcome kept; applying the same template again publishes only
what the plan lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from contracts.decisions.plans import PlanRecord
from contracts.decisions.subjects import recorded
from contracts.invariants.model import InvariantScope
from contracts.invariants.plan_use import PlanUseOutcome, PlanUseRequest, PlanUseStatus
from contracts.invariants.reconciliation import PLAN_USE, enforced_decision, wire_body
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.trust.ownership import Ownership, not_owner, out_of_scope
from contracts.trust.policy import Identity, principal_name
from services.invariants import InvariantService
from services.ports.publishing import EventPublisher
from services.ports.records import DecisionRecords, PlanRecords


class PlanUseRecords(Protocol):
    async def apply(self, plan_id: str, action_template: str) -> bool: ...

    async def get(self, request_id: str) -> PlanUseOutcome | None: ...

    async def keep(self, outcome: PlanUseOutcome) -> None: ...


class PlanTemplateService:
    def __init__(self, invariants: InvariantService, *, plans: PlanRecords,
                 uses: PlanUseRecords, decisions: DecisionRecords,
                 publisher: EventPublisher, clock: Callable[[], datetime] = utc_now) -> None:
        self._invariants = invariants
        self._plans = plans
        self._uses = uses
        self._decisions = decisions
        self._publisher = publisher
        self._clock = clock

    async def use(self, request: PlanUseRequest, identity: Identity = None) -> PlanUseOutcome:
        """Apply the request (or answer its kept outcome): applied with the invariants
        promoted, or refused with its rule."""
        kept = await self._uses.get(request.request_id)
        if kept is not None:
            return kept
        plan = await self._plans.get(request.plan_id)
        refused = _refusal(request, plan, identity)
        if refused is None and not await self._uses.apply(request.plan_id,
                                                          request.action_template):
            # Changed since it was read: another template won, or the plan was removed.
            refused = _conflict(request, await self._plans.get(request.plan_id)) \
                or _not_started(request)
        if refused is not None:
            return await self._keep(request, identity, PlanUseStatus.REFUSED, refused=refused)
        promoted = await self._promote(request)
        return await self._keep(request, identity, PlanUseStatus.APPLIED, promoted=promoted)

    async def outcome(self, request_id: str) -> PlanUseOutcome | None:
        return await self._uses.get(request_id)

    async def _promote(self, request: PlanUseRequest) -> list[str]:
        """The template's invariants in force for the plan now, each with its
        invariant_enforced decision (published when the plan lacks it)."""
        effective = await self._invariants.effective_for(request.plan_id)
        promoted = [i for i in effective if i.scope is InvariantScope.ACTION
                    and i.scope_target == request.action_template]
        root = (await self._decisions.roots_of([request.plan_id])).get(request.plan_id)
        if root is None or not promoted:
            return [i.id for i in promoted]
        enforced = [enforced_decision(root, inv, PLAN_USE) for inv in promoted]
        stored = await self._decisions.get_many(d.decision_id for d in enforced)
        await self._publisher.publish_all([
            OutgoingEvent(recorded(d.plan_id), wire_body(d), d.decision_id)
            for d in enforced if d.decision_id not in stored])
        return [i.id for i in promoted]

    async def _keep(self, request: PlanUseRequest, identity: Identity, status: PlanUseStatus,
                    *, promoted: list[str] | None = None,
                    refused: RuleViolation | None = None) -> PlanUseOutcome:
        outcome = PlanUseOutcome(
            request_id=request.request_id, plan_id=request.plan_id,
            action_template=request.action_template, status=status,
            promoted=promoted or [], rule=refused.rule if refused else None,
            reason=refused.message if refused else None,
            requested_by=principal_name(identity), at=self._clock())
        await self._uses.keep(outcome)
        return await self._uses.get(request.request_id) or outcome


def _not_started(request: PlanUseRequest) -> RuleViolation:
    return RuleViolation(rule=Rule.PLAN_STARTED, field="plan_id",
                         message=f"plan {request.plan_id} has no root recorded: a template "
                         "is applied to a plan that started")


def _refusal(request: PlanUseRequest, plan: PlanRecord | None,
             identity: Identity) -> RuleViolation | None:
    """Who may: an operator within the plan's project, the plan's owner or a delegate
    (a worker, or anyone on a plan without a verified owner)."""
    if plan is None or plan.root_decision_id is None:
        return _not_started(request)
    if identity is not None and identity.principal.role is Role.OPERATOR:
        refused = out_of_scope(identity, plan.plan_id, plan.project)
    else:
        refused = not_owner(plan.plan_id, Ownership(plan.owner, tuple(plan.delegates)),
                            identity, "apply a template to")
    return refused or _conflict(request, plan)


def _conflict(request: PlanUseRequest, plan: PlanRecord | None) -> RuleViolation | None:
    held = plan.action_template if plan else None
    if held is None or held == request.action_template:
        return None
    return RuleViolation(rule=Rule.TEMPLATE_CONFLICT, field="action_template",
                         message=f"plan {request.plan_id} already uses template {held}; a "
                         f"plan takes one template")
