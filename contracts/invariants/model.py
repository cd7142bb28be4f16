"""Invariants: natural-language constraints on plans, which ones bind a plan, and what blocks it.

The precedence and the blocking rules are data (`SCOPE_RANK`, `BLOCKED_TYPES`,
`BLOCKING_SEVERITIES`), so the recorder, the reconciliation worker and the CLI all
read the same tables, and each is tested over every combination without a server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from contracts.decisions.types import PHASE_OF, DecisionType, Phase
from contracts.shared.base import Frozen
from contracts.shared.errors import DomainError
from contracts.shared.ids import Ulid, is_ulid, new_id
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime, utc_now

MAX_NAME = 100
MAX_TEXT = 10_000


class InvariantScope(StrEnum):
    PLAN = "PLAN"
    PROJECT = "PROJECT"
    GLOBAL = "GLOBAL"
    ACTION = "ACTION"


SCOPE_RANK: Mapping[InvariantScope, int] = MappingProxyType({
    InvariantScope.GLOBAL: 0,
    InvariantScope.PROJECT: 1,
    # Promoted to plan scope when the plan uses the template, but below an invariant
    # attached to the plan itself: the operator who attached it to this very plan chose
    # for this plan, the template's author chose for every plan using it.
    InvariantScope.ACTION: 2,
    InvariantScope.PLAN: 3,
})
"""Of the invariants of one name that apply to a plan, the highest rank is in force."""


def _name(value: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_NAME or any(ch.isspace() for ch in value):
        raise ValueError(f"an invariant name is 1-{MAX_NAME} characters without spaces, "
                         f"e.g. 'no-prod-deletes'; got {value!r}")
    return value


InvariantName = Annotated[str, AfterValidator(_name)]


class Invariant(Frozen):
    """One stored invariant. `scope_target` says what it is attached to: a plan ID (PLAN),
    a project name (PROJECT), an action template name (ACTION), nothing (GLOBAL)."""

    id: Ulid = Field(default_factory=new_id, description="ULID of the invariant.")
    name: InvariantName = Field(description="Short name; a higher scope's invariant of the "
                                "same name overrides a lower one.", examples=["no-prod-deletes"])
    description: NonEmptyStr = Field(max_length=MAX_TEXT, description="The constraint, in "
                                     "natural language.",
                                     examples=["Never delete production data"])
    scope: InvariantScope = Field(description="PLAN, PROJECT, GLOBAL or ACTION.")
    scope_target: str | None = Field(
        default=None, description="Plan ID (PLAN), project (PROJECT), action template "
        "(ACTION); None for GLOBAL.")
    created_at: UtcTime = Field(default_factory=utc_now, description="UTC creation time.")

    @model_validator(mode="after")
    def _target_fits_scope(self) -> Self:
        target = self.scope_target
        if self.scope is InvariantScope.GLOBAL:
            if target is not None:
                raise ValueError("a GLOBAL invariant has no scope_target")
        elif target is None or not target.strip():
            raise ValueError(f"a {self.scope.value} invariant needs a scope_target")
        elif self.scope is InvariantScope.PLAN and not is_ulid(target):
            raise ValueError(f"a PLAN invariant's scope_target is a plan ID (ULID), "
                             f"got {target!r}")
        return self

    @field_validator("scope_target")
    @classmethod
    def _canonical_plan_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Plan IDs are stored upper case (contracts.shared.ids); the same plan, one spelling.
        if value is not None and info.data.get("scope") is InvariantScope.PLAN:
            return value.upper()
        return value


def applies_to(inv: Invariant, plan_id: str | None, project: str | None,
               action_template: str | None, ancestors: Sequence[str] = ()) -> bool:
    """Whether `inv` binds a plan with this ID, project, action template and ancestors
    (parent first): a PLAN invariant of an ancestor binds the plans it spawned."""
    if inv.scope is InvariantScope.GLOBAL:
        return True
    if inv.scope is InvariantScope.PLAN:
        return inv.scope_target in _family(plan_id, ancestors)
    target = project if inv.scope is InvariantScope.PROJECT else action_template
    return target is not None and inv.scope_target == target


def _family(plan_id: str | None, ancestors: Sequence[str]) -> list[str]:
    """The plan, then its ancestors nearest first, upper case (the stored spelling)."""
    return [p.upper() for p in ([plan_id] if plan_id else []) + list(ancestors)]


def effective_invariants(plan_id: str | None, project: str | None,
                         action_template: str | None,
                         all_invariants: Iterable[Invariant],
                         ancestors: Sequence[str] = ()) -> list[Invariant]:
    """The invariants in force for a plan, one per name, sorted by name.

    PLAN over ACTION (promoted) over PROJECT over GLOBAL. A plan's PLAN invariants
    include those of its ancestors (`ancestors`, parent first): of two PLAN invariants
    of one name, the nearer plan's wins (the plan's own over its parent's over its
    grandparent's). Two of the same name, scope and plan (the store forbids it, but the
    input is anyone's) resolve to the older one, so the answer never depends on the
    input's order."""
    family = _family(plan_id, ancestors)
    distance = {p: i for i, p in reversed(list(enumerate(family)))}
    best: dict[str, Invariant] = {}
    for inv in all_invariants:
        if not applies_to(inv, plan_id, project, action_template, ancestors):
            continue
        held = best.get(inv.name)
        if held is None or _outranks(inv, held, distance):
            best[inv.name] = inv
    return [best[name] for name in sorted(best)]


