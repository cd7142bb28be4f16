"""The impact walk never leaves the target's plan lineage (the plan and its child plans)."""

from __future__ import annotations

import pytest

from contracts.impact.summary import summarize
from tests.impact_graph import ImpactGraph, compute_impact, walk_graph
from tests.unit.test_impact import PLAN, PLAN2, PLAN3, dec, ids, uid

pytestmark = pytest.mark.unit


def walked(target: int, *decisions, parents=None):  # type: ignore[no-untyped-def]
    graph = ImpactGraph.from_decisions(decisions, parents)
    result = compute_impact(uid(target), graph)
    assert summarize(walk_graph(uid(target), graph)) == result
    return result


def test_a_decision_naming_an_unrelated_plan_and_its_decisions_does_not_reach_them() -> None:
    # PLAN2 began (at=0) before the attacker D2 (at=50) named it and its decision D11.
    other = (dec(10, plan=PLAN2, at=0), dec(11, 10, plan=PLAN2, at=1))
    mine = (dec(0, at=40), dec(1, 0, at=45), dec(2, 1, deps=[11], plans=[PLAN2], at=50))
    result = walked(1, *mine, *other)
    assert result.affected_decision_ids == ids(1, 2)
    assert result.affected_child_plan_ids == []


def test_a_recorded_parent_decides_over_the_timing() -> None:
    tree = (dec(0), dec(1, 0, plans=[PLAN2]), dec(10, plan=PLAN2, at=-5))
    assert walked(1, *tree, parents={PLAN2: PLAN}).affected_child_plan_ids == [PLAN2]
    assert walked(1, *tree, parents={PLAN2: PLAN3}).affected_child_plan_ids == []


def test_a_child_plan_is_entered_when_any_affected_claimant_may() -> None:
    # D2 (in PLAN) names PLAN3, whose recorded parent is PLAN2: only D11 may take it.
    tree = (dec(0), dec(1, 0, plans=[PLAN2]), dec(2, 1, plans=[PLAN3]),
            dec(10, plan=PLAN2), dec(11, 10, plan=PLAN2, plans=[PLAN3]),
            dec(20, plan=PLAN3))
    result = walked(1, *tree, parents={PLAN2: PLAN, PLAN3: PLAN2})
    assert result.affected_child_plan_ids == [PLAN2, PLAN3]
    assert uid(20) in result.affected_decision_ids


def test_the_targets_ancestors_are_never_affected_even_when_named() -> None:
    tree = (dec(0), dec(1, 0), dec(2, 1), dec(3, 2, deps=[0, 1, 2]), dec(4, 1, deps=[3]))
    assert walked(2, *tree).affected_decision_ids == ids(2, 3)


def test_a_plan_named_by_its_own_child_is_not_walked_back_into() -> None:
    tree = (dec(0), dec(1, 0, plans=[PLAN2]), dec(10, plan=PLAN2, plans=[PLAN]))
    result = walked(1, *tree, parents={PLAN2: PLAN})
    assert result.affected_decision_ids == ids(1, 10)
    assert result.affected_child_plan_ids == [PLAN2]


def test_legacy_child_plan_that_began_after_its_spawner_is_still_followed() -> None:
    tree = (dec(0, at=0), dec(1, 0, plans=[PLAN2], at=10), dec(10, plan=PLAN2, at=20))
    assert walked(1, *tree).affected_child_plan_ids == [PLAN2]
