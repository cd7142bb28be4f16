"""Approvals through the read port (services/read_ports.ApprovalReads), on the memory
store and on MongoDB alike: the queue the console and `agents approval list` show,
one approval, and a verdict's outcome (the first one kept)."""

from __future__ import annotations

from datetime import UTC, datetime

from contracts.invariants.approval_wire import Verdict, VerdictOutcome, VerdictStatus
from contracts.invariants.approvals import ApprovalStatus
from contracts.invariants.holds import Hold, HoldReason, HoldStatus
from contracts.invariants.severity import Consequence, Severity
from contracts.invariants.violations import FoundBy
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule
from tests.contract.conftest import Backend

NOW = datetime(2026, 12, 2, 9, tzinfo=UTC)


def hold(plan_id: str, status: HoldStatus = HoldStatus.AWAITING_APPROVAL) -> Hold:
    reason = HoldReason(invariant_id=new_id(), invariant_name="prod-needs-a-person",
                        severity=Severity.ERROR, consequence=Consequence.HOLD,
                        found_by=FoundBy.CHECK)
    return Hold(decision_id=new_id(), plan_id=plan_id, status=status, reasons=[reason],
                digest="sha256:abc", created_at=NOW, updated_at=NOW)


async def test_the_queue_oldest_first_by_plan_and_status(b: Backend) -> None:
    plan, other = new_id(), new_id()
    holds = [hold(plan), hold(other), hold(plan)]
    released = hold(plan, HoldStatus.RELEASED)
    await b.open_approvals([*holds, released], NOW)
    await b.open_approvals(holds[:1], NOW)  # a batch written again opens nothing more

    queue = await b.reads.approvals.find(ApprovalStatus.REQUESTED)
    assert [a.decision_id for a in queue] == sorted(h.decision_id for h in holds)
    assert [a.decision_id for a in await b.reads.approvals.find(plan_id=plan.lower())] == \
        sorted(h.decision_id for h in holds if h.plan_id == plan)
    assert await b.reads.approvals.find(ApprovalStatus.GRANTED) == []
    assert len(await b.reads.approvals.find(limit=2)) == 2

    a = await b.reads.approvals.get(holds[1].decision_id.lower())
    assert a is not None and a.status is ApprovalStatus.REQUESTED
    assert a.plan_id == other and a.digest == "sha256:abc"
    assert a.invariant_names == ["prod-needs-a-person"]
    assert a.requested_at == NOW and a.expires_at > NOW
    assert await b.reads.approvals.get(released.decision_id) is None
    assert await b.reads.approvals.get(new_id()) is None


async def test_a_verdicts_first_outcome_stays(b: Backend) -> None:
    h = hold(new_id())
    first = VerdictOutcome(request_id=new_id(), plan_id=h.plan_id, decision_id=h.decision_id,
                           verdict=Verdict.GRANT, status=VerdictStatus.APPLIED,
                           decided_by="alice", at=NOW)
    assert await b.reads.approvals.outcome(first.request_id) is None
    await b.raw.approvals.keep(first)
    await b.raw.approvals.keep(first.model_copy(update={
        "status": VerdictStatus.REFUSED, "rule": Rule.SCHEMA, "reason": "later"}))
    assert await b.reads.approvals.outcome(first.request_id.lower()) == first
