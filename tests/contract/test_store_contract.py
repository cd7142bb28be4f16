"""The store contract (services/ports/), each test run on the memory store and on MongoDB.

What is tested is what the services rely on: conditional writes that lose cleanly with a
named error and leave nothing behind, unique IDs, leases, the outbox's order, the tree
changes of a revert and an append, and the recorder's batch write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contracts.corrections.append import append_writes
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes
from contracts.corrections.record import Correction
from contracts.corrections.revert import revert_writes
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.impact.errors import TargetNotFound
from contracts.invariants.errors import (
    DuplicateInvariant,
    ViolationAlreadyResolved,
    ViolationConflict,
)
from contracts.invariants.model import Invariant, InvariantScope
from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.recording.message import Candidate, content_hash
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import MSG_ID_HEADER, new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.persistence import (
    ConcurrentChange,
    DuplicateRecord,
    ForeignKeyViolation,
    InvariantNotFound,
    LeaseFence,
    LeaseLost,
)
from contracts.shared.rules import Rule, RuleViolation
from services.ports.records import DeadLetterShelf
from tests.contract.conftest import Backend, chain, d, request
from tests.factories import decision, plan_tree, root

S = CorrectionStatus
A = CorrectionAttemptState
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def event(tag: str) -> OutgoingEvent:
    return OutgoingEvent(f"test.{tag}", tag.encode(), f"{tag}:{new_id()}")


async def pending(b: Backend, tree: list[Decision], target: int = 1, *,
                  arrival: int = 0) -> Correction:
    c = Correction.from_request(request(tree[0].plan_id, tree[target].decision_id), NOW)
    await b.store.writer.commit(Changes(c, None, arrival=arrival, events=[event("p")]), NOW)
    return c


# --- corrections: versions, unique IDs, order -------------------------------------------


async def test_a_correction_is_inserted_once_and_written_conditionally(b: Backend) -> None:
    tree = await chain(b)
    c = await pending(b, tree)
    v = await b.store.corrections.get(c.correction_id)
    assert v is not None and v.version == 1 and v.correction == c
    with pytest.raises(DuplicateRecord):
        await b.store.writer.commit(Changes(c, None, events=[event("again")]), NOW)
    analyzing = c.transition(S.ANALYZING, NOW)
    w = await b.store.writer.commit(Changes(analyzing, 1, events=[event("a")]), NOW)
    assert w.versioned.version == 2
    with pytest.raises(ConcurrentChange):  # read at version 1, which is gone
        await b.store.writer.commit(Changes(analyzing.transition(S.CANCELLED, NOW), 1,
                                            events=[event("late")]), NOW)
    now = await b.store.corrections.get(c.correction_id)
    assert now is not None and now.version == 2 and now.correction.status is S.ANALYZING
    # Neither losing write left an event behind.
    assert [p.message.subject for p in await b.store.outbox.pending_for(c.correction_id)] \
        == ["test.p", "test.a"]


async def test_corrections_are_listed_in_arrival_order(b: Backend) -> None:
    tree = await chain(b, 4)
    later = await pending(b, tree, 3, arrival=20)
    first = await pending(b, tree, 1, arrival=10)
    done = await pending(b, tree, 2, arrival=30)
    await b.store.writer.commit(Changes(done.transition(S.CANCELLED, NOW), 1), NOW)
    plan = tree[0].plan_id
    assert [c.correction_id for c in await b.store.corrections.find(plan)] == \
        [first.correction_id, later.correction_id, done.correction_id]
    assert [v.correction.correction_id for v in await b.store.corrections.unfinished(plan)] \
        == [first.correction_id, later.correction_id]
    assert [c.correction_id for c in await b.store.corrections.find(
        plan, S.CANCELLED)] == [done.correction_id]
    plans, _ = await b.store.corrections.plans_with_unfinished()
    assert plan in plans
    # The runner reads only the head of each unfinished status.
    heads = await b.store.corrections.heads(plan)
    assert [v.correction.correction_id for v in heads] == [first.correction_id]
    analyzing = later.transition(S.ANALYZING, NOW)
    await b.store.writer.commit(Changes(analyzing, 1), NOW)
    heads = await b.store.corrections.heads(plan)
    assert [(v.correction.correction_id, v.correction.status) for v in heads] == [
        (first.correction_id, S.PENDING), (later.correction_id, S.ANALYZING)]


async def test_the_sweep_pages_through_every_plan_with_unfinished_corrections(
        b: Backend) -> None:
    plans = []
    for _ in range(7):
        tree = await chain(b, 2)
        await pending(b, tree, 1, arrival=1)
        await pending(b, tree, 1, arrival=2)  # two per plan: a page counts documents
        plans.append(tree[0].plan_id)
    seen: list[str] = []
    after: str | None = None
    for _ in range(20):
        page, after = await b.store.corrections.plans_with_unfinished(after, limit=3)
        seen += page
        if after is None:
            break
    assert sorted(set(seen) & set(plans)) == sorted(plans)
    assert len(seen) == len(set(seen))  # none twice


# --- attempts: foreign keys and conditional state ---------------------------------------


async def test_an_attempt_must_name_what_exists_and_the_step_is_all_or_nothing(
        b: Backend) -> None:
    tree = await chain(b)
    c = await pending(b, tree)
    analyzing = c.transition(S.ANALYZING, NOW)
    orphan = CorrectionAttemptRecord.for_correction(c, NOW).model_copy(
        update={"original_decision_id": new_id()})
    with pytest.raises(ForeignKeyViolation, match="original_decision_id"):
        await b.store.writer.commit(Changes(analyzing, 1, attempts=[AttemptChange(orphan, None)],
                                            events=[event("x")]), NOW)
    v = await b.store.corrections.get(c.correction_id)
    assert v is not None and v.version == 1  # the correction's write went with it
    assert await b.store.attempts.list_by_correction(c.correction_id) == []
    assert len(await b.store.outbox.pending_for(c.correction_id)) == 1


async def test_an_attempt_changes_only_from_the_state_it_was_read_in(b: Backend) -> None:
    tree = await chain(b)
    c = await pending(b, tree)
    running = CorrectionAttemptRecord.for_correction(c, NOW).transition(A.EXECUTING, NOW)
    await b.store.writer.commit(Changes(c, 1, attempts=[AttemptChange(running, None)]), NOW)
    failed = running.transition(A.FAILED, NOW, error="boom")
    await b.store.writer.commit(Changes(c, 2, attempts=[AttemptChange(failed, A.EXECUTING)]),
                                NOW)
    with pytest.raises(ConcurrentChange):  # already FAILED: a second runner loses
        await b.store.writer.commit(Changes(c, 3, attempts=[AttemptChange(
            running.transition(A.COMPLETE, NOW, new_decision_id=tree[2].decision_id),
            A.EXECUTING)]), NOW)
    assert [a.state for a in await b.store.attempts.list_by_correction(c.correction_id)] \
        == [A.FAILED]


# --- leases ------------------------------------------------------------------------------


async def test_a_plan_lease_has_one_holder_until_it_expires(b: Backend) -> None:
    leases, plan = b.store.leases, new_id()
    assert leases.ttl == timedelta(seconds=5)
    assert await leases.acquire(plan, "a")
    assert await leases.acquire(plan, "a")  # its own again
    assert not await leases.acquire(plan, "b")
    assert await leases.live([plan, new_id()]) == {plan}
    assert await leases.renew(plan, "a")
    assert not await leases.acquire(plan, "b")  # renewed
    await b.expire_lease(plan)
    assert await leases.live([plan]) == set()
    assert await leases.acquire(plan, "b")  # expired: taken
    assert not await leases.renew(plan, "a")
    await leases.release(plan, "a")  # not a's to release
    assert await b.raw.leases.holder(plan) == "b"
    await leases.release(plan, "b")
    assert await b.raw.leases.holder(plan) is None


async def test_a_step_commits_only_under_its_lease(b: Backend) -> None:
    tree = await chain(b)
    c = await pending(b, tree)
    plan = tree[0].plan_id
    assert await b.store.leases.acquire(plan, "runner")
    analyzing = c.transition(S.ANALYZING, NOW)
    await b.store.writer.commit(Changes(analyzing, 1, lease_owner="runner"), NOW)
    await b.expire_lease(plan)
    assert await b.store.leases.acquire(plan, "successor")
    with pytest.raises(LeaseLost):
        await b.store.writer.commit(Changes(analyzing.transition(S.CANCELLED, NOW), 2,
                                            lease_owner="runner", events=[event("x")]), NOW)
    v = await b.store.corrections.get(c.correction_id)
    assert v is not None and v.correction.status is S.ANALYZING


# --- the outbox --------------------------------------------------------------------------


async def test_the_outbox_keeps_each_keys_events_in_commit_order(b: Backend) -> None:
    tree = await chain(b)
    c = await pending(b, tree)
    e1, e2 = event("one"), event("two")
    await b.store.writer.commit(Changes(c.transition(S.ANALYZING, NOW), 1, events=[e1, e2]),
                                NOW + timedelta(seconds=1))
    mine = await b.store.outbox.pending_for(c.correction_id)
    assert [p.message.subject for p in mine] == ["test.p", "test.one", "test.two"]
    assert mine[1].message == e1 and mine[1].source_id == c.correction_id
    assert [p.message.subject for p in await b.store.outbox.pending(
        NOW + timedelta(seconds=1))] == ["test.p"]
    await b.store.outbox.delete([p.message.msg_id for p in mine[:2]])
    assert [p.message for p in await b.store.outbox.pending_for(c.correction_id)] == [e2]
    with pytest.raises(DuplicateRecord):  # a Nats-Msg-Id is outboxed once
        await b.store.writer.commit(Changes(c.transition(S.ANALYZING, NOW), 2, events=[e2]),
                                    NOW)


# --- the tree: impact, revert, append ----------------------------------------------------


async def scene(b: Backend) -> tuple[list[Decision], list[Decision]]:
    """root -> a -> T -> (b -> c, spawn -> child plan (r2 -> x)); T's subtree is 6."""
    plan, child = new_id(), new_id()
    r = d(plan, None)
    a = d(plan, r.decision_id)
    t = d(plan, a.decision_id, "implementation_choice",
          artifacts_produced=[{"artifact_path": "src/x.py", "artifact_type": "file"}])
    x1 = d(plan, t.decision_id, "tool_invocation")
    x2 = d(plan, x1.decision_id, "validation_response")
    spawn = d(plan, t.decision_id, "subplan_spawn", downstream_plan_ids=[child])
    r2 = d(child, None)
    c1 = d(child, r2.decision_id)
    return await b.load([r, a, t, x1, x2, spawn]), await b.load([r2, c1])


