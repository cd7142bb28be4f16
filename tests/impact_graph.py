"""A whole decision graph in memory and the specified queue-based BFS over it: test code.

`compute_impact` is written independently of `contracts.impact.walk.ImpactWalk.expand` (one
queue, no levels), so the property tests comparing the two check the level-by-level
walk the stores run rather than the walk against itself. It uses the walk's private
helpers (`Lineage`, `_follow`, `_impact`) on purpose: the rules of the lineage and the
summary must be the same; only the traversal is independent.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from contracts.decisions.model import Decision
from contracts.decisions.types import DecisionType
from contracts.impact.lineage import Lineage
from contracts.impact.summary import CorrectionImpact, _impact
from contracts.impact.views import DecisionView, NodeKind, PlanLink, Ref, child_order
from contracts.impact.walk import ImpactWalk, _follow

__all__ = ["ImpactGraph", "compute_impact", "walk_graph"]


@dataclass(frozen=True)
class ImpactGraph:
    """A whole graph in memory: for tests and for plans small enough to load."""

    decisions: Mapping[str, DecisionView]
    plan_roots: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    plan_links: Mapping[str, PlanLink] = field(default_factory=dict)

    @classmethod
    def from_decisions(cls, decisions: Iterable[Decision],
                       plan_parents: Mapping[str, str] | None = None) -> ImpactGraph:
        """`plan_parents`: the recorded parent of each child plan (plans collection)."""
        all_ = list(decisions)
        began: dict[str, datetime] = {}
        for d in all_:
            if d.parent_decision_id is None and d.created_at is not None:
                began[d.plan_id] = min(began.get(d.plan_id, d.created_at), d.created_at)
        parents = plan_parents or {}
        current = [d for d in all_ if d.superseded_by is None]
        by_parent: dict[str | None, list[Decision]] = defaultdict(list)
        roots: dict[str, list[Decision]] = defaultdict(list)
        for d in current:
            by_parent[d.parent_decision_id].append(d)
            if d.parent_decision_id is None:
                roots[d.plan_id].append(d)
        return cls(
            decisions={
                d.decision_id: DecisionView.from_decision(
                    d, child_order(by_parent.get(d.decision_id, []))
                )
                for d in all_
            },
            plan_roots={p: tuple(child_order(rs)) for p, rs in roots.items()},
            plan_links={p: PlanLink(parents.get(p), began.get(p))
                        for p in {*began, *parents}},
        )


def walk_graph(target_decision_id: str, graph: ImpactGraph) -> ImpactWalk:
    """Run the level-by-level BFS against an in-memory graph, as the store does against Mongo."""
    walk = ImpactWalk(target_decision_id)
    while not walk.done:
        found = ((i, graph.decisions.get(i)) for i in walk.decision_ids_wanted)
        walk.expand(
            {i: v for i, v in found if v is not None},
            {p: graph.plan_roots.get(p, ()) for p in walk.plan_ids_wanted},
            {p: link for p in walk.plan_ids_wanted if (link := graph.plan_links.get(p))},
        )
    return walk


def compute_impact(
    target_decision_id: str,
    graph: ImpactGraph,
    durations: Mapping[DecisionType, float] | None = None,
) -> CorrectionImpact:
    """The specified queue-based BFS over a whole in-memory graph.

    Written independently of `expand` (one queue, no levels) so that the property
    test comparing the two checks the level-by-level version rather than itself.
    """
    start = Ref(NodeKind.DECISION, target_decision_id)
    queue: deque[Ref] = deque([start])
    seen = {start}
    affected: list[DecisionView] = []
    plans: list[str] = []
    lineage = Lineage(target_decision_id)
    while queue:
        ref = queue.popleft()
        if ref.kind is NodeKind.PLAN:
            if not lineage.plan_ok(ref.id, graph.plan_links.get(ref.id)):
                seen.discard(ref)
                continue
            plans.append(ref.id)
            lineage.entered(graph.plan_roots.get(ref.id, ()))
            nexts: Iterable[Ref] = (
                Ref(NodeKind.DECISION, r) for r in graph.plan_roots.get(ref.id, ()))
        else:
            view = graph.decisions.get(ref.id)
            if view is None or not _follow(view, ref, target_decision_id):
                continue
            if not lineage.dependent_ok(view):
                seen.discard(ref)
                continue
            lineage.visited(view)
            affected.append(view)
            nexts = view.edges()
            lineage.note_edges(view)
        for n in nexts:
            if n not in seen:
                seen.add(n)
                queue.append(n)
    return _impact(target_decision_id, affected, plans, durations)
