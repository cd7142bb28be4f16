"""A plan's ancestors from `parent_plan_id` on the plans collection, against the real
database: the chain, the remembered links, a parent recorded later, and the recorder's
batch facts (a grandparent's error violation blocks the grandchild)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.rules import Rule
from store.database import Document
from store.plans import PlanRepository, plan_ancestors
from store.recorder import RecorderRepository
from store.transactions import run_in_transaction
from store.violations import ViolationRepository
from tests.factories import decision, root
from tests.unit.test_recording import candidate

pytestmark = pytest.mark.store
NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def link(db: AsyncDatabase[Document], child: str, parent: str | None) -> None:
    await db.plans.update_one({"_id": child}, {"$set": {"parent_plan_id": parent}},
                              upsert=True)


async def test_ancestors_follow_parent_links_and_remember_only_parents(
        db: AsyncDatabase[Document]) -> None:
    top, mid, leaf, alone = (new_id() for _ in range(4))
    await link(db, leaf, mid)
    await link(db, mid, top)
    await link(db, top, None)
    known: dict[str, str] = {}
    got = await plan_ancestors(db, [leaf, mid, top, alone], known)
    assert got == {leaf: (mid, top), mid: (top,)}
    assert known == {leaf: mid, mid: top}  # "no parent" is never remembered
    # A top-level plan claimed later: its new parent shows, through the remembered chain.
    above = new_id()
    await link(db, top, above)
    assert (await plan_ancestors(db, [leaf], known))[leaf] == (mid, top, above)
    # A cycle in stored data (from before the lineage rules) ends the chain.
    await link(db, above, leaf)
    assert (await plan_ancestors(db, [leaf], {}))[leaf] == (mid, top, above)


async def test_facts_block_a_grandchild_of_a_plan_with_an_error_violation(
        db: AsyncDatabase[Document]) -> None:
    top, mid, leaf = (new_id() for _ in range(3))
    await link(db, leaf, mid)
    await link(db, mid, top)
    violations = ViolationRepository(db)

    def event(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
        return OutgoingEvent(f"x.{v.plan_id}", b"", f"violation:{v.violation_id}")

    v = InvariantViolation(invariant_id=new_id(), plan_id=top, severity=Severity.ERROR,
                           details="dropped a table", reported_at=NOW)
    await violations.record(v, event, NOW)
    repo = RecorderRepository(db)
    r = root(leaf)
    execute = decision(leaf, r["decision_id"], "tool_invocation")
    for _ in range(2):  # the second batch walks the remembered chain
        facts = await repo.facts_for([candidate(r, 1), candidate(execute, 2)])
        assert facts.blocking_ancestors == {leaf: (mid, top)}
        assert facts.blocked_plans == {top: (v.violation_id,)}
        plan = triage_batch([candidate(r, 1), candidate(execute, 2)], facts)
        [(c, [why])] = plan.reject
        assert c.decision.decision_id == execute["decision_id"]
        assert why.rule is Rule.RECONCILIATION_BLOCKED and top in why.message


async def test_roll_back_follows_the_plan_lifecycle(db: AsyncDatabase[Document]) -> None:
    """Active (or known only by its counter) and completed plans are rolled back; a plan
    rolled back already keeps who did it; a plan never recorded gets a record."""
    plans = PlanRepository(db)
    active, counter_only, completed, unknown = (new_id() for _ in range(4))
    first, second = new_id(), new_id()
    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    await db.plans.insert_many([
        {"_id": active, "status": "active", "next_sequence": 3, "epoch": 0},
        {"_id": counter_only, "next_sequence": 1},
        {"_id": completed, "status": "completed", "next_sequence": 2}])
    ids = [active, counter_only, completed, unknown]
    await run_in_transaction(db.client, lambda s: plans.roll_back(ids, first, t1, s))
    await run_in_transaction(db.client, lambda s: plans.roll_back(ids, second, t2, s))
    docs = {d["_id"]: d async for d in db.plans.find({"_id": {"$in": ids}})}
    assert {d["status"] for d in docs.values()} == {"rolled_back"}
    assert {d["rolled_back_by"] for d in docs.values()} == {first}
    assert docs[active]["epoch"] == 1 and docs[active]["next_sequence"] == 3
    assert docs[unknown]["next_sequence"] == 0
