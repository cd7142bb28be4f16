"""The pure rules behind an operator's first hour: ID suffixes, a plan's ending, which
dead letters a retry can fix, reading the upkeep commands off the wire (whatever bytes
arrive), and how durations and reverted choices read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.render import seconds
from contracts.corrections.requests import reverted_choice
from contracts.decisions.comments import CommentRequest
from contracts.decisions.plan_ending import EndPlanRequest, EndRefusal, PlanEndRefused, end_plan
from contracts.decisions.plan_states import PLAN_LIFECYCLE, PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.recording import families
from contracts.recording.upkeep_wire import read_upkeep
from contracts.shared.actor import UNVERIFIED, Actor
from contracts.shared.dead_letter_care import (
    DiscardRequest,
    duplicate_window_end,
    retry_outlook,
    stream_of,
)
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.unreadable import Unreadable
from contracts.shared.views import suffix_of

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_an_id_suffix_is_four_or_more_crockford_characters() -> None:
    ulid = new_id()
    assert suffix_of(ulid.lower()) == ulid
    assert suffix_of("…" + ulid[-8:].lower()) == ulid[-8:]
    assert suffix_of("..." + ulid[-5:]) == ulid[-5:]
    for bad in ("abc", "ZD5CJVAU", "01-02", "", "x" * 27, "8" + ulid[1:]):
        assert suffix_of(bad) is None, bad


def ended(plan: PlanRecord | None, to: PlanStatus = PlanStatus.COMPLETED, *,
          actor: Actor = UNVERIFIED, owner: str | None = None, open_: int = 0) -> PlanRecord:
    plan_id = plan.plan_id if plan else new_id()
    return end_plan(plan_id, plan, recorded=True, to=to, actor=actor, owner=owner,
                    open_corrections=open_, at=NOW, reason="done")


def refusal(*args: object, **kwargs: object) -> EndRefusal:
    with pytest.raises(PlanEndRefused) as caught:
        ended(*args, **kwargs)  # type: ignore[arg-type]
    return caught.value.refusal


def test_only_an_active_plan_ends_and_only_by_its_owner_or_an_operator() -> None:
    active = PlanRecord(plan_id=new_id())
    done = ended(active)
    assert (done.status, done.ended_as, done.ended_by, done.end_reason) == (
        PlanStatus.COMPLETED, PlanStatus.COMPLETED, "unverified", "done")
    assert ended(None, PlanStatus.ABANDONED).status is PlanStatus.ABANDONED
    assert refusal(done) is EndRefusal.NOT_ACTIVE
    assert refusal(active.model_copy(update={"status": PlanStatus.ROLLED_BACK})) is \
        EndRefusal.NOT_ACTIVE
    assert refusal(active, open_=1) is EndRefusal.CORRECTIONS_OPEN
    other = Actor("intruder", Role.AGENT)
    assert refusal(active, actor=other, owner="billing-agent") is EndRefusal.NOT_OWNER
    assert refusal(active, owner="billing-agent") is EndRefusal.NOT_OWNER  # unverified
    assert ended(active, actor=Actor("billing-agent", Role.AGENT), owner="billing-agent")
    assert ended(active, actor=Actor("alice", Role.OPERATOR), owner="billing-agent")
    with pytest.raises(PlanEndRefused) as caught:
        end_plan(new_id(), None, recorded=False, to=PlanStatus.COMPLETED, actor=UNVERIFIED,
                 owner=None, open_corrections=0, at=NOW)
    assert caught.value.refusal is EndRefusal.UNKNOWN_PLAN
    with pytest.raises(ValueError, match="completed or abandoned"):
        ended(active, PlanStatus.ROLLED_BACK)


def test_an_ended_plan_is_still_rolled_back_and_reads_as_it_was() -> None:
    assert PLAN_LIFECYCLE.allows(PlanStatus.ABANDONED, PlanStatus.ROLLED_BACK)
    assert PLAN_LIFECYCLE.allows(PlanStatus.COMPLETED, PlanStatus.ROLLED_BACK)
    assert not PLAN_LIFECYCLE.allows(PlanStatus.ABANDONED, PlanStatus.ACTIVE)
    done = ended(PlanRecord(plan_id=new_id()))
    later = done.model_copy(update={"status": PlanStatus.ROLLED_BACK,
                                    "rolled_back_at": NOW + timedelta(hours=1)})
    assert later.status_at(NOW - timedelta(seconds=1)) is PlanStatus.ACTIVE
    assert later.status_at(NOW + timedelta(minutes=1)) is PlanStatus.COMPLETED
    assert later.status_at(NOW + timedelta(hours=2)) is PlanStatus.ROLLED_BACK
    assert PlanRecord(plan_id=new_id()).status_at(NOW) is PlanStatus.ACTIVE


def v(rule: Rule) -> RuleViolation:
    return RuleViolation(rule=rule, message=f"broke {rule.value}")


def test_a_retry_is_for_what_the_ledger_state_refused() -> None:
    for rule in (Rule.MAX_DELIVERIES, Rule.PARENT_EXISTS, Rule.RECONCILIATION_BLOCKED,
                 Rule.INVARIANT_EXISTS):
        assert retry_outlook([v(rule)]).retryable, rule
    for rule in (Rule.SCHEMA, Rule.NOT_JSON, Rule.PAYLOAD_TOO_LARGE, Rule.PLAN_ROLLED_BACK,
                 Rule.DECISION_ID_CONFLICT):
        outlook = retry_outlook([v(Rule.MAX_DELIVERIES), v(rule)])
        assert not outlook.retryable and f"rule {rule.value} would refuse" in outlook.why
    assert duplicate_window_end(NOW, 120) == NOW + timedelta(minutes=2)
    assert stream_of("DECISIONS:17") == "DECISIONS" and stream_of("x:1") is None


def test_the_upkeep_commands_read_and_their_subject_agrees() -> None:
    plan, decision = new_id(), new_id()
    comment = CommentRequest(comment_id=new_id(), plan_id=plan, decision_id=decision,
                             text="ask first")
    subject = families.COMMENT.subject_for(plan)
    assert read_upkeep(CommentRequest, subject, families.COMMENT.name,
                       comment.model_dump_json().encode()) == comment
    elsewhere = read_upkeep(CommentRequest, families.COMMENT.subject_for(new_id()),
                            families.COMMENT.name, comment.model_dump_json().encode())
    assert isinstance(elsewhere, Unreadable)
    assert elsewhere.violations[0].rule is Rule.SUBJECT_MATCHES_PLAN
    end = EndPlanRequest(plan_id=plan, status="abandoned")
    assert read_upkeep(EndPlanRequest, families.END_PLAN.subject_for(plan),
                       families.END_PLAN.name, end.model_dump_json().encode()) == end
    assert end.msg_id() == f"end_plan:{plan}:abandoned"
    discard = DiscardRequest(dead_letter_id="CORRECTIONS:4", reason="junk")
    wrong = read_upkeep(DiscardRequest, "decisions.discard.DECISIONS", families.DISCARD.name,
                        discard.model_dump_json().encode())
    assert isinstance(wrong, Unreadable) and "not of the subject's stream" in wrong.reason
    right = read_upkeep(DiscardRequest, "decisions.discard.CORRECTIONS",
                        families.DISCARD.name, discard.model_dump_json().encode())
    assert right == discard and discard.msg_id() == "discard:CORRECTIONS:4"
    with pytest.raises(ValueError, match="STREAM>:<sequence>"):
        DiscardRequest(dead_letter_id="../../etc", reason="x")
    big = read_upkeep(CommentRequest, subject, families.COMMENT.name, b"{" * 10,
                      max_payload_bytes=5)
    assert isinstance(big, Unreadable) and big.violations[0].rule is Rule.PAYLOAD_TOO_LARGE


@given(st.binary(max_size=2000), st.sampled_from([
    (CommentRequest, families.COMMENT), (EndPlanRequest, families.END_PLAN),
    (DiscardRequest, families.DISCARD)]), st.text(max_size=40))
def test_any_bytes_on_an_upkeep_subject_read_without_raising(
        data: bytes, family: tuple[type, object], token: str) -> None:
    model, fam = family
    result = read_upkeep(model, f"{fam.name}.{token}", fam.name, data)  # type: ignore[attr-defined]
    assert isinstance(result, model | Unreadable)
    if isinstance(result, Unreadable):
        assert 1 <= len(result.violations) <= 50


def test_durations_and_reverted_choices_read_as_meant() -> None:
    assert [seconds(x) for x in (9.46, 59.9, 78.58399999999997, 3725)] == [
        "9.5 s", "1 min 0 s", "1 min 19 s", "1 h 2 min"]
    assert reverted_choice("Redis INCR") == "(reverted; no replacement chosen) was: Redis INCR"
