"""The recorder's rules on who may record what into which plan, and when.

Applied by the batch's triage to every decision whose tree rules hold, against the
stored facts (each plan's owner and delegates, the claims, the parents' creation times)
and what the batch accepted before it (contracts.trust.ownership says whose a plan is):

- a decision's created_at is not before its parent's (`created_before_parent`);
- a decision goes into a plan only from its owner or a delegate (`plan_owner`);
- a root is signed by the owner or a delegate of the plan that claimed it, and of the
  parent plan it names (`plan_owner`);
- a plan claims as its child (downstream_plan_ids) only a plan its owner or a delegate
  started (`plan_owner`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from contracts.decisions.model import Decision
from contracts.recording.facts import PlanClaim
from contracts.recording.message import Candidate
from contracts.shared.rules import Rule, RuleViolation
from contracts.trust.ownership import Ownership, child_refused, not_owner, who
from contracts.trust.policy import Identity, principal_name


@dataclass
class OwnershipRules:
    ownership: dict[str, Ownership] = field(default_factory=dict)
    """plan_id -> its owner and delegates: stored, and the roots the batch accepted."""
    created: dict[str, datetime] = field(default_factory=dict)
    """decision_id -> created_at: the stored parents, and what the batch accepted."""

    def of(self, plan_id: str) -> Ownership:
        return self.ownership.get(plan_id, Ownership())

    def broken(self, c: Candidate, claims: Mapping[str, PlanClaim]) -> RuleViolation | None:
        """The first rule `c` breaks, or None; `claims` as the batch stands."""
        d = c.decision
        parent_at = self.created.get(d.parent_decision_id or "")
        if c.created_at_sent and parent_at is not None and d.created_at < parent_at:
            return RuleViolation(
                rule=Rule.CREATED_BEFORE_PARENT, field="created_at",
                message=f"created_at {d.created_at.isoformat()} is before its parent "
                f"{d.parent_decision_id}'s ({parent_at.isoformat()})")
        if d.is_root:
            return self._root(d, c.identity, claims)
        return not_owner(d.plan_id, self.of(d.plan_id), c.identity,
                         "record decisions into") or self._children(d, self.of(d.plan_id),
                                                                    claims)

    def note(self, c: Candidate) -> tuple[str, ...] | None:
        """Count an accepted decision; returns who may sign the roots of the plans it
        claims (None: its plan has no verified owner)."""
        d = c.decision
        self.created[d.decision_id] = d.created_at
        if d.is_root:
            self.ownership[d.plan_id] = _owning(d, c.identity)
        own = self.of(d.plan_id)
        return own.principals if own.owner is not None else None

    def _root(self, d: Decision, identity: Identity,
              claims: Mapping[str, PlanClaim]) -> RuleViolation | None:
        name = principal_name(identity)
        link = claims.get(d.plan_id, PlanClaim())
        if link.claim_owners is not None and name not in link.claim_owners:
            return RuleViolation(
                rule=Rule.PLAN_OWNER, field="plan_id",
                message=f"plan {d.plan_id} was claimed as a child of plan "
                f"{link.parent_plan_id}; its root is signed by {', '.join(link.claim_owners)}, "
                f"not {who(identity)}")
        if d.parent_plan_id is not None:
            refused = child_refused(d.parent_plan_id, self.of(d.parent_plan_id), d.plan_id,
                                    name, "parent_plan_id")
            if refused is not None:
                return refused
        return self._children(d, _owning(d, identity), claims)

    def _children(self, d: Decision, own: Ownership,
                  claims: Mapping[str, PlanClaim]) -> RuleViolation | None:
        for p in d.downstream_plan_ids:
            if claims.get(p, PlanClaim()).began_at is None:
                continue  # not started yet: its root will be held to this claim
            refused = child_refused(d.plan_id, own, p, self.of(p).owner, "downstream_plan_ids")
            if refused is not None:
                return refused
        return None


def _owning(root: Decision, identity: Identity) -> Ownership:
    """Whose a plan is once `root` is recorded: its verified signer and delegates."""
    name = principal_name(identity)
    return Ownership(name, tuple(root.delegates)) if name is not None else Ownership()