async def test_the_impact_walk_is_the_same_on_both(b: Backend) -> None:
    tree, child = await scene(b)
    impact = await b.store.impact.impact(tree[2].decision_id)
    assert impact.affected_decision_ids == [tree[2].decision_id, tree[3].decision_id,
                                            tree[5].decision_id, tree[4].decision_id,
                                            child[0].decision_id, child[1].decision_id]
    assert impact.affected_child_plan_ids == [child[0].plan_id]
    assert impact.affected_files[0] == "src/x.py"
    capped = await b.store.impact.impact(tree[2].decision_id, limit=2)
    assert capped.exceeds_limit
    with pytest.raises(TargetNotFound):
        await b.store.impact.impact(new_id())


async def test_a_revert_supersedes_the_subtree_and_rolls_back_child_plans(b: Backend) -> None:
    tree, child = await scene(b)
    target = tree[2]
    c = await pending(b, tree, 2)
    impact = await b.store.impact.impact(target.decision_id)
    revert = revert_writes(c.request(), target, impact, new_decision_id=new_id(),
                         sequence_number=0, at=NOW)
    applied = c.transition(S.ANALYZING, NOW).transition(S.EXECUTING, NOW)
    w = await b.store.writer.commit(Changes(applied, 1, revert=revert), NOW)
    [new] = w.new_decisions
    assert new.sequence_number == len(tree)  # the plan's next number
    stored = await b.store.decisions.get(target.decision_id)
    assert stored is not None and stored.superseded_by == new.decision_id
    assert stored.superseded_by_correction == c.correction_id
    assert (await b.store.plans.statuses([child[0].plan_id])) == {
        child[0].plan_id: PlanStatus.ROLLED_BACK}
    record = await b.store.plans.get(child[0].plan_id)
    assert record is not None and record.rolled_back_by == c.correction_id
    # A second revert from the same impact: what it would supersede is superseded already.
    again = revert_writes(c.request(), target, impact, new_decision_id=new_id(),
                        sequence_number=0, at=NOW)
    with pytest.raises(ConcurrentChange):
        await b.store.writer.commit(Changes(applied, 2, revert=again), NOW)
    assert await b.store.decisions.get(again.new_decision.decision_id) is None
    v = await b.store.corrections.get(c.correction_id)
    assert v is not None and v.version == 2


