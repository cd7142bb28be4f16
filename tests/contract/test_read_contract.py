"""The read port (services/read_ports.py), each test run on the memory store and on MongoDB.

What is tested is what the console and the CLI show: a decision and its neighbours, a
tree a level at a time (current or with what a revert superseded), pages and their
order, per-plan counts, corrections and their attempts, dead letters, invariants and
violations, the status counts, and the read models composed over the port
(services/read_model.py, services/tree_model.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes
from contracts.corrections.record import Correction
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.shared.counts import PlanCounts
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.rules import Rule, RuleViolation
from services import plan_list, read_model, tree_model
from services.id_lookup import IdNotUsable
from tests.contract.conftest import Backend, chain, d, request

S = CorrectionStatus
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def ids(decisions: list[Decision]) -> list[str]:
    return [x.decision_id for x in decisions]


async def pending(b: Backend, tree: list[Decision], target: int = 1) -> Correction:
    c = Correction.from_request(request(tree[0].plan_id, tree[target].decision_id), NOW)
    await b.store.writer.commit(Changes(c, None), NOW)
    return c


async def reverted(b: Backend) -> tuple[list[Decision], Decision, Correction]:
    """root -> a -> t -> x; a revert of t: t and x superseded, a new t' under a."""
    plan = new_id()
    r = d(plan, None)
    a = d(plan, r.decision_id)
    t = d(plan, a.decision_id)
    x = d(plan, t.decision_id, "tool_invocation")
    tree = await b.load([r, a, t, x])
    c = await pending(b, tree, 2)
    impact = await b.store.impact.impact(t.decision_id)
    writes = revert_writes(c.request(), tree[2], impact, new_decision_id=new_id(),
                           sequence_number=0, at=NOW)
    executing = c.transition(S.ANALYZING, NOW).transition(S.EXECUTING, NOW)
    w = await b.store.writer.commit(Changes(executing, 1, revert=writes), NOW)
    return tree, w.new_decisions[0], c


async def test_a_decision_and_its_plans_tree_read_the_same(b: Backend) -> None:
    tree, new, _ = await reverted(b)
    r, a, t, x = tree
    plan = r.plan_id
    got = await b.reads.decisions.get(t.decision_id)
    assert got is not None and got.superseded_by == new.decision_id
    assert set(await b.reads.decisions.get_many([r.decision_id, x.decision_id, new_id()])) \
        == {r.decision_id, x.decision_id}
    assert ids(await b.reads.decisions.children(a.decision_id)) == [new.decision_id]
    assert ids(await b.reads.decisions.children(a.decision_id, current_only=False)) == [
        t.decision_id, new.decision_id]
    assert ids(await b.reads.decisions.full_tree(plan)) == [*ids(tree), new.decision_id]
    assert ids(await b.reads.decisions.current_tree(plan)) == [
        r.decision_id, a.decision_id, new.decision_id]
    record = await b.reads.plans.get(plan)
    assert record is not None and record.root_decision_id == r.decision_id
    assert await b.reads.plans.get(new_id()) is None


async def test_a_tree_is_read_a_level_at_a_time(b: Backend) -> None:
    tree, new, _ = await reverted(b)
    r, a, t, _x = tree
    views, plan = b.reads.views, r.plan_id
    assert ids(await views.level(plan, None, after=None, limit=10, superseded=False)) == [
        r.decision_id]
    assert ids(await views.level(plan, a.decision_id, after=None, limit=10,
                                 superseded=False)) == [new.decision_id]
    both = await views.level(plan, a.decision_id, after=None, limit=10, superseded=True)
    assert ids(both) == [t.decision_id, new.decision_id]
    assert ids(await views.level(plan, a.decision_id, after=t.sequence_number, limit=10,
                                 superseded=True)) == [new.decision_id]
    assert ids(await views.level(plan, a.decision_id, after=None, limit=1,
                                 superseded=True)) == [t.decision_id]
    assert await views.level(new_id(), a.decision_id, after=None, limit=10,
                             superseded=True) == []  # another plan's parent: nothing
    assert await views.child_counts([r.decision_id, a.decision_id, t.decision_id],
                                    superseded=False) == {r.decision_id: 1, a.decision_id: 1}
    assert await views.child_counts([a.decision_id, t.decision_id], superseded=True) == {
        a.decision_id: 2, t.decision_id: 1}


