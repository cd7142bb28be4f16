"""The impact analysis' one error: its target does not exist.

Raised by the walk's summary and by a correction's write set alike (a correction is
planned from an impact), and reported as rule `target_not_found`.
"""

from __future__ import annotations

from contracts.shared.errors import DomainError


class TargetNotFound(DomainError):
    """The decision a correction names does not exist."""

    def __init__(self, decision_id: str, plan_id: str | None = None) -> None:
        self.decision_id = decision_id
        self.plan_id = plan_id
        where = f" in plan {plan_id}" if plan_id else ""
        super().__init__(f"target decision {decision_id} not found{where}")
