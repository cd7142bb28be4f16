"""The recording path's pure rules: one message at a time, then a batch against the store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.recording.facts import Stored, StoredFacts
from contracts.recording.message import Candidate, Invalid, content_hash, read_message
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule
from tests.factories import decision, encode, headers, plan_tree, root, subject

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def inbound(d: dict[str, Any], seq: int = 1, **kw: Any) -> Inbound:
    return Inbound(subject=kw.pop("subject", subject(d)), headers=kw.pop("headers", headers(d)),
                   data=kw.pop("data", encode(d)), stream_sequence=seq, **kw)


def rules_of(result: Candidate | Invalid) -> set[Rule]:
    assert isinstance(result, Invalid), result
    return {v.rule for v in result.violations}


def candidate(d: dict[str, Any], seq: int = 1) -> Candidate:
    result = read_message(inbound(d, seq), NOW)
    assert isinstance(result, Candidate), result
    return result


NO_FACTS = StoredFacts({}, {}, {})


class TestReadMessage:
    def test_valid_message_gets_receive_time_when_created_at_absent(self) -> None:
        c = candidate(root())
        assert c.decision.created_at == NOW

    def test_created_at_sent_as_null_is_the_receive_time(self) -> None:
        assert candidate(root(created_at=None)).decision.created_at == NOW
        broken = read_message(inbound(root(created_at=None, confidence_score=2)), NOW)
        assert rules_of(broken) == {Rule.CONFIDENCE_RANGE}
        unflagged = read_message(inbound(root(created_at=None,
                                              corrects_decision_id=new_id())), NOW)
        assert Rule.TARGET_NEEDS_CORRECTION_FLAG in rules_of(unflagged)

    @pytest.mark.parametrize("sent", ["", "yesterday", "9999-12-31T23:00:00-05:00"])
    def test_created_at_unreadable_or_out_of_range_is_its_schema_violation(
            self, sent: str) -> None:
        result = read_message(inbound(root(created_at=sent)), NOW)
        assert isinstance(result, Invalid)
        assert [(v.rule, v.field) for v in result.violations] == [(Rule.SCHEMA, "created_at")]

    def test_created_at_sent_is_kept(self) -> None:
        c = candidate(root(created_at="2026-01-01T00:00:00Z"))
        assert c.decision.created_at == datetime(2026, 1, 1, tzinfo=UTC)

    def test_not_utf8(self) -> None:
        assert rules_of(read_message(inbound(root(), data=b"\xff\x00"), NOW)) == {Rule.NOT_UTF8}

    def test_not_json(self) -> None:
        assert rules_of(read_message(inbound(root(), data=b"{oops"), NOW)) == {Rule.NOT_JSON}

    def test_not_an_object(self) -> None:
        assert rules_of(read_message(inbound(root(), data=b"[1]"), NOW)) == {Rule.SCHEMA}

    @pytest.mark.parametrize(("fields", "rule"), [
        ({"sequence_number": 3}, Rule.SEQUENCE_ASSIGNED_BY_RECORDER),
        ({"superseded_by": "01JD7X4Q9R8N2V5K3M6P1T0W7Y"}, Rule.CORRECTIONS_USE_WORKFLOW),
        ({"superseded_at": "2026-01-01T00:00:00Z"}, Rule.CORRECTIONS_USE_WORKFLOW),
        ({"superseded_by_correction": "01JD7X4Q9R8N2V5K3M6P1T0W7Y"},
         Rule.CORRECTIONS_USE_WORKFLOW),
        # The slow path (another field is broken too) refuses them as well.
        ({"superseded_at": "2026-01-01T00:00:00Z", "confidence_score": 7},
         Rule.CORRECTIONS_USE_WORKFLOW),
        ({"is_correction": True, "corrects_decision_id": "01JD7X4Q9R8N2V5K3M6P1T0W7Y"},
         Rule.CORRECTIONS_USE_WORKFLOW),
    ])
    def test_recorder_owned_fields_are_refused(self, fields: dict[str, Any], rule: Rule) -> None:
        assert rule in rules_of(read_message(inbound(root(**fields)), NOW))

    def test_subject_must_name_the_plan(self) -> None:
        d = root()
        result = read_message(inbound(d, subject=f"decisions.recorded.{new_id()}"), NOW)
        assert rules_of(result) == {Rule.SUBJECT_MATCHES_PLAN}

    def test_msg_id_must_be_the_decision_id(self) -> None:
        d = root()
        assert rules_of(read_message(inbound(d, headers={}), NOW)) == {Rule.MSG_ID_MATCHES_DECISION}
        assert rules_of(read_message(inbound(d, headers={"Nats-Msg-Id": new_id()}), NOW)) == {
            Rule.MSG_ID_MATCHES_DECISION}

    def test_bad_message_still_names_its_plan_for_the_rejection_subject(self) -> None:
        d = root(confidence_score=7)
        result = read_message(inbound(d), NOW)
        assert isinstance(result, Invalid)
        assert result.plan_id == d["plan_id"]

    def test_content_hash_ignores_created_at_only(self) -> None:
        d = root()
        a = candidate({**d, "created_at": "2026-01-01T00:00:00Z"})
        b = candidate(d)
        c = candidate({**d, "chosen_option": "something else"})
        assert a.content_hash == b.content_hash != c.content_hash
        assert content_hash(a.decision) == a.content_hash


class TestPlanBatch:
    def test_children_before_parents_in_one_batch_are_written_parents_first(self) -> None:
        tree = plan_tree(20, seed=3)
        batch = [candidate(d, i) for i, d in enumerate(reversed(tree))]
        plan = triage_batch(batch, NO_FACTS)
        order = [c.decision.decision_id for c in plan.accept]
        assert sorted(order) == sorted(d["decision_id"] for d in tree)
        position = {i: n for n, i in enumerate(order)}
        for d in tree[1:]:
            assert position[d["parent_decision_id"]] < position[d["decision_id"]]

    def test_missing_parent_waits(self) -> None:
        d = decision(new_id(), new_id())
        plan = triage_batch([candidate(d)], NO_FACTS)
        assert [c.decision.decision_id for c in plan.wait] == [d["decision_id"]]

    def test_stored_parent_in_same_plan_accepts(self) -> None:
        r = root()
        d = decision(r["plan_id"], r["decision_id"])
        plan = triage_batch([candidate(d)], StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {}))
        assert len(plan.accept) == 1

    def test_parent_in_other_plan_is_rejected(self) -> None:
        r = root()
        d = decision(new_id(), r["decision_id"])
        plan = triage_batch([candidate(d)], StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {}))
        assert [v.rule for _, vs in plan.reject for v in vs] == [Rule.PARENT_IN_SAME_PLAN]

    def test_second_root_is_rejected_stored_or_in_batch(self) -> None:
        plan_id = new_id()
        first, second = root(plan_id), root(plan_id)
        stored = triage_batch([candidate(second)], StoredFacts({}, {}, {plan_id: new_id()}))
        same_batch = triage_batch([candidate(first, 1), candidate(second, 2)], NO_FACTS)
        for plan in (stored, same_batch):
            assert [v.rule for _, vs in plan.reject for v in vs] == [Rule.ONE_ROOT_PER_PLAN]

    def test_redelivery_is_duplicate_and_changed_content_is_conflict(self) -> None:
        d = root()
        c = candidate(d)
        facts = StoredFacts({d["decision_id"]: Stored(c.content_hash, 1)}, {}, {})
        assert triage_batch([c], facts).redelivered == [c]  # the very message that wrote it
        retry = candidate(d, seq=2)
        assert triage_batch([retry], facts).duplicate == [retry]  # a publisher's retry
        changed = candidate({**d, "chosen_option": "another"})
        plan = triage_batch([changed], facts)
        assert [v.rule for _, vs in plan.reject for v in vs] == [Rule.DECISION_ID_CONFLICT]

    def test_child_of_rejected_parent_is_rejected(self) -> None:
        plan_id = new_id()
        second_root = root(plan_id)
        orphan = decision(plan_id, second_root["decision_id"])
        plan = triage_batch([candidate(second_root, 1), candidate(orphan, 2)],
                          StoredFacts({}, {}, {plan_id: new_id()}))
        assert {v.rule for _, vs in plan.reject for v in vs} == {Rule.ONE_ROOT_PER_PLAN,
                                                                  Rule.PARENT_EXISTS}

    @settings(max_examples=50, deadline=None)
    @given(size=st.integers(1, 30), seed=st.integers(0, 10_000), data=st.data())
    def test_any_arrival_order_accepts_every_decision_exactly_once(
            self, size: int, seed: int, data: st.DataObject) -> None:
        tree = plan_tree(size, seed=seed)
        shuffled = data.draw(st.permutations(tree))
        cut = data.draw(st.integers(0, size))
        first = triage_batch([candidate(d, i) for i, d in enumerate(shuffled[:cut])], NO_FACTS)
        stored_plan = {c.decision.decision_id: c.decision.plan_id for c in first.accept}
        stored_hash = {c.decision.decision_id: Stored(c.content_hash, c.stream_sequence)
                       for c in first.accept}
        rest = [candidate(d, i) for i, d in enumerate(shuffled[cut:])]
        rest += [candidate(json.loads(json.dumps(c.decision.model_dump(mode="json",
                 exclude={"sequence_number"}))), 99) for c in first.wait]
        roots = {tree[0]["plan_id"]: tree[0]["decision_id"]} if tree[0]["decision_id"] in \
            stored_plan else {}
        second = triage_batch(rest, StoredFacts(stored_hash, stored_plan, roots))
        accepted = [c.decision.decision_id for c in first.accept + second.accept]
        assert sorted(accepted) == sorted(d["decision_id"] for d in tree)
        assert not second.wait and not second.reject and not first.reject
