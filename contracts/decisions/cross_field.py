"""The rules that relate fields of one decision (a root has no parent, a correction
names its target, ...): `Decision` checks them after its fields, and reports every one
it breaks at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_core import InitErrorDetails, PydanticCustomError

from contracts.decisions.types import DecisionType
from contracts.shared.rules import Rule

if TYPE_CHECKING:
    from contracts.decisions.model import Decision


def cross_field_violations(d: Decision) -> list[InitErrorDetails]:
    """The specified rules that relate fields of one decision (ADR 0001); all are reported
    at once."""
    broken = [*_parent_rules(d), *_correction_rules(d), *_parent_plan_rules(d)]
    if d.parent_decision_id is not None and d.parent_decision_id == d.decision_id:
        broken.append(_broken(Rule.PARENT_EXISTS, "parent_decision_id",
                              "a decision cannot be its own parent"))
    return broken


def _parent_rules(d: Decision) -> list[InitErrorDetails]:
    """The root alone has no parent."""
    broken: list[InitErrorDetails] = []
    if d.decision_type is DecisionType.PROMPT_DEFINITION and d.parent_decision_id is not None:
        broken.append(_broken(Rule.ROOT_HAS_NO_PARENT, "parent_decision_id",
                              "a prompt_definition decision must have parent_decision_id = None"))
    if d.decision_type is not DecisionType.PROMPT_DEFINITION and d.parent_decision_id is None:
        broken.append(_broken(Rule.ONLY_ROOT_LACKS_PARENT, "parent_decision_id",
                              f"a {d.decision_type.value} decision needs a parent_decision_id; "
                              "only the prompt_definition root has none"))
    return broken


def _correction_rules(d: Decision) -> list[InitErrorDetails]:
    """The correction flag and its target come together."""
    broken: list[InitErrorDetails] = []
    if d.is_correction and d.corrects_decision_id is None:
        broken.append(_broken(Rule.CORRECTION_NEEDS_TARGET, "corrects_decision_id",
                              "is_correction is True, so corrects_decision_id must be set"))
    if d.corrects_decision_id is not None and not d.is_correction:
        broken.append(_broken(Rule.TARGET_NEEDS_CORRECTION_FLAG, "is_correction",
                              "corrects_decision_id is set, so is_correction must be True"))
    return broken


def _parent_plan_rules(d: Decision) -> list[InitErrorDetails]:
    """Only a root names its parent plan, and that is another plan."""
    broken: list[InitErrorDetails] = []
    if d.parent_plan_id is not None and not d.is_root:
        broken.append(_broken(Rule.CHILD_PLAN_CLAIM, "parent_plan_id",
                              "only the root prompt_definition names its parent plan"))
    if d.parent_plan_id is not None and d.parent_plan_id == d.plan_id:
        broken.append(_broken(Rule.CHILD_PLAN_CLAIM, "parent_plan_id",
                              "a plan cannot be its own parent"))
    return broken


def _broken(rule: Rule, field: str, message: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(rule.value, f"rule {rule.value}: {message}", {"field": field}),
        loc=(field,),
        input=None,
    )
