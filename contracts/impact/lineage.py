"""Which edges the impact walk may follow out of a decision: it never leaves the
target's plan and that plan's child plans (its lineage), whatever was recorded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from contracts.impact.views import DecisionView, PlanLink


class Lineage:
    """The walk never leaves the target's plan and its child plans, transitively.

    A named child plan is followed only if its recorded parent is the naming decision's
    plan; for a plan recorded before parents were (no recorded parent), only if it is
    neither the target's plan nor the naming decision's, and did not begin before the
    naming decision (a plan that began on its own was not spawned by it). A declared
    dependent is followed only inside the naming decision's own plan (a child plan's
    decisions are reached through the plan itself), and in the target's plan only if it
    was recorded after the target: every ancestor of the target was recorded before it
    (sequence numbers follow the tree), and so was nothing that depends on it."""

    def __init__(self, target_decision_id: str) -> None:
        self.target_decision_id = target_decision_id
        self.target_plan: str | None = None
        self.target_sequence: int | None = None
        self.claimants: dict[str, list[DecisionView]] = defaultdict(list)
        """Child plan -> every affected decision that named it."""
        self.namers: dict[str, list[DecisionView]] = defaultdict(list)
        """Dependent decision -> every affected decision that declared it."""
        self.children: set[str] = set()
        """Children of affected decisions, and roots of plans entered: always followed."""

    def visited(self, view: DecisionView) -> None:
        if view.decision_id == self.target_decision_id:
            self.target_plan = view.plan_id
            self.target_sequence = view.sequence_number

    def note_edges(self, view: DecisionView) -> None:
        """Every edge of an affected decision counts, seen or not: a node refused by one
        namer is followed if any affected namer allows it, whatever the BFS order."""
        self.children.update(view.children)
        for d in view.dependents:
            self.namers[d].append(view)
        for p in view.child_plans:
            self.claimants[p].append(view)

    def entered(self, roots: Iterable[str]) -> None:
        self.children.update(roots)

    def plan_ok(self, plan_id: str, link: PlanLink | None) -> bool:
        return any(_claims(by, plan_id, link or PlanLink(), self.target_plan)
                   for by in self.claimants.get(plan_id, ()))

    def dependent_ok(self, view: DecisionView) -> bool:
        if view.decision_id in self.children or view.decision_id == self.target_decision_id:
            return True
        return any(view.plan_id == by.plan_id for by in self.namers.get(view.decision_id, ())) \
            and (view.plan_id != self.target_plan or view.sequence_number is None
                 or self.target_sequence is None or view.sequence_number > self.target_sequence)


def _claims(by: DecisionView, plan_id: str, link: PlanLink, target_plan: str | None) -> bool:
    """May `by` take the walk into `plan_id`? See Lineage."""
    if plan_id in (target_plan, by.plan_id):
        return False
    if link.parent_plan_id is not None:
        return link.parent_plan_id == by.plan_id
    return link.began_at is None or by.created_at is None or link.began_at >= by.created_at
