"""Who may act on a plan: its owner and delegates, operators within their projects.

A plan belongs to the principal that signed its root, and to the principals the root
names in `delegates`. Decisions into it, violation reports against it, and claims of it
as a child plan come from those principals only (rule `plan_owner`); a child plan's root
is signed by the owner or a delegate of the plan that claims it. Workers are trusted:
what they send (a new plan's invariant_enforced decisions) goes into any plan. A plan
whose root was not signed (a development ledger that accepts unsigned messages) has no
owner, and anyone may act on it; a plan that has one refuses unsigned messages.

Operators act on plans whose project their `projects` list (or `*`): correction
requests, cancels, fails, retries and violation resolutions (rule `operator_scope`).
Pure: the owner and the project are facts the caller read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.shared.errors import DomainError
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.trust.policy import Identity


class Refused(DomainError):
    """An act the principal may not do here (plan_owner, operator_scope): the rule."""

    def __init__(self, violation: RuleViolation) -> None:
        self.violation = violation
        super().__init__(f"{violation.rule.value}: {violation.message}")


@dataclass(frozen=True, slots=True)
class Ownership:
    """A plan's owner and delegates (owner None: no verified owner, anyone may act)."""

    owner: str | None = None
    delegates: tuple[str, ...] = ()

    @property
    def principals(self) -> tuple[str, ...]:
        """Who may act on the plan, owner first (empty when it has no owner)."""
        return () if self.owner is None else (self.owner, *self.delegates)

    def admits(self, identity: Identity) -> bool:
        if self.owner is None:
            return True
        if identity is None:
            return False
        return identity.principal.role is Role.WORKER \
            or identity.principal.name in self.principals

    def admits_name(self, name: str | None) -> bool:
        """Whether a plan owned by `name` (None: unowned) may be this plan's child."""
        return self.owner is None or name in self.principals


def who(identity: Identity) -> str:
    return "an unsigned message" if identity is None else identity.principal.name


def not_owner(plan_id: str, ownership: Ownership, identity: Identity, what: str,
              field: str = "plan_id") -> RuleViolation | None:
    """`plan_owner` when `identity` may not `what` (record into, report against) the plan."""
    if ownership.admits(identity):
        return None
    return RuleViolation(
        rule=Rule.PLAN_OWNER, field=field,
        message=f"plan {plan_id} belongs to {_names(ownership.principals)}; "
        f"{who(identity)} may not {what} it")


def child_refused(parent: str, parent_ownership: Ownership, child: str,
                  child_owner: str | None, field: str) -> RuleViolation | None:
    """`plan_owner` when a plan owned by `child_owner` may not be `parent`'s child."""
    if parent_ownership.admits_name(child_owner):
        return None
    owner = "no verified principal" if child_owner is None else child_owner
    return RuleViolation(
        rule=Rule.PLAN_OWNER, field=field,
        message=f"plan {child} (started by {owner}) cannot be a child plan of plan {parent}, "
        f"which belongs to {_names(parent_ownership.principals)}")


def out_of_scope(identity: Identity, plan_id: str, project: str | None
                 ) -> RuleViolation | None:
    """`operator_scope` when a verified operator acts outside its projects."""
    if identity is None or identity.principal.role is Role.WORKER:
        return None
    principal = identity.principal
    if principal.covers_project(project):
        return None
    of = f"project {project}" if project is not None else "no project"
    return RuleViolation(
        rule=Rule.OPERATOR_SCOPE, field="plan_id",
        message=f"plan {plan_id} is of {of}; {principal.name} acts on "
        f"{_names(principal.projects) or 'no project'}")


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)
