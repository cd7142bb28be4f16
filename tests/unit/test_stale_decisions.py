"""ADR 0019: a decision a correction made stale is refused, naming where to resume."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from contracts.recording.events import DecisionRejected
from contracts.recording.facts import Resume, StoredFacts
from contracts.recording.message import Candidate, read_message
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule
from tests.factories import decision, encode, headers, root, subject

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def candidate(d: dict[str, Any], seq: int = 1) -> Candidate:
    result = read_message(Inbound(subject(d), headers(d), encode(d), seq), NOW)
    assert isinstance(result, Candidate), result
    return result


def rules(plan: Any) -> list[Rule]:
    return [v.rule for _, vs in plan.reject for v in vs]


RESUME = Resume(correction_id=new_id(), replacement_decision_id=new_id(), plan_id=new_id())


def test_child_of_a_superseded_parent_is_refused_naming_correction_and_replacement() -> None:
    r = root()
    late = decision(r["plan_id"], r["decision_id"])
    facts = StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {},
                        superseded={r["decision_id"]: RESUME})
    plan = triage_batch([candidate(late, 7)], facts)
    assert rules(plan) == [Rule.PARENT_SUPERSEDED] and not plan.accept
    message = plan.reject[0][1][0].message
    assert RESUME.correction_id in message and RESUME.replacement_decision_id in message
    assert plan.resume == {7: RESUME}


def test_children_of_a_refused_late_decision_in_the_same_batch_are_refused_too() -> None:
    r = root()
    late = decision(r["plan_id"], r["decision_id"])
    grandchild = decision(r["plan_id"], late["decision_id"])
    facts = StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {},
                        superseded={r["decision_id"]: RESUME})
    plan = triage_batch([candidate(grandchild, 2), candidate(late, 1)], facts)
    assert rules(plan) == [Rule.PARENT_SUPERSEDED, Rule.PARENT_SUPERSEDED]
    assert plan.resume == {1: RESUME, 2: RESUME} and not plan.wait


def test_decisions_into_a_rolled_back_plan_are_refused_root_included() -> None:
    r = root()
    child = decision(r["plan_id"], r["decision_id"])
    facts = StoredFacts({}, {}, {}, rolled_back={r["plan_id"]: RESUME})
    plan = triage_batch([candidate(r, 1), candidate(child, 2)], facts)
    assert rules(plan) == [Rule.PLAN_ROLLED_BACK, Rule.PLAN_ROLLED_BACK]
    assert plan.reject[0][1][0].field == "plan_id"


def test_a_current_parent_is_unaffected_by_other_superseded_decisions() -> None:
    r = root()
    ok = decision(r["plan_id"], r["decision_id"])
    facts = StoredFacts({}, {r["decision_id"]: r["plan_id"]}, {},
                        superseded={new_id(): RESUME}, rolled_back={new_id(): RESUME})
    assert len(triage_batch([candidate(ok)], facts).accept) == 1


def test_rejection_event_carries_the_resume_and_reads_without_it() -> None:
    body = DecisionRejected(dead_letter_id="d", subject="s", plan_id=None, decision_id=None,
                            errors=[], rejected_at=NOW, resume=RESUME)
    assert DecisionRejected.model_validate_json(body.model_dump_json()).resume == RESUME
    assert DecisionRejected(dead_letter_id="d", subject="s", plan_id=None, decision_id=None,
                            errors=[], rejected_at=NOW).resume is None


def test_resume_without_a_known_correction_still_reads() -> None:
    assert Resume(replacement_decision_id="R").where() == "; resume under decision R"
