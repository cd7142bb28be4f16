"""What the operator's front ends find, run on the memory store and on MongoDB: records
by the last characters of their ID, plans by a filter, corrections newest first, a
plan's counts after a revert rolled back its child plan, comments, plan endings and
dead-letter discards (services/upkeep.py over either store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contracts.corrections.changes import Changes
from contracts.corrections.record import Correction
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import CorrectionStatus
from contracts.decisions.comments import CommentRequest
from contracts.decisions.model import Decision
from contracts.decisions.plan_ending import EndPlanRequest
from contracts.decisions.plan_states import PlanStatus
from contracts.shared.actor import UNVERIFIED
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.dead_letter_care import DiscardRequest
from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.views import IdKind, RootFilter
from services import plan_list
from services.id_lookup import IdNotUsable, resolve
from services.upkeep import ReadFacts, Refused, UpkeepService
from tests.contract.conftest import Backend, chain, d, request

S = CorrectionStatus
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


async def spawn_and_revert(b: Backend) -> tuple[list[Decision], list[Decision], Correction]:
    """root -> s (spawns child: r2 -> c1); a revert of s, applied: s, r2 and c1 are
    superseded, the child rolled back."""
    plan, child = new_id(), new_id()
    r = d(plan, None)
    s = d(plan, r.decision_id, "subplan_spawn", downstream_plan_ids=[child])
    tree = await b.load([r, s])
    r2 = d(child, None)
    kids = await b.load([r2, d(child, r2.decision_id)])
    c = Correction.from_request(request(plan, s.decision_id), NOW)
    await b.store.writer.commit(Changes(c, None), NOW)
    impact = await b.store.impact.impact(s.decision_id)
    writes = revert_writes(c.request(), tree[1], impact, new_decision_id=new_id(),
                           sequence_number=0, at=NOW)
    executing = c.transition(S.ANALYZING, NOW).transition(S.EXECUTING, NOW)
    w = await b.store.writer.commit(Changes(executing, 1, revert=writes), NOW)
    applied = executing.transition(
        S.APPLIED, NOW, new_decision_id=w.new_decisions[0].decision_id,
        superseded_ids=list(impact.affected_decision_ids),
        child_plans_rolled_back=[child])
    await b.store.writer.commit(Changes(applied, 2), NOW)
    return tree, kids, applied


async def test_counts_after_a_revert_rolled_back_a_child_plan(b: Backend) -> None:
    """The parent keeps its root and the replacement current; the child plan's decisions,
    superseded by the parent's correction, are the child's, not the parent's."""
    tree, kids, _ = await spawn_and_revert(b)
    plan, child = tree[0].plan_id, kids[0].plan_id
    counts = await b.reads.views.counts([plan, child])
    assert (counts[plan].decisions, counts[plan].current) == (3, 2)
    assert (counts[child].decisions, counts[child].current) == (2, 0)
    current = await b.reads.decisions.current_tree(plan)
    assert counts[plan].current == len(current)


async def test_an_id_is_found_by_its_last_characters(b: Backend) -> None:
    tree, _kids, c = await spawn_and_revert(b)
    views = b.reads.views
    target = tree[1].decision_id
    assert [(m.kind, m.id) for m in await views.ids_ending(target[-8:])] == [
        (IdKind.DECISION, target)]
    assert await resolve(b.reads, "…" + target[-8:].lower(), {IdKind.DECISION}) == target
    assert await resolve(b.reads, c.correction_id[-6:], {IdKind.CORRECTION}) == \
        c.correction_id
    plan = tree[0].plan_id
    assert await resolve(b.reads, plan[-7:], {IdKind.PLAN}) == plan
    assert await resolve(b.reads, target, {IdKind.PLAN}) == target  # whole IDs pass
    with pytest.raises(IdNotUsable, match="no plan ID ends with"):
        await resolve(b.reads, target[-8:], {IdKind.PLAN})
    with pytest.raises(IdNotUsable, match="is not a ULID"):
        await resolve(b.reads, "ab", {IdKind.PLAN})


async def test_an_ambiguous_suffix_lists_its_candidates(b: Backend) -> None:
    plan = new_id()
    # Two IDs that end alike (AAAA) and differ just before (C, B): never the same ID.
    r = d(plan, None, decision_id=plan[:-5] + "CAAAA")
    x = d(plan, r.decision_id, decision_id=plan[:-5] + "BAAAA")
    await b.load([r, x])
    with pytest.raises(IdNotUsable, match="ends 2 IDs") as caught:
        await resolve(b.reads, "AAAA", {IdKind.DECISION})
    assert {m.id for m in caught.value.candidates} == {r.decision_id, x.decision_id}
    assert await resolve(b.reads, "BAAAA", {IdKind.DECISION}) == x.decision_id


async def test_plans_are_filtered_newest_first(b: Backend) -> None:
    early = NOW - timedelta(days=2)
    a = await chain(b, 2)
    billing = await b.load([d(new_id(), None, project="billing").model_copy(
        update={"question": "Add rate limits to the Billing API"})])
    old = await b.load([d(new_id(), None, project="billing", created_at=early)])
    views = b.reads.views
    got = [r.plan_id for r in await views.recent_roots(10, where=RootFilter(
        project="billing"))]
    # Newest first by the root's ULID (made when the root was), not by created_at, which
    # the agent may supply.
    assert got == [old[0].plan_id, billing[0].plan_id]
    assert [r.plan_id for r in await views.recent_roots(10, where=RootFilter(
        text="billing API"))] == [billing[0].plan_id]
    assert [r.plan_id for r in await views.recent_roots(10, where=RootFilter(
        until=NOW - timedelta(days=1)))] == [old[0].plan_id]
    assert await views.recent_roots(10, where=RootFilter(agent="nobody")) == []
    page = await plan_list.find_plans(b.reads, RootFilter(project="billing"), limit=1)
    assert [s.root.plan_id for s in page.plans] == [old[0].plan_id]
    rest = await plan_list.find_plans(b.reads, RootFilter(project="billing"), limit=5,
                                      before=page.next_before)
    assert [s.root.plan_id for s in rest.plans] == [billing[0].plan_id]
    assert rest.next_before is None
    assert a[0].plan_id in [s.root.plan_id for s in
                            (await plan_list.find_plans(b.reads, limit=10)).plans]


