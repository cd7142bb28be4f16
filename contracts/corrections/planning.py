"""What a correction writes is decided without touching the store; these are the
checks and the context both modes share.

The service loads the target (and runs the impact walk), calls `validate_target` and
then `revert_writes` (contracts.corrections.revert) or `append_writes`
(contracts.corrections.append), and the store commits the returned write set in one
transaction. Keeping the decision here means every rule of a correction is tested
without a server, and the store only has to be atomic, not clever.
"""

from __future__ import annotations

import hashlib

from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.impact.errors import TargetNotFound


def validate_target(request: CorrectionRequest, target: Decision | None, *,
                    allow_superseded: bool = False) -> None:
    """Raise the named reason a correction of `target` cannot go ahead, if there is one.

    The plan is checked before supersession: a decision of another plan is not this
    plan's business whatever its state, and saying "superseded" would mislead. A dry run
    passes `allow_superseded` (its report warns instead); applying never does.
    """
    if target is None or target.decision_id != request.decision_id:
        raise TargetNotFound(request.decision_id, request.plan_id)
    if target.plan_id != request.plan_id:
        raise TargetInOtherPlan(target.decision_id, request.plan_id, target.plan_id)
    if target.superseded_by is not None and not allow_superseded:
        raise TargetSuperseded(target.decision_id, target.superseded_by)


def guidance_context(request: CorrectionRequest) -> ContextSnapshot:
    """The context of a decision an operator made: the guidance is all of it.

    The reference names the correction, whose document holds the guidance, so the
    context can be recovered the way an agent's stored context would be.
    """
    digest = hashlib.sha256(request.guidance.encode("utf-8")).hexdigest()
    return ContextSnapshot(
        hot_context_hash=f"sha256:{digest}",
        hot_context_ref=f"correction:{request.correction_id}",
    )


def check_mode(request: CorrectionRequest, mode: CorrectionMode) -> None:
    if request.mode is not mode:
        raise ValueError(f"a {request.mode.value} request cannot be planned as {mode.value}")