async def test_plans_are_paged_newest_first_and_counted(b: Backend) -> None:
    plans = [await chain(b, 3) for _ in range(3)]
    roots = sorted((p[0].decision_id for p in plans), reverse=True)
    views = b.reads.views
    assert ids(await views.recent_roots(10)) == roots
    assert ids(await views.recent_roots(2)) == roots[:2]
    assert ids(await views.recent_roots(10, before=roots[1])) == roots[2:]
    first = plans[0]
    plan = first[0].plan_id
    await pending(b, first)
    inv = Invariant(name="n", description="d", scope=InvariantScope.GLOBAL, created_at=NOW)
    await b.invariant_store.invariants.add(inv)
    await b.invariant_store.violations.record(violation(plan, inv), no_event, NOW)
    unknown = new_id()
    assert await views.counts([plan, plans[1][0].plan_id, unknown]) == {
        plan: PlanCounts(decisions=3, current=3, open_corrections=1, open_violations=1),
        plans[1][0].plan_id: PlanCounts(decisions=3, current=3),
        unknown: PlanCounts()}
    assert await views.plan_exists(plan) and not await views.plan_exists(unknown)


async def test_corrections_and_their_attempts(b: Backend) -> None:
    tree = await chain(b, 3)
    c = await pending(b, tree)
    other = await pending(b, await chain(b, 2))
    found = await b.reads.corrections.get(c.correction_id)
    assert found is not None and found.correction == c
    assert [x.correction_id for x in await b.reads.corrections.find(tree[0].plan_id)] == [
        c.correction_id]
    assert {x.correction_id for x in await b.reads.corrections.find(status=S.PENDING)} == {
        c.correction_id, other.correction_id}
    assert await b.reads.corrections.find(status=S.APPLIED) == []
    running = CorrectionAttemptRecord.for_correction(c, NOW).transition(
        CorrectionAttemptState.EXECUTING, NOW)
    await b.store.writer.commit(Changes(c, 1, attempts=[AttemptChange(running, None)]), NOW)
    assert [x.id for x in await b.reads.attempts.list_by_correction(c.correction_id)] == [
        running.id]


def letter(plan_id: str | None, at: datetime, rule: Rule = Rule.SCHEMA) -> DeadLetter:
    return DeadLetter.of_message(
        id=f"DECISIONS:{new_id()}", subject="decisions.recorded.x", headers={}, data=b"{",
        plan_id=plan_id, decision_id=None, rejected_at=at, delivered=1,
        errors=[RuleViolation(rule=rule, message="no")])


async def test_dead_letters_newest_first(b: Backend) -> None:
    plan = new_id()
    old, mine, new = (letter(None, NOW), letter(plan, NOW + timedelta(seconds=1)),
                      letter(None, NOW + timedelta(seconds=2)))
    await b.store.dead_letters.keep([old, mine, new])
    assert [x.id for x in await b.reads.dead_letters.list()] == [new.id, mine.id, old.id]
    assert [x.id for x in await b.reads.dead_letters.list(limit=1)] == [new.id]
    assert [x.id for x in await b.reads.dead_letters.list(plan)] == [mine.id]
    assert await b.reads.dead_letters.get(mine.id) == mine
    assert await b.reads.dead_letters.get("DECISIONS:0") is None


def violation(plan_id: str, inv: Invariant, severity: Severity = Severity.ERROR,
              at: datetime = NOW) -> InvariantViolation:
    return InvariantViolation.model_validate({
        "violation_id": new_id(), "invariant_id": inv.id, "plan_id": plan_id,
        "decision_id": new_id(), "severity": severity, "reported_at": at,
        "details": "tests skipped"})