@pytest.mark.parametrize("marked", [False, True])
async def test_a_revert_fails_on_a_decision_recorded_under_it_since_the_walk(
        b: Backend, marked: bool) -> None:
    """Also when the walk was marked with the plan's counter: the late decision moved it."""
    tree = await chain(b, 3)
    c = await pending(b, tree, 1)
    mark = await b.store.impact.sequence_mark(tree[0].plan_id)
    assert mark == len(tree)
    impact = await b.store.impact.impact(tree[1].decision_id)
    late = Decision.model_validate(decision(tree[0].plan_id, tree[2].decision_id))
    await b.recorded.insert_recorded([Candidate(1, late, content_hash(late))], NOW)
    revert = revert_writes(c.request(), tree[1], impact, new_decision_id=new_id(),
                           sequence_number=0, at=NOW,
                           walked_at_sequence=mark if marked else None)
    with pytest.raises(ConcurrentChange):
        await b.store.writer.commit(Changes(c, 1, revert=revert), NOW)
    t = await b.store.decisions.get(tree[1].decision_id)
    assert t is not None and t.superseded_by is None


async def test_a_revert_marked_before_its_walk_commits_when_nothing_was_recorded_since(
        b: Backend) -> None:
    tree = await chain(b, 4)
    c = await pending(b, tree, 1)
    mark = await b.store.impact.sequence_mark(tree[0].plan_id)
    impact = await b.store.impact.impact(tree[1].decision_id)
    revert = revert_writes(c.request(), tree[1], impact, new_decision_id=new_id(),
                           sequence_number=0, at=NOW, walked_at_sequence=mark)
    assert not revert.may_have_late_decisions(mark)
    w = await b.store.writer.commit(Changes(c, 1, revert=revert), NOW)
    assert [n.sequence_number for n in w.new_decisions] == [mark]
    for gone in tree[1:]:
        stored = await b.store.decisions.get(gone.decision_id)
        assert stored is not None and stored.superseded_by == revert.new_decision.decision_id
    assert await b.store.impact.sequence_mark(new_id()) == 0


