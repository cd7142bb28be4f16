"""Who may apply a template to a plan: an operator within the plan's project, the plan's
owner or a delegate (anyone, on a plan without a verified owner); anyone else is
refused with the ownership rules' own rule, and a second template whoever asks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts.decisions.plans import PlanRecord
from contracts.invariants.plan_use import PlanUseRequest
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.shared.rules import Rule
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Principal, PrincipalKey
from contracts.trust.signing import Signature
from contracts.trust.verification import Verified
from services.plan_templates import _refusal

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def who(name: str, role: Role, projects: tuple[str, ...] = ()) -> Verified:
    key = public_of_seed(new_user_seed())
    principal = Principal(name=name, role=role, keys=(PrincipalKey(public=key),),
                          projects=projects)
    # Who signed is what the rules read; the signature itself is not looked at here.
    return Verified(principal, Signature(key=key, principal=name, sig="-", salt="-",
                                         signed_at=NOW, fields={}))


PLAN = PlanRecord(plan_id=new_id(), project="myapp", root_decision_id=new_id(),
                  owner="alice", delegates=["bob"])
ASK = PlanUseRequest(plan_id=PLAN.plan_id, action_template="db-migration")


@pytest.mark.parametrize(("identity", "rule"), [
    (None, Rule.PLAN_OWNER),
    (who("alice", Role.AGENT), None),
    (who("bob", Role.AGENT), None),
    (who("ops", Role.OPERATOR, ("myapp",)), None),
    (who("root", Role.OPERATOR, ("*",)), None),
    (who("mallory", Role.AGENT), Rule.PLAN_OWNER),
    (who("elsewhere", Role.OPERATOR, ("other",)), Rule.OPERATOR_SCOPE),
])
def test_who_may_apply_a_template(identity: Verified | None, rule: Rule | None) -> None:
    refused = _refusal(ASK, PLAN, identity)
    assert (refused.rule if refused else None) is rule


def test_a_plan_takes_one_template_and_must_have_started() -> None:
    other = PlanUseRequest(plan_id=PLAN.plan_id, action_template="other")
    using = PLAN.model_copy(update={"action_template": "db-migration"})
    refused = _refusal(other, using, who("alice", Role.AGENT))
    assert refused is not None and refused.rule is Rule.TEMPLATE_CONFLICT
    assert _refusal(ASK, using, who("alice", Role.AGENT)) is None
    unowned = PLAN.model_copy(update={"owner": None, "delegates": []})
    assert _refusal(ASK, unowned, None) is None
    unstarted = PLAN.model_copy(update={"root_decision_id": None})
    refused = _refusal(ASK, unstarted, None)
    assert refused is not None and refused.rule is Rule.PLAN_STARTED
    refused = _refusal(ASK, None, None)
    assert refused is not None and refused.rule is Rule.PLAN_STARTED
