"""The lineage rules at record time: child_plan_claim and downstream_in_family."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts.recording.facts import PlanClaim, StoredFacts
from contracts.recording.message import Candidate, content_hash, read_message
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule
from tests.factories import decision, encode, headers, root, subject

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def at(seconds: int) -> str:
    return (NOW + timedelta(seconds=seconds)).isoformat()


def candidate(d: dict[str, Any], seq: int = 1) -> Candidate:
    result = read_message(Inbound(subject(d), headers(d), encode(d), seq), NOW)
    assert isinstance(result, Candidate), result
    return result


def outcome(batch: list[dict[str, Any]], facts: StoredFacts | None = None
            ) -> dict[str, Rule | None]:
    """decision_id -> None if accepted, else the rule it broke."""
    plan = triage_batch([candidate(d, i) for i, d in enumerate(batch)],
                      facts or StoredFacts({}, {}, {}))
    out: dict[str, Rule | None] = {c.decision.decision_id: None for c in plan.accept}
    out.update({c.decision.decision_id: vs[0].rule for c, vs in plan.reject})
    return out


def parent_plan(created: int = 0) -> tuple[dict[str, Any], StoredFacts]:
    r = root(created_at=at(created))
    return r, StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {r["plan_id"]: r["decision_id"]})


def spawn(r: dict[str, Any], child: str, when: int, **kw: Any) -> dict[str, Any]:
    return decision(r["plan_id"], r["decision_id"], "subplan_spawn",
                    downstream_plan_ids=[child], created_at=at(when), **kw)


def test_a_plan_that_began_on_its_own_cannot_be_claimed() -> None:
    r, facts = parent_plan()
    other = new_id()
    claims = {other: PlanClaim(began_at=NOW + timedelta(seconds=5))}
    d = spawn(r, other, 10)
    facts = StoredFacts(facts.existing, facts.plan_of, facts.root_of_plan, claims=claims)
    assert outcome([d], facts) == {d["decision_id"]: Rule.CHILD_PLAN_CLAIM}


def test_a_child_root_created_after_its_spawner_is_fine_in_either_order() -> None:
    r, facts = parent_plan()
    child = new_id()
    d, child_root = spawn(r, child, 10), root(child, created_at=at(20))
    for batch in ([d, child_root], [child_root, d]):
        assert set(outcome(batch, facts).values()) == {None}


def test_an_older_root_and_its_claim_never_both_stand_whatever_the_order() -> None:
    r, facts = parent_plan()
    child = new_id()
    d, child_root = spawn(r, child, 10), root(child, created_at=at(5))
    claim_first = outcome([d, child_root], facts)
    root_first = outcome([child_root, d], facts)
    for result in (claim_first, root_first):
        assert sorted(map(str, result.values())) == ["None", Rule.CHILD_PLAN_CLAIM.value]
    # Stored first, the other is refused when it comes (plans collection as facts).
    stored_root = StoredFacts(facts.existing, facts.plan_of, facts.root_of_plan,
                              claims={child: PlanClaim(began_at=NOW + timedelta(seconds=5))})
    assert outcome([d], stored_root)[d["decision_id"]] is Rule.CHILD_PLAN_CLAIM
    stored_claim = StoredFacts({}, {}, {}, claims={child: PlanClaim(
        r["plan_id"], d["decision_id"], NOW + timedelta(seconds=10))})
    assert outcome([child_root], stored_claim)[child_root["decision_id"]] \
        is Rule.CHILD_PLAN_CLAIM


def test_a_plan_has_one_parent() -> None:
    r, facts = parent_plan()
    child = new_id()
    first, second = spawn(r, child, 10), spawn(r, child, 11)
    result = outcome([first, second], facts)
    assert result == {first["decision_id"]: None, second["decision_id"]: Rule.CHILD_PLAN_CLAIM}
    taken = StoredFacts(facts.existing, facts.plan_of, facts.root_of_plan,
                        claims={child: PlanClaim(new_id(), new_id(), NOW)})
    assert outcome([spawn(r, child, 10)], taken) != {}
    assert set(outcome([spawn(r, child, 10)], taken).values()) == {Rule.CHILD_PLAN_CLAIM}


def test_neither_itself_nor_an_ancestor() -> None:
    r, facts = parent_plan()
    grandparent = new_id()
    facts = StoredFacts(facts.existing, facts.plan_of, facts.root_of_plan,
                        plan_ancestors={r["plan_id"]: frozenset({grandparent})})
    for target in (r["plan_id"], grandparent):
        assert set(outcome([spawn(r, target, 10)], facts).values()) == {Rule.CHILD_PLAN_CLAIM}


def test_a_root_naming_its_parent_must_agree_with_the_claim() -> None:
    r, facts = parent_plan()
    child = new_id()
    agree = root(child, created_at=at(20), parent_plan_id=r["plan_id"])
    disagree = root(child, created_at=at(20), parent_plan_id=new_id())
    assert set(outcome([spawn(r, child, 10), agree], facts).values()) == {None}
    result = outcome([spawn(r, child, 10), disagree], facts)
    assert result[disagree["decision_id"]] is Rule.CHILD_PLAN_CLAIM
    result = outcome([disagree, spawn(r, child, 10)], facts)
    assert Rule.CHILD_PLAN_CLAIM in result.values()


def test_only_a_root_names_a_parent_plan() -> None:
    r, _ = parent_plan()
    bad = decision(r["plan_id"], r["decision_id"], parent_plan_id=new_id())
    result = read_message(Inbound(subject(bad), headers(bad), encode(bad), 1), NOW)
    assert not isinstance(result, Candidate)
    assert {v.rule for v in result.violations} == {Rule.CHILD_PLAN_CLAIM}


def test_dependents_stay_in_the_lineage() -> None:
    r, facts = parent_plan()
    stranger, child = new_id(), new_id()
    other = new_id()
    facts = StoredFacts(facts.existing, facts.plan_of, facts.root_of_plan,
                        claims={child: PlanClaim(r["plan_id"], new_id(), NOW)},
                        dependent_plan={stranger: new_id(), other: child})
    ok = decision(r["plan_id"], r["decision_id"], downstream_decision_ids=[new_id(), other])
    bad = decision(r["plan_id"], r["decision_id"], downstream_decision_ids=[stranger])
    parent = decision(r["plan_id"], r["decision_id"],
                      downstream_decision_ids=[r["decision_id"]])
    result = outcome([ok, bad, parent], facts)
    assert result == {ok["decision_id"]: None, bad["decision_id"]: Rule.DOWNSTREAM_IN_LINEAGE,
                      parent["decision_id"]: Rule.DOWNSTREAM_IN_LINEAGE}


def test_an_unset_parent_plan_id_leaves_content_hashes_as_they_were() -> None:
    c = candidate(root())
    assert "parent_plan_id" not in c.decision.model_dump_json(
        exclude={"created_at", "sequence_number", "parent_plan_id"})
    assert c.content_hash == content_hash(c.decision)
    named = candidate(root(c.decision.plan_id, parent_plan_id=new_id()))
    assert named.content_hash != content_hash(named.decision.model_copy(
        update={"parent_plan_id": None}))
