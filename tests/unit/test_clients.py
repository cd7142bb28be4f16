"""The client libraries' pure helpers: context hashes, building and chaining decisions,
and refusing locally what the recorder would refuse, under the same rule names."""

from __future__ import annotations

import hashlib

import pytest

from clients._publish import RetryPolicy
from clients.building import (
    InvalidDecision,
    build_child,
    build_root,
    context_hash,
    snapshot,
    wire_message,
)
from contracts.decisions.context import ContextSnapshot, ResourceRef
from contracts.decisions.types import DecisionType
from contracts.shared.ids import is_ulid, new_id
from contracts.shared.rules import Rule

pytestmark = pytest.mark.unit


def test_context_hash_is_sha256_of_the_serialised_context() -> None:
    expected = "sha256:" + hashlib.sha256(b"window").hexdigest()
    assert context_hash("window") == expected == context_hash(b"window")


def test_snapshot_keeps_the_ref_and_admits_an_unstored_context() -> None:
    stored = snapshot("w", "s3://ctx/1.json", resources=["repo:api", ResourceRef(
        resource_id="repo:db", path="schema.sql")], actor_state_ref="thread-1:cp-2")
    assert stored.hot_context_ref == "s3://ctx/1.json"
    assert [r.resource_id for r in stored.relevant_resources] == ["repo:api", "repo:db"]
    assert stored.actor_state_ref == "thread-1:cp-2"
    assert snapshot("w").hot_context_ref == f"unstored:{context_hash('w')}"


def test_root_starts_a_new_plan_and_children_chain_to_their_parent() -> None:
    root = build_root("Add rate limiting", context="w", project="api",
                      action_template="feature")
    assert root.decision_type is DecisionType.PROMPT_DEFINITION
    assert root.parent_decision_id is None and is_ulid(root.plan_id)
    assert root.chosen_option == "Add rate limiting" and root.project == "api"
    assert build_root("x", context="w").plan_id != root.plan_id
    child = build_child(root, DecisionType.STRATEGY_CHOICE, question="Where?",
                        chosen_option="Redis", context="w", alternatives=["memory"],
                        confidence=0.7, artifacts=["src/limits.py"])
    grandchild = build_child(child, "tool_invocation", question="Run?", chosen_option="pytest",
                             context=ContextSnapshot(hot_context_hash=context_hash("w"),
                                                     hot_context_ref="ref"))
    assert (child.plan_id, child.parent_decision_id) == (root.plan_id, root.decision_id)
    assert (grandchild.plan_id, grandchild.parent_decision_id) == (root.plan_id,
                                                                   child.decision_id)
    assert child.artifacts_produced[0].artifact_type == "file"
    assert len({root.decision_id, child.decision_id, grandchild.decision_id}) == 3


def test_a_root_may_name_its_plan_for_a_subplan() -> None:
    plan_id = new_id()
    assert build_root("child work", context="w", plan_id=plan_id).plan_id == plan_id


def test_invalid_content_is_refused_with_every_named_rule_before_publishing() -> None:
    root = build_root("x", context="w")
    with pytest.raises(InvalidDecision) as caught:
        build_child(root, "strategy_choice", question=" ", chosen_option="o",
                    context="w", confidence=1.5)
    assert {v.rule for v in caught.value.violations} == {Rule.NON_EMPTY,
                                                         Rule.CONFIDENCE_RANGE}
    # A snapshot built without validation slips past the model; the wire check catches it.
    sneaky = build_child(root, "strategy_choice", question="q", chosen_option="o",
                         context=ContextSnapshot.model_construct(hot_context_hash="MD5:XYZ",
                                                                 hot_context_ref="r"))
    with pytest.raises(InvalidDecision) as bad_hash:
        wire_message(sneaky)
    assert {v.rule for v in bad_hash.value.violations} == {Rule.HASH_FORMAT}


def test_fields_owned_by_the_recorder_or_corrections_are_refused_on_the_wire() -> None:
    root = build_root("x", context="w")
    numbered = root.model_copy(update={"sequence_number": 3})
    with pytest.raises(InvalidDecision) as caught:
        wire_message(numbered)
    assert [v.rule for v in caught.value.violations] == [Rule.SEQUENCE_ASSIGNED_BY_RECORDER]


def test_wire_message_is_the_recorders_subject_body_and_msg_id() -> None:
    root = build_root("x", context="w")
    subject, body, msg_id = wire_message(root)
    assert subject == f"decisions.recorded.{root.plan_id}"
    assert msg_id == root.decision_id and root.decision_id.encode() in body


def test_retry_delays_double_up_to_the_cap() -> None:
    assert RetryPolicy(attempts=6, first_delay=0.2, max_delay=1.0).delays() == [
        0.2, 0.4, 0.8, 1.0, 1.0]