async def test_plans_are_filtered_by_status(b: Backend) -> None:
    tree, kids, _ = await spawn_and_revert(b)
    rolled = await plan_list.find_plans(b.reads, status=PlanStatus.ROLLED_BACK)
    assert [s.root.plan_id for s in rolled.plans] == [kids[0].plan_id]
    active = await plan_list.find_plans(b.reads, status=PlanStatus.ACTIVE)
    assert [s.root.plan_id for s in active.plans] == [tree[0].plan_id]
    assert (active.plans[0].counts.decisions, active.plans[0].counts.current) == (3, 2)


async def test_corrections_are_listed_newest_first(b: Backend) -> None:
    tree = await chain(b, 3)
    made = []
    for target in (1, 2):
        c = Correction.from_request(request(tree[0].plan_id, tree[target].decision_id), NOW)
        await b.store.writer.commit(Changes(c, None), NOW)
        made.append(c.correction_id)
    views = b.reads.views
    assert [c.correction_id for c in await views.recent_corrections()] == made[::-1]
    assert [c.correction_id for c in await views.recent_corrections(limit=1)] == [made[1]]
    assert [c.correction_id for c in await views.recent_corrections(
        before=made[1])] == [made[0]]
    assert await views.recent_corrections(status=S.APPLIED) == []


def upkeep(b: Backend) -> UpkeepService:
    return UpkeepService(b.raw.upkeep, ReadFacts(b.reads), clock=lambda: NOW)


async def test_a_comment_is_kept_once_with_its_unverified_author(b: Backend) -> None:
    tree = await chain(b, 2)
    service = upkeep(b)
    ask = CommentRequest(comment_id=new_id(), plan_id=tree[0].plan_id,
                         decision_id=tree[1].decision_id, text="Ask billing first.")
    made = await service.comment(ask, UNVERIFIED)
    await service.comment(ask, UNVERIFIED)  # a redelivery
    got = await b.reads.views.comments(tree[1].decision_id)
    assert got == [made] and made.author == "unverified" and not made.verified
    with pytest.raises(Refused, match="no decision"):
        await service.comment(ask.model_copy(update={"decision_id": new_id()}), UNVERIFIED)


async def test_a_plan_ends_once_and_only_while_active(b: Backend) -> None:
    tree = await chain(b, 2)
    plan = tree[0].plan_id
    service = upkeep(b)
    ask = EndPlanRequest(plan_id=plan, status="completed", reason="shipped")
    ended = await service.end_plan(ask, UNVERIFIED)
    assert (ended.status, ended.ended_by, ended.end_reason) == (
        PlanStatus.COMPLETED, "unverified", "shipped")
    assert await service.end_plan(ask, UNVERIFIED) == ended  # a redelivery
    record = await b.reads.plans.get(plan)
    assert record is not None and record.status is PlanStatus.COMPLETED
    assert record.status_at(NOW - timedelta(seconds=1)) is PlanStatus.ACTIVE
    with pytest.raises(Refused, match="only an active plan"):
        await service.end_plan(ask.model_copy(update={"status": "abandoned"}), UNVERIFIED)
    with pytest.raises(Refused, match="no plan"):
        await service.end_plan(EndPlanRequest(plan_id=new_id(), status="abandoned"),
                               UNVERIFIED)
    other = await chain(b, 2)
    c = Correction.from_request(request(other[0].plan_id, other[1].decision_id), NOW)
    await b.store.writer.commit(Changes(c, None), NOW)
    with pytest.raises(Refused, match="not finished"):
        await service.end_plan(EndPlanRequest(plan_id=other[0].plan_id, status="abandoned"),
                               UNVERIFIED)


async def test_a_dead_letter_is_discarded_once_and_drops_out_of_the_counts(
        b: Backend) -> None:
    letter = DeadLetter.of_message(
        id="DECISIONS:4", subject="decisions.recorded.x", headers={}, data=b"{",
        plan_id=None, decision_id=None,
        errors=[RuleViolation(rule=Rule.NOT_JSON, message="not JSON")], rejected_at=NOW,
        delivered=1)
    await b.store.dead_letters.keep([letter])
    assert [x.id for x in await b.reads.dead_letters.list(rule="not_json")] == [letter.id]
    assert await b.reads.dead_letters.list(rule="schema") == []
    service = upkeep(b)
    await service.discard(DiscardRequest(dead_letter_id=letter.id, reason="a test"),
                          UNVERIFIED)
    assert await b.reads.dead_letters.list() == []
    [gone] = await b.reads.dead_letters.list(discarded=True)
    assert (gone.discarded_by, gone.discard_reason) == ("unverified", "a test")
    assert (await b.reads.status(NOW)).dead_letters == 0
    with pytest.raises(Refused, match="no dead letter"):
        await service.discard(DiscardRequest(dead_letter_id=letter.id, reason="again"),
                              UNVERIFIED)