def no_event(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
    return OutgoingEvent(f"test.{v.violation_id}", b"{}",
                         f"{v.violation_id}:{v.resolved_at is not None}")


async def test_invariants_by_name_and_violations_oldest_first(b: Backend) -> None:
    z = Invariant(name="z-last", description="d", scope=InvariantScope.GLOBAL, created_at=NOW)
    a = Invariant(name="a-first", description="d", scope=InvariantScope.PROJECT,
                  scope_target="api", created_at=NOW)
    for inv in (z, a):
        await b.invariant_store.invariants.add(inv)
    assert [i.id for i in await b.reads.invariants.find()] == [a.id, z.id]
    assert [i.id for i in await b.reads.invariants.find(InvariantScope.PROJECT, "api")] == [
        a.id]
    plan = new_id()
    first = violation(plan, z)
    second = violation(plan, a, Severity.WARNING, NOW + timedelta(seconds=1))
    for v in (first, second):
        await b.invariant_store.violations.record(v, no_event, NOW)
    await b.invariant_store.violations.resolve(first.violation_id, "bob", NOW, no_event)
    assert [v.violation_id for v in await b.reads.violations.find(plan)] == [
        first.violation_id, second.violation_id]
    assert [v.violation_id for v in await b.reads.violations.find(
        plan, unresolved_only=True)] == [second.violation_id]


async def test_the_status_counts(b: Backend) -> None:
    tree = await chain(b, 2)
    c = await pending(b, tree)
    await b.store.dead_letters.keep([letter(None, NOW), letter(None, NOW),
                                     letter(None, NOW, Rule.PAYLOAD_TOO_LARGE)])
    inv = Invariant(name="n", description="d", scope=InvariantScope.GLOBAL, created_at=NOW)
    await b.invariant_store.invariants.add(inv)
    await b.invariant_store.violations.record(violation(tree[0].plan_id, inv), no_event, NOW)
    status = await b.reads.status(NOW)
    assert status.dead_letters == 3
    assert status.dead_letters_by_rule == {Rule.SCHEMA.value: 2,
                                           Rule.PAYLOAD_TOO_LARGE.value: 1}
    assert status.corrections_in_flight == {S.PENDING.value: 1}
    assert status.oldest_in_flight_at == c.requested_at
    assert status.violations_open == {Severity.ERROR.value: 1}
    assert status.workers == []


async def test_the_read_models_compose_the_same_over_both(b: Backend) -> None:
    tree, new, c = await reverted(b)
    r, a, t, x = tree
    explained = await read_model.explain(b.reads, x.decision_id)
    assert explained is not None and ids(explained.path) == ids([r, a, t])
    assert [k.correction_id for k in explained.corrections] == []
    target = await read_model.explain(b.reads, t.decision_id)
    assert target is not None and [k.correction_id for k in target.corrections] == [
        c.correction_id]
    assert (await read_model.find(b.reads, new.decision_id.lower())).kind == "decision"
    assert (await read_model.find(b.reads, r.plan_id)).kind == "plan"
    assert (await read_model.find(b.reads, c.correction_id)).kind == "correction"
    assert (await read_model.find(b.reads, new_id())).kind == "none"
    with pytest.raises(IdNotUsable):
        await read_model.find(b.reads, "not an id")
    level = await tree_model.tree_level(b.reads, r.plan_id, a.decision_id, superseded=True)
    assert [(n.decision.decision_id, n.child_count) for n in level.nodes] == [
        (t.decision_id, 1), (new.decision_id, 0)]
    assert [k.correction_id for k in level.nodes[0].corrections] == [c.correction_id]
    [summary] = [s for s in (await plan_list.find_plans(b.reads)).plans
                 if s.root.decision_id == r.decision_id]
    assert summary.counts.decisions == 5 and summary.counts.open_corrections == 1
