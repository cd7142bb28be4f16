"""Approvals without a server: the lifecycle table, the digest an approval binds, who may
decide one, and verdicts off the wire (hostile bodies are named refusals, never
exceptions)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from contracts.decisions.context import ContextSnapshot
from contracts.decisions.model import Decision
from contracts.decisions.tools import ToolCall
from contracts.decisions.types import DecisionType
from contracts.invariants import subjects
from contracts.invariants.approval_wire import ApprovalVerdict, Verdict, read_verdict
from contracts.invariants.approvals import (
    TRANSITIONS,
    Approval,
    ApprovalStatus,
    ApprovalTransitionRefused,
    approver_refused,
    check_transition,
    decision_digest,
)
from contracts.shared.ids import MSG_ID_HEADER, new_id
from contracts.shared.roles import Role
from contracts.shared.rules import Rule
from contracts.shared.unreadable import Unreadable
from tests.unit.test_plan_use_who import who

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PLAN = new_id()


def decision(**changes: object) -> Decision:
    d = Decision(decision_id=new_id(), plan_id=PLAN, parent_decision_id=new_id(),
                 decision_type=DecisionType.TOOL_INVOCATION, question="deploy?",
                 chosen_option="write", context_snapshot=ContextSnapshot(
                     hot_context_hash="sha256:" + "0" * 64, hot_context_ref="ctx"),
                 tool=ToolCall(name="write_file", arguments={"path": "deploy/prod/x"}),
                 created_at=datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC))
    return d.model_copy(update=changes)


def approval(digest: str, **changes: object) -> Approval:
    a = Approval(decision_id=new_id(), plan_id=PLAN, status=ApprovalStatus.REQUESTED,
                 digest=digest, requested_at=NOW, expires_at=NOW + timedelta(hours=1))
    return a.model_copy(update=changes)


def test_a_verdict_is_final_and_only_a_requested_approval_moves() -> None:
    for old, allowed in TRANSITIONS.items():
        for new in ApprovalStatus:
            if new in allowed:
                check_transition("D", old, new)
            else:
                with pytest.raises(ApprovalTransitionRefused):
                    check_transition("D", old, new)
    assert TRANSITIONS[ApprovalStatus.REQUESTED] == {
        ApprovalStatus.GRANTED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED}


def test_the_digest_is_what_the_agent_wrote_whatever_the_ledger_adds() -> None:
    d = decision()
    # Read back from MongoDB: milliseconds, a sequence number, superseded later.
    stored = d.model_copy(update={"created_at": d.created_at.replace(microsecond=123000),
                                  "sequence_number": 7, "superseded_by": new_id()})
    assert decision_digest(stored) == decision_digest(d)
    changed = d.model_copy(update={"tool": ToolCall(name="write_file",
                                                    arguments={"path": "deploy/prod/y"})})
    assert decision_digest(changed) != decision_digest(d)


OPS = who("ops", Role.OPERATOR, ("myapp",))


@pytest.mark.parametrize(("identity", "unsigned_ok", "rule"), [
    (OPS, False, None),
    (who("root", Role.OPERATOR, ("*",)), False, None),
    (who("elsewhere", Role.OPERATOR, ("other",)), False, Rule.OPERATOR_SCOPE),
    (who("agent", Role.AGENT), False, Rule.APPROVER_REFUSED),
    (who("worker", Role.WORKER), False, Rule.APPROVER_REFUSED),
    (None, False, Rule.APPROVER_REFUSED),
    (None, True, None),
])
def test_who_may_decide(identity: object, unsigned_ok: bool, rule: Rule | None) -> None:
    a = approval("sha256:x")
    refused = approver_refused(a, identity, "myapp", "sha256:x", NOW,  # type: ignore[arg-type]
                               unsigned_ok=unsigned_ok)
    assert (refused.rule if refused else None) is rule


def test_what_a_verdict_must_find() -> None:
    a = approval("sha256:x")
    assert approver_refused(None, OPS, "myapp", "sha256:x", NOW).rule is Rule.APPROVAL_EXISTS
    closed = a.model_copy(update={"status": ApprovalStatus.GRANTED})
    assert approver_refused(closed, OPS, "myapp", "sha256:x", NOW).rule \
        is Rule.APPROVAL_CLOSED
    late = NOW + timedelta(hours=1)
    assert approver_refused(a, OPS, "myapp", "sha256:x", late).rule is Rule.APPROVAL_EXPIRED
    assert approver_refused(a, OPS, "myapp", "sha256:y", NOW).rule is Rule.APPROVAL_DIGEST


def wire(body: object, msg_id: str | None = None, plan: str = PLAN) -> ApprovalVerdict | Unreadable:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {MSG_ID_HEADER: msg_id} if msg_id else {}
    return read_verdict(subjects.verdicts(plan), headers, data)


def test_a_verdict_off_the_wire() -> None:
    v = ApprovalVerdict(plan_id=PLAN, decision_id=new_id(), verdict=Verdict.DENY,
                        digest="sha256:x", reason="no", guidance="use staging",
                        append_correction_id=new_id())
    assert wire(v.model_dump(mode="json"), v.request_id) == v


def rules_of(read: object) -> set[Rule]:
    assert isinstance(read, Unreadable)
    return {x.rule for x in read.violations}


@pytest.mark.parametrize(("body", "rule"), [
    (b"\xff\xfe", Rule.NOT_UTF8),
    (b"[[[[" * 5000, None),
    (b"null", Rule.SCHEMA),
    (b"x" * 2_000_000, Rule.PAYLOAD_TOO_LARGE),
    ({"request_id": new_id(), "plan_id": PLAN, "decision_id": new_id(), "verdict": "maybe",
      "digest": "d"}, Rule.SCHEMA),
])
def test_hostile_verdicts_are_named_refusals(body: object, rule: Rule | None) -> None:
    read = wire(body, new_id())
    assert isinstance(read, Unreadable) and read.violations
    if rule is not None:
        assert rule in rules_of(read)


def test_a_verdict_names_its_plan_its_id_and_guidance_only_with_a_denial() -> None:
    rid = new_id()
    base = {"request_id": rid, "plan_id": PLAN, "decision_id": new_id(), "digest": "d"}
    assert Rule.SUBJECT_MATCHES_PLAN in rules_of(wire({**base, "verdict": "grant"}, rid,
                                                      plan=new_id()))
    assert Rule.MSG_ID_MATCHES_REQUEST in rules_of(wire({**base, "verdict": "grant"}, new_id()))
    assert Rule.SCHEMA in rules_of(wire({**base, "verdict": "grant", "guidance": "g"}, rid))
    assert Rule.SCHEMA in rules_of(wire({**base, "verdict": "deny",
                                         "append_correction_id": new_id()}, rid))
