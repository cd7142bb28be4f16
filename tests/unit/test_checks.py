"""Checks (CEL expressions on invariants): what is refused when an invariant is added,
the bounds, and each evaluation outcome, without a server."""

from __future__ import annotations

import contextlib

import cel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.decisions.model import Decision
from contracts.invariants.activation import MAX_LIST_ENTRIES, InputTooLarge, PlanScope, activation
from contracts.invariants.checks import (
    CHECK_VARIABLES,
    InvalidCheck,
    compile_check,
    comprehension_count,
)
from contracts.invariants.evaluation import Budget, Verdict, evaluate
from contracts.invariants.model import MAX_CHECK_CHARS
from contracts.shared.ids import new_id
from tests.factories import decision

pytestmark = pytest.mark.unit


def tool_decision(**fields: object) -> Decision:
    return Decision.model_validate(decision(new_id(), new_id(), "tool_invocation", **fields))


@pytest.mark.parametrize(("source", "fragment"), [
    ("", "empty"),
    ("1 +", "not a CEL expression"),
    ("decison_type == 'x'", "Undefined variable or function: 'decison_type'"),
    ("frobnicate(chosen_option)", "unknown function 'frobnicate'"),
    ("size(artifacts)", "true or false"),
    ("artifacts.exists(a, paths.all(b, a == b))", "at most 1"),
    ("x" * (MAX_CHECK_CHARS + 1), f"at most {MAX_CHECK_CHARS} characters"),
])
def test_refused_when_added(source: str, fragment: str) -> None:
    with pytest.raises(InvalidCheck, match=None) as err:
        compile_check(source)
    assert fragment in str(err.value)


def test_accepted_checks_know_the_variables_they_read() -> None:
    c = compile_check('decision_type == "tool_invocation" && '
                      'paths.exists(p, p.startsWith("deploy/prod/"))')
    assert c.variables == {"decision_type", "paths"}
    assert compile_check('chosen_option.contains("map exists all filter")').variables == \
        {"chosen_option"}


def test_comprehensions_are_counted_never_fewer_than_there_are() -> None:
    assert comprehension_count('a.exists(x, x == "all")') == 1
    # A raw or triple-quoted literal: every word counts (the count errs upwards only).
    assert comprehension_count("""a.exists(x, x == r'\\') && b.all(y, y)""") == 2
    assert comprehension_count("""'''exists''' == chosen_option""") == 1


TOKENS = [*"()[]{}.,!&|=<>+-*/%?:'\"\\ 0123456789abcdexyz_", "exists", "all", "map", "tool",
          "size", "in ", "paths", "decision_type", "'''", "r'"]


@given(st.lists(st.sampled_from(TOKENS), max_size=300))
def test_any_text_is_compiled_or_refused_never_more(tokens: list[str]) -> None:
    with contextlib.suppress(InvalidCheck):
        compile_check("".join(tokens))


def test_each_variable_is_built_from_the_decision() -> None:
    d = tool_decision(tool={"name": "shell", "arguments": {"cmd": "ls"}}, confidence_score=None,
                      artifacts_produced=[{"artifact_path": "a/b", "artifact_type": "file"}])
    values = activation(d, CHECK_VARIABLES, ("prompt_definition",), PlanScope("p", "t"))
    assert values["tool"] == {"name": "shell", "arguments": {"cmd": "ls"}}
    assert values["paths"] == ["a/b", "src/app.py"]
    assert (values["confidence"], values["path"], values["project"]) == \
        (None, ["prompt_definition"], "p")
    no_tool = activation(tool_decision(), ["tool"], (), PlanScope())
    assert no_tool["tool"] == {"name": "", "arguments": {}}


def test_a_list_over_the_bound_is_not_cut_but_refused() -> None:
    many = [{"artifact_path": f"f{i}", "artifact_type": "file"}
            for i in range(MAX_LIST_ENTRIES + 1)]
    with pytest.raises(InputTooLarge):
        activation(tool_decision(artifacts_produced=many), ["artifacts"], (), PlanScope())
    activation(tool_decision(artifacts_produced=many), ["question"], (), PlanScope())


@pytest.mark.parametrize(("source", "verdict"), [
    ('tool.name == "shell"', Verdict.KEPT),
    ('tool.name == "http"', Verdict.BROKEN),
    ('tool.arguments.url.startsWith("https")', Verdict.UNEVALUATED),  # no such key
    ("confidence < 0.5", Verdict.UNEVALUATED),  # null has no <
    ('chosen_option.matches("(")', Verdict.UNEVALUATED),  # a bad regular expression
])
def test_each_outcome_of_an_evaluation(source: str, verdict: Verdict) -> None:
    d = tool_decision(tool={"name": "shell", "arguments": {"cmd": "ls"}}, confidence_score=None)
    c = compile_check(source)
    ev = evaluate(c, cel.Context(activation(d, c.variables, (), PlanScope())))
    assert ev.verdict is verdict
    assert (ev.detail == "") is (verdict is Verdict.KEPT)


def test_a_spent_budget_evaluates_nothing_more() -> None:
    c = compile_check("true")
    budget = Budget(0.0)
    ev = budget.run(c, cel.Context({}))
    assert ev.verdict is Verdict.UNEVALUATED and "budget" in ev.detail
    assert budget.evaluations == 0