async def test_an_append_writes_a_child_plan_its_root_and_the_intervention(
        b: Backend) -> None:
    tree = await chain(b, 3)
    target = tree[1]
    c = Correction.from_request(request(tree[0].plan_id, target.decision_id, "append"), NOW)
    await b.store.writer.commit(Changes(c, None), NOW)
    child_plan = new_id()
    append = append_writes(c.request(), target, child_plan_id=child_plan,
                         child_root_decision_id=new_id(), intervention_decision_id=new_id(),
                         sequence_number=0, at=NOW, project=None, action_template=None)
    w = await b.store.writer.commit(Changes(c, 1, append=append,
                                            announce=lambda x: [event(x.decision_id)]), NOW)
    intervention, child_root = w.new_decisions
    assert intervention.sequence_number == 3 and child_root.sequence_number == 0
    record = await b.store.plans.get(child_plan)
    assert record is not None and record.parent_plan_id == tree[0].plan_id
    assert record.spawned_from_decision_id == append.child_plan.spawned_from_decision_id
    assert set(await b.store.decisions.get_many([intervention.decision_id,
                                                 child_root.decision_id])) == {
        intervention.decision_id, child_root.decision_id}
    assert [p.message.subject for p in await b.store.outbox.pending_for(c.correction_id)] \
        == [f"test.{intervention.decision_id}", f"test.{child_root.decision_id}"]
    assert (await b.store.plans.ancestors([child_plan])) == {child_plan: (tree[0].plan_id,)}