def _outranks(a: Invariant, b: Invariant, distance: Mapping[str, int]) -> bool:
    ra, rb = SCOPE_RANK[a.scope], SCOPE_RANK[b.scope]
    if ra != rb:
        return ra > rb
    if a.scope is InvariantScope.PLAN:
        da, db = distance[a.scope_target or ""], distance[b.scope_target or ""]
        if da != db:
            return da < db
    return (a.created_at, a.id) < (b.created_at, b.id)


# --- violations ----------------------------------------------------------------------


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


BLOCKING_SEVERITIES: frozenset[Severity] = frozenset({Severity.ERROR})
"""An unresolved violation of these severities blocks its plan; the others only inform."""

BLOCKED_TYPES: frozenset[DecisionType] = frozenset(
    t for t, phase in PHASE_OF.items() if phase is Phase.EXECUTE)
"""What a blocked plan may not record: the Execute phase (implementation_choice,
resource_selection, tool_invocation, error_recovery, validation_response). Strategize
decisions still go through, so the agent can record how it re-plans."""


class InvariantViolation(Frozen):
    """A reported violation. The agent sends everything but the resolution fields, which
    only `resolve_violation` sets."""

    violation_id: Ulid = Field(
        default_factory=new_id,
        description="ULID generated by the reporter (also the Nats-Msg-Id), so a retry is "
        "the same report.", examples=["01JD7Y0A1B2C3D4E5F6G7H8J9K"])
    invariant_id: Ulid = Field(description="The violated invariant.")
    plan_id: Ulid = Field(description="The plan that violated it.")
    decision_id: Ulid | None = Field(
        default=None, description="The decision that violated it, when one did; None for a "
        "violation of the plan as a whole.")
    severity: Severity = Field(description="error blocks the plan's Execute phase until "
                               "resolved; warning and info never block.")
    details: NonEmptyStr = Field(max_length=MAX_TEXT, description="What was violated, how.")
    reported_at: UtcTime = Field(default_factory=utc_now,
                                 description="UTC; the worker's receive time when absent.")
    resolved_at: UtcTime | None = Field(default=None, description="When an operator "
                                        "resolved it; set only by resolve_violation.")
    resolved_by: str | None = Field(default=None, description="Who resolved it.")

    @property
    def is_resolved(self) -> bool:
        return self.resolved_at is not None

    @property
    def blocks(self) -> bool:
        return not self.is_resolved and self.severity in BLOCKING_SEVERITIES

    def report_fields(self) -> dict[str, object]:
        """What identifies the report: a retry stamped later is still the same report."""
        return self.model_dump(mode="json", exclude={"reported_at", "resolved_at",
                                                     "resolved_by"})


def blocked_types_text() -> str:
    return ", ".join(sorted(t.value for t in BLOCKED_TYPES))


# --- named errors ----------------------------------------------------------------------


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
