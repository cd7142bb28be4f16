"""Invariants without servers: the effective set over every scope combination, blocking
in the recorder's batch rules, reading violation reports, reconciliation's decisions."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.decisions.types import DecisionType
from contracts.invariants.blocking import ReconciliationBlocked, check_not_blocked
from contracts.invariants.model import SCOPE_RANK, Invariant, InvariantScope
from contracts.invariants.precedence import applies_to, effective_invariants
from contracts.invariants.reconciliation import enforced_decision_id, enforced_decisions, wire_body
from contracts.invariants.severity import Severity
from contracts.invariants.violations import BLOCKED_TYPES, InvariantViolation
from contracts.invariants.wire import read_violation
from contracts.recording.facts import StoredFacts
from contracts.recording.message import Candidate, read_message
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule
from contracts.shared.unreadable import Unreadable
from tests.factories import decision, root
from tests.unit.test_recording import NOW, candidate

pytestmark = pytest.mark.unit

S = InvariantScope
PLAN, PROJECT, TEMPLATE = new_id(), "myapp", "refactor"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def inv(name: str, scope: InvariantScope, target: str | None = None, *,
        minutes: int = 0) -> Invariant:
    if target is None and scope is not S.GLOBAL:
        target = {S.PLAN: PLAN, S.PROJECT: PROJECT, S.ACTION: TEMPLATE}[scope]
    return Invariant(name=name, description=f"{scope.value} says {name}", scope=scope,
                     scope_target=target, created_at=T0 + timedelta(minutes=minutes))


class TestEffectiveSet:
    # Every subset of the four scopes holding an invariant of one name, for a plan that
    # names both its project and its template, or only one, or neither.
    @pytest.mark.parametrize("present", [
        combo for n in range(1, 5) for combo in itertools.combinations(list(S), n)])
    @pytest.mark.parametrize(("project", "template"), [
        (PROJECT, TEMPLATE), (PROJECT, None), (None, TEMPLATE), (None, None)])
    def test_highest_applicable_scope_wins(self, present: tuple[InvariantScope, ...],
                                           project: str | None,
                                           template: str | None) -> None:
        candidates = [inv("x", scope) for scope in present]
        applicable = [s for s in present
                      if s is S.GLOBAL or s is S.PLAN
                      or (s is S.PROJECT and project) or (s is S.ACTION and template)]
        got = effective_invariants(PLAN, project, template, candidates)
        if not applicable:
            assert got == []
        else:
            winner = max(applicable, key=lambda s: SCOPE_RANK[s])
            assert [i.scope for i in got] == [winner]

    def test_precedence_order_is_plan_action_project_global(self) -> None:
        assert sorted(S, key=lambda s: SCOPE_RANK[s]) == [S.GLOBAL, S.PROJECT, S.ACTION,
                                                          S.PLAN]

    def test_other_targets_never_apply(self) -> None:
        others = [inv("x", S.PLAN, new_id()), inv("x", S.PROJECT, "other"),
                  inv("x", S.ACTION, "other")]
        assert effective_invariants(PLAN, PROJECT, TEMPLATE, others) == []

    def test_different_names_all_apply_sorted_by_name(self) -> None:
        got = effective_invariants(PLAN, PROJECT, TEMPLATE, [
            inv("d", S.PLAN), inv("c", S.ACTION), inv("b", S.PROJECT), inv("a", S.GLOBAL)])
        assert [(i.name, i.scope) for i in got] == [
            ("a", S.GLOBAL), ("b", S.PROJECT), ("c", S.ACTION), ("d", S.PLAN)]

    def test_without_a_plan_only_project_template_and_global_apply(self) -> None:
        got = effective_invariants(None, PROJECT, None, [
            inv("x", S.GLOBAL), inv("x", S.PROJECT), inv("y", S.PLAN), inv("z", S.ACTION)])
        assert [(i.name, i.scope) for i in got] == [("x", S.PROJECT)]

    def test_plan_target_matches_in_any_case(self) -> None:
        own = inv("x", S.PLAN, PLAN.lower())
        assert own.scope_target == PLAN
        assert applies_to(own, PLAN.lower(), None, None)


names = st.sampled_from(["a", "b", "c"])
scopes = st.sampled_from(list(S))
matching = st.booleans()


@st.composite
def invariant_sets(draw: st.DrawFn) -> list[Invariant]:
    out: list[Invariant] = []
    for n in range(draw(st.integers(0, 12))):
        scope = draw(scopes)
        target = None if scope is S.GLOBAL or draw(matching) else (
            new_id() if scope is S.PLAN else "elsewhere")
        out.append(inv(draw(names), scope, target, minutes=draw(st.integers(0, 3)) + n))
    return out


class TestEffectiveSetProperties:
    @given(invariant_sets(), st.booleans(), st.booleans(), st.randoms())
    def test_one_per_applicable_name_from_its_highest_scope_in_any_order(
            self, invs: list[Invariant], has_project: bool, has_template: bool,
            rnd: Any) -> None:
        project = PROJECT if has_project else None
        template = TEMPLATE if has_template else None
        got = effective_invariants(PLAN, project, template, invs)
        applicable = [i for i in invs if applies_to(i, PLAN, project, template)]
        assert [i.name for i in got] == sorted({i.name for i in applicable})
        for chosen in got:
            rivals = [i for i in applicable if i.name == chosen.name]
            assert SCOPE_RANK[chosen.scope] == max(SCOPE_RANK[i.scope] for i in rivals)
        shuffled = list(invs)
        rnd.shuffle(shuffled)
        assert effective_invariants(PLAN, project, template, shuffled) == got

    @given(invariant_sets(), st.booleans(), st.booleans())
    def test_an_explicit_plan_invariant_always_wins_its_name(
            self, invs: list[Invariant], has_project: bool, has_template: bool) -> None:
        own = inv("a", S.PLAN, minutes=99)
        got = effective_invariants(PLAN, PROJECT if has_project else None,
                                   TEMPLATE if has_template else None, [*invs, own])
        assert next(i for i in got if i.name == "a").scope is S.PLAN

    @given(invariant_sets())
    def test_action_invariants_are_promoted_only_when_the_template_is_used(
            self, invs: list[Invariant]) -> None:
        with_template = {i.id for i in effective_invariants(PLAN, PROJECT, TEMPLATE, invs)}
        without = {i.id for i in effective_invariants(PLAN, PROJECT, None, invs)}
        assert not any(i.scope is S.ACTION for i in invs if i.id in without)
        promoted = [i for i in invs if i.id in with_template and i.scope is S.ACTION]
        for p in promoted:  # it beat everything of its name but an explicit PLAN one
            assert not any(i.name == p.name and i.scope is S.PLAN
                           and applies_to(i, PLAN, PROJECT, TEMPLATE) for i in invs)


class TestInvariantModel:
    @pytest.mark.parametrize(("scope", "target"), [
        (S.GLOBAL, "x"), (S.PROJECT, None), (S.ACTION, " "), (S.PLAN, "not-a-ulid")])
    def test_target_must_fit_scope(self, scope: InvariantScope, target: str | None) -> None:
        with pytest.raises(ValidationError):
            Invariant(name="x", description="d", scope=scope, scope_target=target)

    @pytest.mark.parametrize("name", ["", "two words", "x" * 101])
    def test_name_is_a_short_token(self, name: str) -> None:
        with pytest.raises(ValidationError):
            Invariant(name=name, description="d", scope=S.GLOBAL)


class TestBlocking:
    def test_blocked_types_are_the_execute_phase(self) -> None:
        assert {t.value for t in BLOCKED_TYPES} == {
            "implementation_choice", "resource_selection", "tool_invocation",
            "error_recovery", "validation_response"}

    @pytest.mark.parametrize("kind", list(DecisionType))
    def test_only_execute_types_of_blocked_plans_raise(self, kind: DecisionType) -> None:
        plan = new_id()
        check_not_blocked(plan, kind, {})
        check_not_blocked(plan, kind, {new_id(): ("V",)})
        if kind in BLOCKED_TYPES:
            with pytest.raises(ReconciliationBlocked, match="agents invariant resolve V1"):
                check_not_blocked(plan, kind, {plan: ("V1", "V2")})
        else:
            check_not_blocked(plan, kind, {plan: ("V1",)})

    @pytest.mark.parametrize(("severity", "resolved", "blocks"), [
        (Severity.ERROR, False, True), (Severity.ERROR, True, False),
        (Severity.WARNING, False, False), (Severity.INFO, False, False)])
    def test_only_unresolved_errors_block(self, severity: Severity, resolved: bool,
                                          blocks: bool) -> None:
        v = InvariantViolation(invariant_id=new_id(), plan_id=new_id(), severity=severity,
                               details="d", resolved_at=NOW if resolved else None)
        assert v.blocks is blocks

    def test_batch_rejects_execute_decisions_of_a_blocked_plan_only(self) -> None:
        r, free = root(), root()
        plan, other = r["plan_id"], free["plan_id"]
        execute = decision(plan, r["decision_id"], "tool_invocation")
        child = decision(plan, execute["decision_id"], "strategy_choice")
        strategize = decision(plan, r["decision_id"], "strategy_choice")
        intervention = decision(plan, r["decision_id"], "user_intervention")
        elsewhere = decision(other, free["decision_id"], "tool_invocation")
        facts = StoredFacts({}, {r["decision_id"]: plan, free["decision_id"]: other}, {},
                            blocked_plans={plan: ("01JD7Y0A1B2C3D4E5F6G7H8J9K",)})
        batch = [candidate(d, i) for i, d in
                 enumerate([child, execute, strategize, intervention, elsewhere])]
        out = triage_batch(batch, facts)
        rejected = {c.decision.decision_id: [v.rule for v in vs] for c, vs in out.reject}
        assert rejected == {execute["decision_id"]: [Rule.RECONCILIATION_BLOCKED],
                            child["decision_id"]: [Rule.PARENT_EXISTS]}
        assert {c.decision.decision_id for c in out.accept} == {
            strategize["decision_id"], intervention["decision_id"], elsewhere["decision_id"]}


def wire(body: dict[str, Any] | bytes, subject: str | None = None,
         msg_id: str | None = None) -> InvariantViolation | Unreadable:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    plan = body["plan_id"] if isinstance(body, dict) else new_id()
    vid = body.get("violation_id") if isinstance(body, dict) else None
    return read_violation(subject or f"invariants.violations.{plan}",
                          {"Nats-Msg-Id": msg_id or str(vid)}, data, NOW)


def a_report(**fields: Any) -> dict[str, Any]:
    return {"violation_id": new_id(), "invariant_id": new_id(), "plan_id": new_id(),
            "severity": "error", "details": "dropped a table", **fields}


def rules(result: InvariantViolation | Unreadable) -> set[Rule]:
    assert isinstance(result, Unreadable), result
    return {v.rule for v in result.violations}


class TestReadViolation:
    def test_valid_report_gets_receive_time(self) -> None:
        got = wire(a_report())
        assert isinstance(got, InvariantViolation)
        assert got.reported_at == NOW and got.decision_id is None

    @pytest.mark.parametrize(("body", "rule"), [
        (b"\xff", Rule.NOT_UTF8), (b"{nope", Rule.NOT_JSON), (b"[]", Rule.SCHEMA)])
    def test_unreadable_bodies(self, body: bytes, rule: Rule) -> None:
        assert rules(wire(body)) == {rule}

    def test_missing_violation_id_bad_severity_and_resolution_fields(self) -> None:
        body = a_report(severity="fatal", resolved_by="me")
        del body["violation_id"]
        assert rules(wire(body, msg_id="x")) == {Rule.SCHEMA, Rule.RESOLVED_BY_OPERATOR}

    def test_subject_and_msg_id_must_agree(self) -> None:
        body = a_report()
        got = wire(body, subject=f"invariants.violations.{new_id()}", msg_id=new_id())
        assert rules(got) == {Rule.SUBJECT_MATCHES_PLAN, Rule.MSG_ID_MATCHES_VIOLATION}
        assert isinstance(got, Unreadable) and got.plan_id == body["plan_id"]


class TestReconciliationDecisions:
    def test_ids_are_deterministic_unique_and_sort_with_the_root(self) -> None:
        r = new_id()
        a, b = new_id(), new_id()
        assert enforced_decision_id(r, a) == enforced_decision_id(r.lower(), a)
        assert enforced_decision_id(r, a) != enforced_decision_id(r, b)
        assert enforced_decision_id(r, a)[:10] == r[:10]

    def test_recorder_accepts_them_and_a_second_build_is_a_duplicate(self) -> None:
        r = candidate(root(project=PROJECT)).decision
        invs = [inv("a", S.GLOBAL), inv("b", S.PROJECT)]
        first, again = enforced_decisions(r, invs), enforced_decisions(r, invs)
        assert [wire_body(d) for d in first] == [wire_body(d) for d in again]
        read = [read_message(Inbound(f"decisions.recorded.{d.plan_id}",
                                     {"Nats-Msg-Id": d.decision_id}, wire_body(d), n), NOW)
                for n, d in enumerate(first)]
        assert all(isinstance(c, Candidate) for c in read)
        assert all(json.loads(wire_body(d)).get("created_at") is None for d in first)