# --- the recorder's batch (moved from tests/integration/test_store.py) -------------------


def cand(raw: dict[str, object], seq: int = 0) -> Candidate:
    model = Decision.model_validate(raw)
    return Candidate(seq, model, content_hash(model))


async def test_insert_assigns_dense_sequence_per_plan(b: Backend) -> None:
    a, c = plan_tree(5, seed=1), plan_tree(4, seed=2)
    await b.recorded.insert_recorded([cand(x) for x in a[:3]] + [cand(x) for x in c], NOW)
    await b.recorded.insert_recorded([cand(x) for x in a[3:]], NOW)
    for tree in (a, c):
        stored = await b.raw.decisions.in_sequence(tree[0]["plan_id"])
        assert [x.sequence_number for x in stored] == list(range(len(tree)))
        assert [x.decision_id for x in stored] == [x["decision_id"] for x in tree]


async def test_a_batch_commits_only_under_its_partitions_lease(b: Backend) -> None:
    """A recorder that stalled past its partition's lease wakes up with a batch in hand:
    once another replica took the lease, the batch writes nothing (LeaseLost). Until
    then, expired or not, its batches are its own."""
    partition, r = f"role:recorder-{new_id()}", root()
    mine = LeaseFence(partition, "stalled")
    assert await b.raw.leases.acquire(partition, "stalled", fenced=True)
    assert await b.recorded.insert_recorded([cand(r)], NOW, fence=mine) is not None
    await b.expire_lease(partition)  # expired, nobody took it: still the only writer
    assert await b.recorded.insert_recorded([cand(decision(r["plan_id"], r["decision_id"]))],
                                            NOW, fence=mine) is not None
    assert await b.raw.leases.acquire(partition, "successor", fenced=True)
    late = decision(r["plan_id"], r["decision_id"])
    with pytest.raises(LeaseLost):
        await b.recorded.insert_recorded([cand(late)], NOW, fence=mine)
    assert len(await b.raw.decisions.in_sequence(r["plan_id"])) == 2
    theirs = LeaseFence(partition, "successor")
    assert await b.recorded.insert_recorded([cand(late)], NOW, fence=theirs) is not None
    assert [x.sequence_number for x in await b.raw.decisions.in_sequence(r["plan_id"])] \
        == [0, 1, 2]
    with pytest.raises(LeaseLost):  # a lease never taken fenced fences nothing
        await b.recorded.insert_recorded([cand(root())], NOW,
                                         fence=LeaseFence(f"role:recorder-{new_id()}", "x"))


async def test_a_second_root_and_a_concurrent_writer_are_reported_as_raced(
        b: Backend) -> None:
    r = root()
    assert await b.recorded.insert_recorded([cand(r)], NOW) is not None
    assert await b.recorded.insert_recorded([cand(root(r["plan_id"]))], NOW) is None
    assert await b.recorded.insert_recorded([cand(r)], NOW) is None
    assert len(await b.raw.decisions.in_sequence(r["plan_id"])) == 1


async def test_the_facts_of_a_batch(b: Backend) -> None:
    tree = await chain(b, 3)
    r = cand(root())
    await b.recorded.insert_recorded([r], NOW)
    child = cand(decision(tree[0].plan_id, tree[2].decision_id), 7)
    facts = await b.recorded.facts_for([child, r])
    assert facts.plan_of == {tree[2].decision_id: tree[0].plan_id}
    assert set(facts.existing) == {r.decision.decision_id}
    assert facts.existing[r.decision.decision_id].content_hash == r.content_hash
    assert facts.root_of_plan == {r.decision.plan_id: r.decision.decision_id}
    assert facts.epochs.get(tree[0].plan_id, 0) == 0
    assert not facts.blocked_plans and not facts.superseded


# --- dead letters -------------------------------------------------------------------------


