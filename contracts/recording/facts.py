"""What the store knows that a batch's tree rules need, read once per batch.

The store answers `facts_for` with a `StoredFacts`; `triage_batch` decides the batch
from it and from the batch itself, without further I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from contracts.shared.rules import EchoText
from contracts.trust.ownership import Ownership


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store holds for a decision_id the batch names."""

    content_hash: str
    recorded_from: int  # stream sequence of the message that wrote it


class Resume(BaseModel):
    """Where an agent whose decision a correction made stale goes on: the correction that
    removed its parent (or its plan) and the decision that replaced what was removed."""

    model_config = ConfigDict(frozen=True)

    correction_id: EchoText | None = Field(
        default=None, description="The correction that superseded the parent or rolled the "
        "plan back; None if the store no longer names it.")
    replacement_decision_id: EchoText | None = Field(
        default=None, description="The decision that replaced the removed subtree: record "
        "new children under it.")
    plan_id: EchoText | None = Field(
        default=None, description="The plan of the replacement decision (for a rolled-back "
        "child plan, its parent plan).")

    def where(self) -> str:
        """The sentence's tail naming both, for the violation message."""
        by = f" by correction {self.correction_id}" if self.correction_id else ""
        plan = f" (plan {self.plan_id})" if self.plan_id else ""
        then = (f"; resume under decision {self.replacement_decision_id}{plan}"
                if self.replacement_decision_id else "")
        return f"{by}{then}"


@dataclass(frozen=True, slots=True)
class PlanClaim:
    """What the plans collection says of a plan a batch claims or records into."""

    parent_plan_id: str | None = None
    spawned_from_decision_id: str | None = None
    spawned_at: datetime | None = None          # created_at of the claiming decision
    named_parent_plan_id: str | None = None     # what its root says (Decision.parent_plan_id)
    began_at: datetime | None = None            # created_at of its root, once recorded
    # Who may sign its root: the owner and delegates of the plan that claimed it (None:
    # not claimed, or claimed from a plan without a verified owner).
    claim_owners: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class StoredFacts:
    """What the store knows that the tree rules need, fetched once per batch."""

    existing: Mapping[str, Stored]       # for the decision_ids in the batch
    plan_of: Mapping[str, str]           # decision_id -> plan_id, for stored parents
    root_of_plan: Mapping[str, str]      # plan_id -> root decision_id, for the batch's roots' plans
    # plan_id -> its unresolved blocking violations, for blocked plans in the batch
    blocked_plans: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # plan_id -> its ancestor plans, parent first, for plans in the batch with a parent:
    # a parent's blocking violation blocks its child plans too
    blocking_ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # stored parent decision_id -> where to resume, for parents a revert superseded
    superseded: Mapping[str, Resume] = field(default_factory=dict)
    # plan_id -> where to resume, for plans of the batch a revert rolled back
    rolled_back: Mapping[str, Resume] = field(default_factory=dict)
    # plan_id -> its correction epoch when these facts were read (absent: 0). The
    # recorder's transaction compares it with the counter document it writes, so a revert
    # that committed after the facts were read sends the batch to be triaged again.
    epochs: Mapping[str, int] = field(default_factory=dict)
    # plan_id -> its claim record, for the batch's plans and the plans it claims
    claims: Mapping[str, PlanClaim] = field(default_factory=dict)
    # plan_id -> its ancestor plans by recorded parents, for the batch's claiming plans
    plan_ancestors: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # decision_id -> plan_id, for stored decisions the batch names as dependents
    dependent_plan: Mapping[str, str] = field(default_factory=dict)
    # plan_id -> its owner and delegates, for the batch's plans, the plans it claims and
    # the parent plans its roots name (absent: no verified owner)
    ownership: Mapping[str, Ownership] = field(default_factory=dict)
    # decision_id -> created_at, for the stored parents of the batch's decisions
    created_at: Mapping[str, datetime] = field(default_factory=dict)
