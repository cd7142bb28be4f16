"""Invariants over a plan lineage, without servers: a plan's ancestry from parent links,
PLAN invariants of ancestors (the nearer plan wins), blocking by an ancestor's
violation in the recorder's batch rules, and the persisted event of a stored decision."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.decisions.model import Decision
from contracts.decisions.plans import MAX_PLAN_DEPTH, ancestry
from contracts.decisions.types import DecisionType
from contracts.invariants.blocking import ReconciliationBlocked, check_not_blocked
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.precedence import effective_invariants
from contracts.invariants.violations import BLOCKED_TYPES
from contracts.recording.events import persisted_body
from contracts.recording.facts import StoredFacts
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule
from tests.factories import decision, root
from tests.unit.test_recording import candidate

pytestmark = pytest.mark.unit

S = InvariantScope
T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHILD, PARENT, GRANDPARENT, STRANGER = (new_id() for _ in range(4))
CHAIN = (PARENT, GRANDPARENT)


def inv(name: str, scope: InvariantScope, target: str | None = None, *,
        minutes: int = 0) -> Invariant:
    return Invariant(name=name, description=f"{scope.value} {target} says {name}",
                     scope=scope, scope_target=target,
                     created_at=T0 + timedelta(minutes=minutes))


class TestAncestry:
    def test_parent_first_and_stops_at_the_top(self) -> None:
        links = {CHILD: PARENT, PARENT: GRANDPARENT, GRANDPARENT: None}
        assert ancestry(CHILD, links) == (PARENT, GRANDPARENT)
        assert ancestry(GRANDPARENT, links) == ()
        assert ancestry(STRANGER, links) == ()

    def test_a_cycle_in_stored_data_is_cut(self) -> None:
        assert ancestry(CHILD, {CHILD: PARENT, PARENT: CHILD}) == (PARENT,)
        assert ancestry(CHILD, {CHILD: CHILD}) == ()

    def test_a_long_chain_is_cut_at_max_depth(self) -> None:
        plans = [new_id() for _ in range(MAX_PLAN_DEPTH + 10)]
        links = dict(itertools.pairwise(plans))
        assert len(ancestry(plans[0], links)) == MAX_PLAN_DEPTH


# Every subset of: the plan's own PLAN invariant, its parent's, its grandparent's, an
# ACTION, a PROJECT and a GLOBAL one, all of one name; listed strongest first.
SOURCES: dict[str, tuple[InvariantScope, str | None]] = {
    "own": (S.PLAN, CHILD), "parent": (S.PLAN, PARENT), "grandparent": (S.PLAN, GRANDPARENT),
    "action": (S.ACTION, "tpl"), "project": (S.PROJECT, "app"), "global": (S.GLOBAL, None)}
ORDER = list(SOURCES)


class TestPrecedenceOverTheLineage:
    @pytest.mark.parametrize("present", [
        combo for n in range(1, 7) for combo in itertools.combinations(ORDER, n)])
    def test_nearest_plan_then_scope_wins(self, present: tuple[str, ...]) -> None:
        invs = {k: inv("tests", *SOURCES[k]) for k in present}
        [got] = effective_invariants(CHILD, "app", "tpl", invs.values(), CHAIN)
        assert got == invs[min(present, key=ORDER.index)]

    def test_a_stranger_plans_invariant_never_applies(self) -> None:
        assert effective_invariants(CHILD, None, None, [inv("x", S.PLAN, STRANGER)],
                                    CHAIN) == []

    def test_without_ancestors_a_parents_invariant_does_not_apply(self) -> None:
        assert effective_invariants(CHILD, None, None, [inv("x", S.PLAN, PARENT)]) == []

    @given(st.permutations(range(4)))
    def test_order_independent(self, order: list[int]) -> None:
        invs = [inv("tests", S.PLAN, GRANDPARENT), inv("tests", S.PLAN, PARENT, minutes=5),
                inv("tests", S.GLOBAL), inv("other", S.PLAN, GRANDPARENT)]
        got = effective_invariants(CHILD, None, None, [invs[i] for i in order], CHAIN)
        assert got == [invs[3], invs[1]]


class TestBlockingOverTheLineage:
    @pytest.mark.parametrize("kind", list(DecisionType))
    @pytest.mark.parametrize("blocked", [CHILD, PARENT, GRANDPARENT, STRANGER, None],
                             ids=["child", "parent", "grandparent", "stranger", "none"])
    def test_own_or_ancestor_violation_blocks_execute(self, kind: DecisionType,
                                                      blocked: str | None) -> None:
        blocking = {blocked: ("V1",)} if blocked else {}
        if kind in BLOCKED_TYPES and blocked in (CHILD, *CHAIN):
            with pytest.raises(ReconciliationBlocked) as err:
                check_not_blocked(CHILD, kind, blocking, CHAIN)
            assert err.value.blocked_by == blocked
            assert ("ancestor plan" in str(err.value)) == (blocked != CHILD)
        else:
            check_not_blocked(CHILD, kind, blocking, CHAIN)

    def test_own_violations_are_named_before_the_parents(self) -> None:
        with pytest.raises(ReconciliationBlocked) as err:
            check_not_blocked(CHILD, DecisionType.TOOL_INVOCATION,
                              {PARENT: ("P1",), CHILD: ("C1",)}, CHAIN)
        assert err.value.violation_ids == ("C1",) and err.value.blocked_by == CHILD

    def test_batch_rejects_the_child_of_a_blocked_parent(self) -> None:
        r = root(CHILD)
        execute = decision(CHILD, r["decision_id"], "implementation_choice")
        strategize = decision(CHILD, r["decision_id"], "strategy_choice")
        other = root()
        other_execute = decision(other["plan_id"], other["decision_id"], "tool_invocation")
        facts = StoredFacts({}, {r["decision_id"]: CHILD, other["decision_id"]:
                                 other["plan_id"]}, {CHILD: r["decision_id"]},
                            blocked_plans={GRANDPARENT: ("V9",)},
                            blocking_ancestors={CHILD: CHAIN})
        plan = triage_batch([candidate(execute, 1), candidate(strategize, 2),
                           candidate(other_execute, 3)], facts)
        assert {c.decision.decision_id for c in plan.accept} == {
            strategize["decision_id"], other_execute["decision_id"]}
        [(c, [why])] = plan.reject
        assert c.decision.decision_id == execute["decision_id"]
        assert why.rule is Rule.RECONCILIATION_BLOCKED and GRANDPARENT in why.message


def test_persisted_body_is_the_recorders_event() -> None:
    d = Decision.model_validate({**root(), "created_at": T0, "sequence_number": 0})
    assert json.loads(persisted_body(d)) == {
        "decision_id": d.decision_id, "plan_id": d.plan_id, "sequence_number": 0,
        "decision_type": "prompt_definition", "parent_decision_id": None}
    with pytest.raises(ValueError, match="no sequence_number"):
        persisted_body(d.model_copy(update={"sequence_number": None}))
