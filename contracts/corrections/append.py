"""What an append writes, in one transaction: a child plan under the target, its root
carrying the guidance, and the user_intervention decision linking the two. The target
itself is not touched."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from contracts.corrections.planning import check_mode, guidance_context, validate_target
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.corrections.transition import TransitionInfo
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.decisions.types import DecisionType
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid


class AppendWrites(Frozen):
    """Everything an append writes, in one transaction; the target itself is not touched."""

    correction_id: Ulid = Field(description="The correction.")
    plan_id: Ulid = Field(description="The plan of the target.")
    target_decision_id: Ulid = Field(description="The decision the child plan hangs under.")
    child_plan: PlanRecord = Field(description="The new child plan's record.")
    child_root: Decision = Field(description="Its root prompt_definition, carrying the guidance.")
    intervention: Decision = Field(
        description="user_intervention under the target; downstream_plan_ids names the child."
    )

    @property
    def new_decision_id(self) -> str:
        """The decision an append adds to the corrected plan: the intervention."""
        return self.intervention.decision_id

    def applied_info(self) -> TransitionInfo:
        return {
            "new_decision_id": self.intervention.decision_id,
            "child_plans_spawned": [self.child_plan.plan_id],
        }


def append_writes(
    request: CorrectionRequest,
    target: Decision,
    *,
    child_plan_id: str,
    child_root_decision_id: str,
    intervention_decision_id: str,
    sequence_number: int,
    at: datetime,
    project: str | None = None,
    action_template: str | None = None,
    note: str | None = None,
) -> AppendWrites:
    """A child plan rooted at the target, and the intervention decision linking the two.

    `sequence_number` is the next one of the target's plan (for the intervention);
    the child plan's root is its sequence 0. `project` and `action_template` are the
    parent plan's, which the child inherits; `note` what the child starts under (the
    invariants in force for it: contracts.corrections.append_impact), for its root.
    """
    check_mode(request, CorrectionMode.APPEND)
    validate_target(request, target)
    context = guidance_context(request)
    # Who asked is on the correction, as verified; the body's requested_by is only a claim.
    origin = f"Correction {request.correction_id}."
    child_plan = PlanRecord(
        plan_id=child_plan_id,
        parent_plan_id=target.plan_id,
        spawned_from_decision_id=target.decision_id,
        guidance=request.guidance,
        status=PlanStatus.ACTIVE,
        created_at=at,
        project=project,
        action_template=action_template,
        root_decision_id=child_root_decision_id,
    )
    child_root = Decision(
        decision_id=child_root_decision_id,
        plan_id=child_plan_id,
        parent_decision_id=None,
        sequence_number=0,
        decision_type=DecisionType.PROMPT_DEFINITION,
        question=f"Follow-up to decision {target.decision_id}: {target.question}",
        chosen_option=request.guidance,
        context_snapshot=context,
        rationale=f"{origin} {note}" if note else origin,
        created_at=at,
        project=project,
        action_template=action_template,
    )
    intervention = Decision(
        decision_id=intervention_decision_id,
        plan_id=target.plan_id,
        parent_decision_id=target.decision_id,
        sequence_number=sequence_number,
        decision_type=DecisionType.USER_INTERVENTION,
        question=f"Operator guidance on: {target.question}",
        chosen_option=request.guidance,
        context_snapshot=context,
        rationale=origin,
        downstream_plan_ids=[child_plan_id],
        created_at=at,
    )
    return AppendWrites(
        correction_id=request.correction_id, plan_id=target.plan_id,
        target_decision_id=target.decision_id, child_plan=child_plan,
        child_root=child_root, intervention=intervention,
    )
