"""Why a correction cannot be applied as asked: each names the rule it breaks and
carries the values to say so in one sentence. A retry cannot fix any of them."""

from __future__ import annotations

from contracts.shared.errors import DomainError


class TargetSuperseded(DomainError):
    """The target was already replaced; correcting it would fork the history."""

    def __init__(self, decision_id: str, superseded_by: str) -> None:
        self.decision_id = decision_id
        self.superseded_by = superseded_by
        super().__init__(
            f"target decision {decision_id} is already superseded by {superseded_by}; "
            f"correct the current decision {superseded_by} instead"
        )


class TargetInOtherPlan(DomainError):
    """The request's plan_id (and so its subject) disagrees with the target's plan."""

    def __init__(self, decision_id: str, requested_plan_id: str, actual_plan_id: str) -> None:
        self.decision_id = decision_id
        self.requested_plan_id = requested_plan_id
        self.actual_plan_id = actual_plan_id
        super().__init__(
            f"target decision {decision_id} belongs to plan {actual_plan_id}, "
            f"not to plan {requested_plan_id} named by the request"
        )


class CorrectionTooLarge(DomainError):
    """The correction would touch more decisions than CORRECTIONS_MAX_DECISIONS allows."""

    def __init__(self, decision_id: str, limit: int) -> None:
        self.decision_id = decision_id
        self.limit = limit
        super().__init__(
            f"correcting decision {decision_id} would touch more than {limit} decisions "
            f"(CORRECTIONS_MAX_DECISIONS={limit}); nothing was written. Correct a decision "
            "deeper in the tree, or raise the limit"
        )
