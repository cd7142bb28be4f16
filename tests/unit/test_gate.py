"""The recorder's gate, pure: which decisions it refuses, holds or records with a
violation, per severity and consequence; the phase rule inside one batch and for
pending approvals; what the judge's rulings make of a held decision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.decisions.model import Decision
from contracts.invariants.activation import PlanScope
from contracts.invariants.evaluation import Budget, Verdict
from contracts.invariants.gate import Gate, GateInputs
from contracts.invariants.holds import HoldStatus
from contracts.invariants.judge import Ruling, read_answer, settle
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.outcomes import enforced_outcome, found
from contracts.invariants.rules import RuleSet
from contracts.invariants.severity import Consequence, Severity
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule
from tests.factories import decision, root

pytestmark = pytest.mark.unit

PLAN = new_id()
ROOT = Decision.model_validate(root(PLAN))


def inv(check: str | None, severity: Severity = Severity.ERROR,
        consequence: Consequence | None = None, **fields: Any) -> Invariant:
    return Invariant(name=fields.pop("name", f"i{new_id()[-6:]}"), description="d",
                     scope=fields.pop("scope", InvariantScope.GLOBAL), check=check,
                     severity=severity, consequence=consequence, **fields)


def d(decision_type: str = "tool_invocation", parent: str = ROOT.decision_id,
      **fields: Any) -> Decision:
    return Decision.model_validate(decision(PLAN, parent, decision_type, **fields))


def gate(*invariants: Invariant, judge: bool = False, budget: float = 5.0,
         **inputs: Any) -> Gate:
    rules = RuleSet.of(1, invariants, judge=judge)
    return Gate(GateInputs(rules, {PLAN: PlanScope()}, **inputs), Budget(budget))


def test_kept_passes_broken_refuses_and_the_batch_blocks_execute_after_it() -> None:
    g = gate(inv('tool.name != "rm"'))
    assert g.admit(ROOT) is None
    assert g.admit(d(tool={"name": "ls", "arguments": {}})) is None
    refused = g.admit(d(tool={"name": "rm", "arguments": {}}))
    assert refused is not None and refused.rule is Rule.INVARIANT_VIOLATED
    [o] = g.outcomes
    assert o.consequence is Consequence.REFUSE
    blocked = g.admit(d(tool={"name": "ls", "arguments": {}}))
    assert blocked is not None and blocked.rule is Rule.RECONCILIATION_BLOCKED
    assert g.admit(d("strategy_choice")) is None  # Strategize goes on


@pytest.mark.parametrize(("severity", "consequence", "refused", "held"), [
    (Severity.ERROR, None, True, False),
    (Severity.ERROR, Consequence.HOLD, False, True),
    (Severity.WARNING, None, False, False),
    (Severity.INFO, None, False, False),
])
def test_each_severity_and_consequence(severity: Severity, consequence: Consequence | None,
                                       refused: bool, held: bool) -> None:
    g = gate(inv("false", severity, consequence))
    answer = g.admit(d())
    assert (answer is not None) is refused
    assert bool(g.holds) is held
    [o] = g.outcomes
    assert o.invariant.severity is severity
    if held:
        assert g.holds[0].status is HoldStatus.AWAITING_APPROVAL


def test_unevaluated_is_broken_for_an_error_and_recorded_for_a_warning() -> None:
    error = gate(inv("tool.arguments.cmd == 'x'"))
    answer = error.admit(d())
    assert answer is not None and answer.rule is Rule.INVARIANT_UNEVALUATED
    warning = gate(inv("tool.arguments.cmd == 'x'", Severity.WARNING))
    assert warning.admit(d()) is None
    assert warning.outcomes[0].evaluation.verdict is Verdict.UNEVALUATED


def test_a_spent_budget_fails_closed() -> None:
    g = gate(inv("true"), budget=0.0)
    answer = g.admit(d())
    assert answer is not None and "budget" in answer.message


def test_roots_and_enforced_decisions_are_never_evaluated() -> None:
    g = gate(inv("false"))
    assert g.admit(ROOT) is None
    assert g.admit(d("invariant_enforced")) is None
    assert g.outcomes == []


def test_path_is_the_types_from_the_root() -> None:
    g = gate(inv('!("error_recovery" in path) || decision_type != "tool_invocation"',
                 Severity.WARNING), chains={ROOT.decision_id: ("prompt_definition",)})
    recovery, under, beside = d("error_recovery"), None, d()
    assert g.admit(recovery) is None
    under = d(parent=recovery.decision_id)
    assert g.admit(under) is None and g.admit(beside) is None
    assert [o.decision.decision_id for o in g.outcomes] == [under.decision_id]
    assert g.chains[under.decision_id] == ("prompt_definition", "error_recovery",
                                           "tool_invocation")
    unknown = gate(inv('size(path) > 0'))
    assert unknown.admit(d()) is not None  # the parent's path is not known: fail closed


def test_pending_approvals_block_the_execute_phase() -> None:
    g = gate(approvals={PLAN: (new_id(),)})
    answer = g.admit(d())
    assert answer is not None and "awaiting approval" in answer.message
    assert g.admit(d("strategy_choice")) is None


def test_word_only_invariants_hold_for_the_judge_only_with_one() -> None:
    assert gate(inv(None)).holds == [] and gate(inv(None)).admit(d()) is None
    g = gate(inv(None), judge=True)
    assert g.admit(d()) is None
    [h] = g.holds
    assert h.status is HoldStatus.AWAITING_JUDGE and len(h.judge_invariant_ids) == 1


def test_the_plans_precedence_decides_which_check_applies() -> None:
    overriding = inv("true", name="tools", scope=InvariantScope.PLAN, scope_target=PLAN)
    g = gate(inv("false", name="tools"), overriding)
    assert g.admit(d()) is None


def test_records_derive_their_ids_and_place_a_refusal_under_the_parent() -> None:
    g = gate(inv("false"))
    bad = d()
    g.admit(bad)
    [o] = g.outcomes
    enforced = enforced_outcome(o)
    assert enforced.parent_decision_id == ROOT.decision_id
    assert enforced_outcome(o).decision_id == enforced.decision_id
    f = found(o, bad.created_at, True)
    assert f.violation.decision_id == bad.decision_id
    assert [m.subject.split(".")[0] for m in f.messages] == ["invariants", "decisions"]


def chat(content: object) -> bytes:
    return json.dumps({"choices": [{"message": {"content": json.dumps(content)}}]}).encode()


@pytest.mark.parametrize(("body", "verdict"), [
    (chat({"verdict": "kept", "reason": "ok"}), Verdict.KEPT),
    (chat({"verdict": "broken", "reason": "no"}), Verdict.BROKEN),
    (chat({"verdict": "maybe", "reason": "?"}), Verdict.UNEVALUATED),
    (chat({"verdict": "kept", "extra": 1}), Verdict.UNEVALUATED),
    (chat(["kept"]), Verdict.UNEVALUATED),
    (b'{"choices": []}', Verdict.UNEVALUATED),
    (b"[[[[[[", Verdict.UNEVALUATED),
])
def test_the_judges_answer_is_the_object_asked_for_or_a_failure(body: bytes,
                                                                verdict: Verdict) -> None:
    assert read_answer(body).verdict is verdict


def test_what_the_judge_makes_of_a_held_decision() -> None:
    held = d()
    error, hold = inv(None), inv(None, consequence=Consequence.HOLD)
    warning = inv(None, Severity.WARNING)
    broken, failed = Ruling(Verdict.BROKEN, "no"), Ruling(Verdict.UNEVALUATED, "timeout")
    kept = Ruling(Verdict.KEPT, "ok")
    assert settle(held, [(error, kept), (warning, broken)])[0] is HoldStatus.RELEASED
    assert settle(held, [(error, broken)])[0] is HoldStatus.REFUSED
    assert settle(held, [(hold, broken)])[0] is HoldStatus.AWAITING_APPROVAL
    # A failure never releases an error invariant's decision, and never refuses it either.
    status, reasons, _ = settle(held, [(error, failed), (warning, failed)])
    assert status is HoldStatus.AWAITING_APPROVAL
    assert {r.consequence for r in reasons} == {Consequence.HOLD, Consequence.RECORD}
