"""Which invariants bind a plan, and which one of a name is in force: PLAN over ACTION
(promoted) over PROJECT over GLOBAL, the nearer plan's over an ancestor's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from contracts.invariants.model import SCOPE_RANK, Invariant, InvariantScope


def applies_to(inv: Invariant, plan_id: str | None, project: str | None,
               action_template: str | None, ancestors: Sequence[str] = ()) -> bool:
    """Whether `inv` binds a plan with this ID, project, action template and ancestors
    (parent first): a PLAN invariant of an ancestor binds the plans it spawned."""
    if inv.scope is InvariantScope.GLOBAL:
        return True
    if inv.scope is InvariantScope.PLAN:
        return inv.scope_target in _lineage(plan_id, ancestors)
    target = project if inv.scope is InvariantScope.PROJECT else action_template
    return target is not None and inv.scope_target == target


def _lineage(plan_id: str | None, ancestors: Sequence[str]) -> list[str]:
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
    lineage = _lineage(plan_id, ancestors)
    distance = {p: i for i, p in reversed(list(enumerate(lineage)))}
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