async def test_a_dead_letter_is_kept_once(b: Backend) -> None:
    letter = DeadLetter.of_message(
        id=f"DECISIONS:{new_id()}", subject="decisions.recorded.x", headers={}, data=b"{",
        plan_id=None, decision_id=None, rejected_at=NOW, delivered=1,
        errors=[RuleViolation(rule=Rule.SCHEMA, field="body", message="not JSON")])
    await b.store.dead_letters.keep([letter])
    await b.store.dead_letters.keep([letter, letter])
    assert await b.raw.dead_letters.get(letter.id) == letter
    assert [x.id for x in await b.raw.dead_letters.list()] == [letter.id]


async def test_a_retried_dead_letter_is_deleted_once(b: Backend) -> None:
    """The shelf the dead-letter retry reads and deletes through (DeadLetterShelf)."""
    shelf: DeadLetterShelf = b.raw.dead_letters
    letter = DeadLetter.of_message(
        id=f"DECISIONS:{new_id()}", subject="decisions.recorded.x",
        headers={MSG_ID_HEADER: new_id()}, data=b"[]", plan_id=None, decision_id=None,
        rejected_at=NOW, delivered=1,
        errors=[RuleViolation(rule=Rule.SCHEMA, message="not an object")])
    await b.store.dead_letters.keep([letter])
    assert await shelf.get(letter.id) == letter
    assert await shelf.delete(letter.id) is True
    assert await shelf.delete(letter.id) is False  # another retry got there first
    assert await shelf.get(letter.id) is None


# --- invariants and violations ---------------------------------------------------------


def violation(plan_id: str, inv: Invariant, severity: Severity = Severity.ERROR,
              **fields: object) -> InvariantViolation:
    return InvariantViolation.model_validate({
        "violation_id": new_id(), "invariant_id": inv.id, "plan_id": plan_id,
        "decision_id": new_id(), "severity": severity, "reported_at": NOW,
        "details": "tests skipped", **fields})


async def test_an_invariant_name_is_unique_per_scope(b: Backend) -> None:
    repo = b.invariant_store.invariants
    inv = Invariant(name="tests-pass", description="run them", scope=InvariantScope.GLOBAL,
                    created_at=NOW)
    await repo.add(inv)
    await repo.add(inv)  # a retry of the same one
    with pytest.raises(DuplicateInvariant):
        await repo.add(Invariant(name="tests-pass", description="other",
                                 scope=InvariantScope.GLOBAL, created_at=NOW))
    scoped = Invariant(name="tests-pass", description="p", scope=InvariantScope.PROJECT,
                       scope_target="api", created_at=NOW)
    await repo.add(scoped)
    assert {i.id for i in await repo.inputs_for(projects=["api"])} == {inv.id, scoped.id}
    assert {i.id for i in await repo.inputs_for(projects=["web"])} == {inv.id}
    assert (await repo.require(inv.id.lower())) == inv
    await repo.remove(inv.id)
    with pytest.raises(InvariantNotFound):
        await repo.require(inv.id)


async def test_a_violation_is_recorded_and_resolved_once_with_its_event(b: Backend) -> None:
    inv = Invariant(name="n", description="d", scope=InvariantScope.GLOBAL, created_at=NOW)
    await b.invariant_store.invariants.add(inv)
    plan = new_id()
    v = violation(plan, inv)
    seen: list[bool] = []

    def event_for(x: InvariantViolation, blocked: bool) -> OutgoingEvent:
        seen.append(blocked)
        return event(f"{x.violation_id}.{x.resolved_at is not None}")

    repo = b.invariant_store.violations
    assert await repo.record(v, event_for, NOW)
    assert not await repo.record(v, event_for, NOW)  # a redelivery
    with pytest.raises(ViolationConflict):
        await repo.record(v.model_copy(update={"details": "other"}), event_for, NOW)
    assert await repo.blocked_plans([plan, new_id()]) == {plan}
    done = await repo.resolve(v.violation_id, "bob", NOW, event_for)
    assert done.resolved_by == "bob"
    with pytest.raises(ViolationAlreadyResolved):
        await repo.resolve(v.violation_id, "bob", NOW, event_for)
    assert await repo.blocked_plans([plan]) == set()
    assert seen == [True, False]  # blocked after the report, free after the resolution
    assert [p.order for p in await b.invariant_store.outbox.pending_for(v.violation_id)] \
        == [0, 1000]
