"""Invariants: natural-language constraints on plans, their scopes and the rank of each.

Which invariants bind a plan is `contracts.invariants.precedence`, what a violation
blocks `contracts.invariants.blocking`. The precedence and the blocking rules are data
(`SCOPE_RANK`, `BLOCKED_TYPES`, `BLOCKING_SEVERITIES`), so the recorder, the
reconciliation worker and the CLI all read the same tables, and each is tested over
every combination without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
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

from contracts.invariants.severity import CONSEQUENCES, DEFAULT_CONSEQUENCE, Consequence, Severity
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, is_ulid, new_id
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime, utc_now

MAX_NAME = 100
MAX_TEXT = 10_000
MAX_CHECK_CHARS = 1000
"""Longest check expression (contracts.invariants.checks says why)."""


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
    check: str | None = Field(
        default=None,
        description="A CEL expression over the decision, true while the decision keeps the "
        "invariant (contracts.invariants.checks); None: written only in words.",
        examples=['!(tool.name == "shell" && tool.arguments.cmd.contains("rm -rf"))'])
    severity: Severity = Field(
        default=Severity.ERROR, description="How serious breaking it is: error, warning, "
        "info (a checked or judged invariant's violations have it).")
    consequence: Consequence | None = Field(
        default=None, description="What a decision breaking it gets: refuse or hold "
        "(error), record (warning, info); None: refuse for error, record otherwise.")

    @property
    def outcome(self) -> Consequence:
        """The consequence a breaking decision gets (the severity's default if unset)."""
        return self.consequence or DEFAULT_CONSEQUENCE[self.severity]

    @model_validator(mode="after")
    def _consequence_fits_severity(self) -> Self:
        if self.consequence is not None and self.consequence not in CONSEQUENCES[self.severity]:
            allowed = " or ".join(sorted(c.value for c in CONSEQUENCES[self.severity]))
            raise ValueError(f"a {self.severity.value} invariant's consequence is {allowed}, "
                             f"not {self.consequence.value}")
        return self

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
