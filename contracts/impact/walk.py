"""Impact analysis: which decisions, files and child plans a correction would touch.

The analysis is a BFS from the target over the *current* tree (decisions not yet
superseded), following three kinds of edge, in this order for each decision:
its children by parent link, its declared dependents (`downstream_decision_ids`),
and the child plans it spawned (`downstream_plan_ids`), whose root decisions are
then followed in turn, so child plans are reached transitively. Every node is
visited once, so a cycle among declared dependents cannot loop. The last two edges
never leave the target's plan lineage (`Lineage`), whatever was recorded.

The store never hands over a whole plan: `ImpactWalk.expand` lets it fetch
one BFS level per round trip (the views of the frontier's decisions and the roots
of the frontier's plans), so the cost follows the affected subtree, not the plan.
Nor does it read past the limit: the children of a decision the walk always follows
(`always_followed`) are all affected, so once more of them than the walk's `room` are
new (`fresh`), the walk is over its limit (`over_limit`) before the rest of the level
is read.
The tests hold a second BFS over a whole in-memory graph (tests/impact_graph.py:
`compute_impact`, one queue, no levels), property-tested to agree with this one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from contracts.impact.lineage import Lineage
from contracts.impact.views import DecisionView, NodeKind, PlanLink, Ref


class ImpactWalk:
    """The BFS between two round trips: call `expand` with the frontier's views until `done`.

    The one mutable object in the domain, on purpose: copying the visited set each
    round would make a 10,000-deep chain quadratic. It still does no I/O, and the
    result depends only on what it was fed.
    """

    def __init__(self, target_decision_id: str, limit: int | None = None) -> None:
        self.target_decision_id = target_decision_id
        self.limit = limit
        """Stop once more than this many decisions are affected (None: walk it all)."""
        self.exceeded = False
        first = Ref(NodeKind.DECISION, target_decision_id)
        self._frontier: tuple[Ref, ...] = (first,)
        self._seen: set[Ref] = {first}
        self._affected: list[DecisionView] = []
        self._affected_ids: set[str] = set()
        self._plans: list[str] = []
        self._lineage = Lineage(target_decision_id)
        self.rounds = 0

    @property
    def done(self) -> bool:
        return not self._frontier

    @property
    def frontier(self) -> tuple[Ref, ...]:
        return self._frontier

    @property
    def decision_ids_wanted(self) -> tuple[str, ...]:
        """Decisions whose views the next `expand` needs (a missing one counts as gone)."""
        return tuple(r.id for r in self._frontier if r.kind is NodeKind.DECISION)

    @property
    def plan_ids_wanted(self) -> tuple[str, ...]:
        """Plans whose current root decisions the next `expand` needs."""
        return tuple(r.id for r in self._frontier if r.kind is NodeKind.PLAN)

    @property
    def affected(self) -> tuple[DecisionView, ...]:
        return tuple(self._affected)

    @property
    def room(self) -> int | None:
        """How many more decisions may be affected before the walk is over its limit
        (None: no limit)."""
        return None if self.limit is None else self.limit - len(self._affected)

    def always_followed(self, decision_id: str) -> bool:
        """The walk visits this frontier decision whenever it is current: the target, a
        child of an affected decision or a root of a plan entered (only a declared
        dependent may be refused). Its current children are then all affected."""
        return decision_id == self.target_decision_id or decision_id in self._lineage.children

    def fresh(self, decision_id: str) -> bool:
        """Not reached yet: as a child it would be a new affected decision."""
        return Ref(NodeKind.DECISION, decision_id) not in self._seen

    def is_affected(self, decision_id: str) -> bool:
        return decision_id in self._affected_ids

    def over_limit(self) -> None:
        """The store found more new decisions to affect than `room` (children of
        decisions the walk always follows): stop, as `expand` does at the limit."""
        self.exceeded = True
        self._frontier = ()
        self.rounds += 1

    @property
    def child_plan_ids(self) -> tuple[str, ...]:
        return tuple(self._plans)

    def expand(
        self,
        decisions: Mapping[str, DecisionView],
        plan_roots: Mapping[str, Sequence[str]],
        plan_links: Mapping[str, PlanLink] | None = None,
    ) -> tuple[Ref, ...]:
        """Visit one BFS level in order; return the next frontier.

        `decisions` holds the views of `decision_ids_wanted` that exist (extra entries
        are ignored); `plan_roots` the current roots of `plan_ids_wanted`, `plan_links`
        their recorded parents and first decisions (missing: none recorded).
        """
        nxt: list[Ref] = []
        links = plan_links or {}
        for ref in self._frontier:
            if ref.kind is NodeKind.PLAN:
                edges = self._enter_plan(ref, plan_roots, links)
            else:
                edges = self._visit(ref, decisions)
            if self.exceeded:
                # Too big to correct: stop here rather than read the rest of a
                # 100,000-decision subtree only to refuse it.
                self._frontier = ()
                self.rounds += 1
                return self._frontier
            for edge in edges:
                if edge not in self._seen:
                    self._seen.add(edge)
                    nxt.append(edge)
        self._frontier = tuple(nxt)
        self.rounds += 1
        return self._frontier

    def _enter_plan(self, ref: Ref, plan_roots: Mapping[str, Sequence[str]],
                    links: Mapping[str, PlanLink]) -> Iterable[Ref]:
        """The roots of a child plan, if the walk may enter it; none otherwise."""
        if not self._lineage.plan_ok(ref.id, links.get(ref.id)):
            self._seen.discard(ref)  # another claimant may still take it
            return ()
        self._plans.append(ref.id)
        roots = plan_roots.get(ref.id, ())
        self._lineage.entered(roots)
        return [Ref(NodeKind.DECISION, r) for r in roots]

    def _visit(self, ref: Ref, decisions: Mapping[str, DecisionView]) -> Iterable[Ref]:
        """Count a decision as affected and return its edges, if it is reached this way;
        sets `exceeded` once more than `limit` decisions are affected."""
        view = decisions.get(ref.id)
        if view is None or not _follow(view, ref, self.target_decision_id):
            return ()
        if not self._lineage.dependent_ok(view):
            # Not this way; it may still be reached as a child of the subtree.
            self._seen.discard(ref)
            return ()
        self._lineage.visited(view)
        self._affected.append(view)
        self._affected_ids.add(view.decision_id)
        if self.limit is not None and len(self._affected) > self.limit:
            self.exceeded = True
            return ()
        self._lineage.note_edges(view)
        return view.edges()


def _follow(view: DecisionView, ref: Ref, target: str) -> bool:
    # The target is analysed even when superseded, so a dry run can still report on
    # it (with a warning); anything else must be in the current tree.
    return not view.superseded or ref.id == target
