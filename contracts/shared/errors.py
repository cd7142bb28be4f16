"""Named domain errors.

Workers map these onto outcomes (FAILED with the message, a refusal event, a
term instead of a nak): a retry cannot fix any of them, so each one names the
rule that was broken and carries the values needed to say so in one sentence.
They deliberately do not subclass ValueError, so pydantic never swallows one
into a ValidationError and a caller cannot confuse them with bad input.
"""

from __future__ import annotations

from enum import Enum


class DomainError(Exception):
    """Base of every error the pure domain raises on purpose."""


class IllegalTransition(DomainError):
    """A lifecycle was asked to move along an edge its table does not have."""

    def __init__(
        self, machine: str, from_: Enum, to: Enum, *, allowed: frozenset[Enum] = frozenset()
    ) -> None:
        self.machine = machine
        self.from_ = from_
        self.to = to
        self.allowed = allowed
        if from_ == to:
            why = "self-transitions are not allowed"
        elif not allowed:
            why = f"{from_.value} is terminal"
        else:
            why = "allowed from here: " + ", ".join(sorted(str(s.value) for s in allowed))
        super().__init__(
            f"{machine}: illegal transition {from_.value} -> {to.value} ({why})"
        )


class TargetNotFound(DomainError):
    """The decision a correction names does not exist."""

    def __init__(self, decision_id: str, plan_id: str | None = None) -> None:
        self.decision_id = decision_id
        self.plan_id = plan_id
        where = f" in plan {plan_id}" if plan_id else ""
        super().__init__(f"target decision {decision_id} not found{where}")


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
