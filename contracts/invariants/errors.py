"""Why an operator's invariant command or an agent's report cannot be taken as sent."""

from __future__ import annotations

from contracts.invariants.model import InvariantScope
from contracts.invariants.violations import InvariantViolation
from contracts.shared.errors import DomainError


class DuplicateInvariant(DomainError):
    """An invariant of that name already exists at that scope and target."""

    def __init__(self, name: str, scope: InvariantScope, scope_target: str | None,
                 existing_id: str | None = None) -> None:
        self.name = name
        self.scope = scope
        self.scope_target = scope_target
        self.existing_id = existing_id
        where = f" {scope_target}" if scope_target else ""
        which = f" ({existing_id})" if existing_id else ""
        super().__init__(f"invariant {name!r} already exists at {scope.value}{where}{which}; "
                         "remove it first or pick another name")


class ViolationAlreadyResolved(DomainError):
    def __init__(self, violation: InvariantViolation) -> None:
        self.violation = violation
        super().__init__(f"violation {violation.violation_id} was already resolved by "
                         f"{violation.resolved_by} at {violation.resolved_at}")


class ViolationConflict(DomainError):
    """A violation_id already reported with other content."""

    def __init__(self, violation_id: str) -> None:
        self.violation_id = violation_id
        super().__init__(f"violation {violation_id} is already reported with different "
                         "content; a new report needs a new violation_id")


class InvalidInvariant(DomainError):
    """An invariant the model refuses (blank name, GLOBAL with a target, ...)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid invariant: {reason}")
