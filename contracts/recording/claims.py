"""The child-plan claim rules: which plans a decision may claim as its children, and
which decisions it may name as its dependents.

Claims of child plans and declared dependents stay within a plan and its children (its
lineage). Only what is provably wrong now is refused (a dependent not recorded yet is
allowed); the impact walk keeps to the lineage whatever was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from contracts.decisions.model import Decision
from contracts.recording.facts import PlanClaim
from contracts.shared.rules import Rule, RuleViolation


@dataclass
class ClaimRules:
    """The claim records as the batch is decided: the stored ones plus what the batch
    accepted, and the stored facts the rules read besides."""

    claims: dict[str, PlanClaim] = field(default_factory=dict)
    """plan_id -> its claim record, for the batch's plans and the plans it claims."""
    ancestors: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """plan_id -> its ancestor plans by recorded parents, for the batch's claiming plans."""
    dependent_plan: Mapping[str, str] = field(default_factory=dict)
    """decision_id -> plan_id, for stored decisions the batch names as dependents."""

    def broken(self, d: Decision, plan_of: Mapping[str, str]) -> RuleViolation | None:
        """The first claim rule `d` breaks, or None. `plan_of` maps the decisions known so
        far (stored and accepted in the batch) to their plans."""
        if d.is_root:
            broken = self._root_claim(d)
            if broken is not None:
                return broken
        for p in d.downstream_plan_ids:
            broken = self._claim(d, p)
            if broken is not None:
                return broken
        for x in d.downstream_decision_ids:
            broken = self._dependent(d, x, plan_of)
            if broken is not None:
                return broken
        return None

    def note(self, d: Decision, claim_owners: tuple[str, ...] | None = None) -> None:
        """What an accepted decision claims counts for the rest of the batch;
        `claim_owners`: who may sign the roots of the plans it claims (its plan's owner
        and delegates; None when its plan has no verified owner)."""
        if d.is_root:
            old = self.claims.get(d.plan_id, PlanClaim())
            self.claims[d.plan_id] = PlanClaim(
                old.parent_plan_id, old.spawned_from_decision_id, old.spawned_at,
                d.parent_plan_id or old.named_parent_plan_id, d.created_at,
                old.claim_owners)
        for p in d.downstream_plan_ids:
            old = self.claims.get(p, PlanClaim())
            self.claims[p] = PlanClaim(d.plan_id, d.decision_id, d.created_at,
                                       old.named_parent_plan_id, old.began_at, claim_owners)

    def _root_claim(self, d: Decision) -> RuleViolation | None:
        link = self.claims.get(d.plan_id, PlanClaim())
        if d.parent_plan_id is not None and link.parent_plan_id not in (None, d.parent_plan_id):
            return _claim_violation("parent_plan_id", f"plan {d.plan_id} was spawned from plan "
                                    f"{link.parent_plan_id}, not {d.parent_plan_id}")
        if link.spawned_at is not None and d.created_at < link.spawned_at:
            return _claim_violation(
                "created_at", f"plan {d.plan_id} was spawned by decision "
                f"{link.spawned_from_decision_id} at {link.spawned_at.isoformat()}; its root "
                "cannot have been created before that")
        return None

    def _claim(self, d: Decision, p: str) -> RuleViolation | None:
        if p == d.plan_id:
            return _claim_violation("downstream_plan_ids", f"plan {p} cannot spawn itself")
        if p in self.ancestors.get(d.plan_id, frozenset()):
            return _claim_violation("downstream_plan_ids",
                                    f"plan {p} is an ancestor of plan {d.plan_id}")
        return claim_refused(d, p, self.claims.get(p, PlanClaim()))

    def _dependent(self, d: Decision, x: str, plan_of: Mapping[str, str]
                   ) -> RuleViolation | None:
        if x in (d.decision_id, d.parent_decision_id):
            return RuleViolation(
                rule=Rule.DOWNSTREAM_IN_LINEAGE, field="downstream_decision_ids",
                message=f"{x} is this decision or its parent, not a dependent")
        plan_id = plan_of.get(x) or self.dependent_plan.get(x)
        if plan_id is None or plan_id == d.plan_id:
            return None
        child = self.claims.get(plan_id, PlanClaim()).parent_plan_id == d.plan_id
        if child or plan_id in d.downstream_plan_ids:
            return None
        return RuleViolation(
            rule=Rule.DOWNSTREAM_IN_LINEAGE, field="downstream_decision_ids",
            message=f"decision {x} belongs to plan {plan_id}, which is neither plan "
            f"{d.plan_id} nor one of its child plans")


def claim_refused(d: Decision, p: str, link: PlanClaim) -> RuleViolation | None:
    """What `link`, plan `p`'s claim record, says against `d` claiming `p`: another
    parent (or another claim of this one), a root naming another parent, or a root that
    began before `d`. Asked at triage and again in the recorder's transaction."""
    if link.parent_plan_id is not None and (
            link.parent_plan_id != d.plan_id
            or link.spawned_from_decision_id not in (None, d.decision_id)):
        return _claim_violation(
            "downstream_plan_ids", f"plan {p} was already spawned by decision "
            f"{link.spawned_from_decision_id} of plan {link.parent_plan_id}")
    if link.named_parent_plan_id not in (None, d.plan_id):
        return _claim_violation("downstream_plan_ids", f"the root of plan {p} names plan "
                                f"{link.named_parent_plan_id} as its parent")
    if link.began_at is not None and link.began_at < d.created_at:
        return _claim_violation(
            "downstream_plan_ids", f"plan {p} began on its own at "
            f"{link.began_at.isoformat()}, before this decision")
    return None


def _claim_violation(field_name: str, message: str) -> RuleViolation:
    return RuleViolation(rule=Rule.CHILD_PLAN_CLAIM, field=field_name, message=message)
