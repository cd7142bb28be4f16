"""The view of the tree the impact BFS needs: one decision's edges, one child plan's
recorded parent, and the order children are listed in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from contracts.decisions.artifacts import ArtifactRef
from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType


class NodeKind(StrEnum):
    DECISION = "decision"
    PLAN = "plan"


class Ref(NamedTuple):
    """A BFS node: a decision, or a child plan whose roots are still to be followed."""

    kind: NodeKind
    id: str


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What the BFS needs to know about one decision.

    `children` are the IDs of its current children in the order the store lists
    them (sequence_number ascending, then decision_id); that order becomes the BFS
    order, so every store (and the tests' in-memory graph) must use the same one.
    """

    decision_id: str
    decision_type: DecisionType
    children: tuple[str, ...] = ()
    dependents: tuple[str, ...] = ()
    child_plans: tuple[str, ...] = ()
    artifacts: tuple[ArtifactRef, ...] = ()
    parent_decision_id: str | None = None
    created_at: datetime | None = None
    superseded: bool = False
    plan_id: str | None = None
    sequence_number: int | None = None

    @classmethod
    def from_decision(cls, decision: Decision, children: Sequence[str] = ()) -> DecisionView:
        return cls(
            decision_id=decision.decision_id,
            decision_type=decision.decision_type,
            children=tuple(children),
            dependents=tuple(decision.downstream_decision_ids),
            child_plans=tuple(decision.downstream_plan_ids),
            artifacts=tuple(decision.artifacts_produced),
            parent_decision_id=decision.parent_decision_id,
            created_at=decision.created_at,
            superseded=decision.superseded_by is not None,
            plan_id=decision.plan_id,
            sequence_number=decision.sequence_number,
        )

    def edges(self) -> tuple[Ref, ...]:
        return (
            *(Ref(NodeKind.DECISION, c) for c in self.children),
            *(Ref(NodeKind.DECISION, d) for d in self.dependents),
            *(Ref(NodeKind.PLAN, p) for p in self.child_plans),
        )


@dataclass(frozen=True, slots=True)
class PlanLink:
    """What the walk needs to know about a plan named as a child plan: its recorded
    parent (plans collection; None for data recorded before claims were recorded) and
    when its first decision was created (None: no decision yet)."""

    parent_plan_id: str | None = None
    began_at: datetime | None = None


def child_order(decisions: Iterable[Decision]) -> list[str]:
    """IDs in the order children are listed: sequence_number, unnumbered last, then ID."""
    return [
        d.decision_id
        for d in sorted(
            decisions,
            key=lambda d: (d.sequence_number is None, d.sequence_number or 0, d.decision_id),
        )
    ]
