"""Plan lineage (ADR 0020) and late decisions (ADR 0019) in the store: what the
recorder's transaction itself refuses when its facts went stale (a claim, a root or a
revert committed since they were read)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.recording.message import Candidate, content_hash
from contracts.recording.triage import triage_batch
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.shared.rules import Rule
from contracts.trust.keys import new_user_seed, public_of_seed
from contracts.trust.principals import Principal, PrincipalKey
from contracts.trust.signing import Signature
from contracts.trust.verification import Verified
from store.database import Document
from store.recorder import RecorderRepository
from store.sequences import reserve_sequences
from store.transactions import run_in_transaction
from tests.factories import decision, root

pytestmark = pytest.mark.store
T0 = datetime(2026, 11, 30, tzinfo=UTC)


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def cand(d: dict[str, object], seq: int = 0) -> Candidate:
    model = Decision.model_validate(d)
    return Candidate(seq, model, content_hash(model))


async def two_plans(repo: RecorderRepository) -> tuple[dict[str, object], dict[str, object]]:
    a, b = root(created_at=at(0)), root(created_at=at(0))
    assert await repo.insert_recorded([cand(a), cand(b)], T0) is not None
    return a, b


async def test_two_claims_of_one_plan_read_together_cannot_both_commit(
        db: AsyncDatabase[Document]) -> None:
    repo, other = RecorderRepository(db), RecorderRepository(db)
    a, b = await two_plans(repo)
    child = new_id()
    claim_a = cand(decision(a["plan_id"], a["decision_id"], downstream_plan_ids=[child],
                            created_at=at(5)), 1)
    claim_b = cand(decision(b["plan_id"], b["decision_id"], downstream_plan_ids=[child],
                            created_at=at(5)), 2)
    facts_a, facts_b = await repo.facts_for([claim_a]), await other.facts_for([claim_b])
    assert triage_batch([claim_a], facts_a).accept and triage_batch([claim_b], facts_b).accept
    results = await asyncio.gather(
        repo.insert_recorded([claim_a], T0, facts_a.epochs),
        other.insert_recorded([claim_b], T0, facts_b.epochs))
    assert sorted(r is None for r in results) == [False, True]
    loser = claim_b if results[1] is None else claim_a
    again = triage_batch([loser], await repo.facts_for([loser]))
    assert [v.rule for _, vs in again.reject for v in vs] == [Rule.CHILD_PLAN_CLAIM]


async def test_a_root_older_than_a_claim_committed_since_is_not_written(
        db: AsyncDatabase[Document]) -> None:
    repo = RecorderRepository(db)
    a, _ = await two_plans(repo)
    child = new_id()
    old_root = cand(root(child, created_at=at(1)), 1)
    facts = await repo.facts_for([old_root])
    claim = cand(decision(a["plan_id"], a["decision_id"], downstream_plan_ids=[child],
                          created_at=at(5)), 2)
    assert await repo.insert_recorded([claim], T0) is not None
    assert await repo.insert_recorded([old_root], T0, facts.epochs) is None
    again = triage_batch([old_root], await repo.facts_for([old_root]))
    assert [v.rule for _, vs in again.reject for v in vs] == [Rule.CHILD_PLAN_CLAIM]


async def test_one_stale_root_among_several_writes_none_of_the_batch(
        db: AsyncDatabase[Document]) -> None:
    """The batch's roots go in one write: when one of them meets a claim committed since
    the facts were read, the whole batch plans again, and no other root nor decision of
    it is left behind."""
    repo = RecorderRepository(db)
    a, _ = await two_plans(repo)
    child = new_id()
    fresh = [cand(root(created_at=at(1)), 1 + k) for k in range(4)]
    old_root = cand(root(child, created_at=at(1)), 5)
    batch = [*fresh[:2], old_root, *fresh[2:]]
    facts = await repo.facts_for(batch)
    assert len(triage_batch(batch, facts).accept) == len(batch)
    claim = cand(decision(a["plan_id"], a["decision_id"], downstream_plan_ids=[child],
                          created_at=at(5)), 6)
    assert await repo.insert_recorded([claim], T0) is not None
    assert await repo.insert_recorded(batch, T0, facts.epochs) is None
    ids = [c.decision.decision_id for c in batch]
    assert await db.decisions.count_documents({"_id": {"$in": ids}}) == 0
    plans = [c.decision.plan_id for c in fresh]
    assert await db.plans.count_documents({"_id": {"$in": plans},
                                           "root_decision_id": {"$ne": None}}) == 0
    # Planned again, the stale root alone is refused and the others are written.
    again = triage_batch(batch, await repo.facts_for(batch))
    assert [c.decision.decision_id for c in again.accept] == [c.decision.decision_id
                                                              for c in fresh]
    assert await repo.insert_recorded(list(again.accept), T0) is not None
    assert await db.plans.count_documents({"_id": {"$in": plans},
                                           "root_decision_id": {"$ne": None}}) == 4


async def test_a_revert_committed_after_the_facts_makes_the_batch_plan_again(
        db: AsyncDatabase[Document]) -> None:
    repo = RecorderRepository(db)
    a, _ = await two_plans(repo)
    late = cand(decision(a["plan_id"], a["decision_id"]), 1)
    facts = await repo.facts_for([late])
    assert triage_batch([late], facts).accept
    # What a revert's transaction does to the plan's counter document.
    await run_in_transaction(db.client, lambda s: reserve_sequences(
        db["plans"], str(a["plan_id"]), 1, T0, s, bump_epoch=True))
    assert await repo.insert_recorded([late], T0, facts.epochs) is None
    assert await db.decisions.find_one({"_id": late.decision.decision_id}) is None


async def test_a_claim_of_a_plan_that_began_since_its_facts_is_not_written(
        db: AsyncDatabase[Document]) -> None:
    """The claim rules are asked again of the child's record in the transaction: its
    root, committed after the claim's facts were read and older than the claim, stands
    and the claim plans again (and is then refused)."""
    repo = RecorderRepository(db)
    a, _ = await two_plans(repo)
    child = new_id()
    claim = cand(decision(a["plan_id"], a["decision_id"], downstream_plan_ids=[child],
                          created_at=at(5)), 1)
    facts = await repo.facts_for([claim])
    assert triage_batch([claim], facts).accept
    assert await repo.insert_recorded([cand(root(child, created_at=at(1)), 2)], T0) is not None
    assert await repo.insert_recorded([claim], T0, facts.epochs) is None
    plan = await db.plans.find_one({"_id": child})
    assert plan is not None and plan.get("parent_plan_id") is None
    again = triage_batch([claim], await repo.facts_for([claim]))
    assert [v.rule for _, vs in again.reject for v in vs] == [Rule.CHILD_PLAN_CLAIM]


async def test_a_root_and_an_older_claim_racing_never_both_stand(
        db: AsyncDatabase[Document]) -> None:
    """Two writers at once: one records a child plan's root, the other a claim of that
    plan made after the root began. Both read their facts before either commits; the
    root's filter and the claim's read in its transaction leave exactly one standing."""
    repo, other = RecorderRepository(db), RecorderRepository(db)
    a, _ = await two_plans(repo)
    for _ in range(5):
        child = new_id()
        old_root = cand(root(child, created_at=at(1)), 1)
        claim = cand(decision(a["plan_id"], a["decision_id"], downstream_plan_ids=[child],
                              created_at=at(5)), 2)
        facts_root, facts_claim = await repo.facts_for([old_root]), await other.facts_for([claim])
        results = await asyncio.gather(
            repo.insert_recorded([old_root], T0, facts_root.epochs),
            other.insert_recorded([claim], T0, facts_claim.epochs))
        assert sorted(r is None for r in results) == [False, True]
        plan = await db.plans.find_one({"_id": child})
        assert plan is not None
        assert (plan.get("root_created_at") is None) != (plan.get("parent_plan_id") is None)


async def test_a_root_signed_by_a_stranger_since_a_claim_s_facts_stops_the_claim(
        db: AsyncDatabase[Document]) -> None:
    """The claiming plan belongs to alice; a root of the child plan signed by mallory,
    committed after the claim's facts were read (and not older than the claim), keeps
    the plan mallory's: the claim is not written."""
    repo = RecorderRepository(db)
    owned = root(created_at=at(0))
    assert await repo.insert_recorded([cand_by(owned, "alice")], T0) is not None
    child = new_id()
    claim = cand_by(decision(owned["plan_id"], owned["decision_id"],
                             downstream_plan_ids=[child], created_at=at(5)), "alice", 1)
    facts = await repo.facts_for([claim])
    assert triage_batch([claim], facts).accept
    assert await repo.insert_recorded([cand_by(root(child, created_at=at(6)), "mallory", 2)],
                                      T0) is not None
    assert await repo.insert_recorded([claim], T0, facts.epochs,
                                      facts.ownership) is None
    plan = await db.plans.find_one({"_id": child})
    assert plan is not None and plan.get("parent_plan_id") is None
    assert plan.get("owner") == "mallory"


def cand_by(d: dict[str, object], name: str, seq: int = 0) -> Candidate:
    """A candidate as verified from `name`'s signature (the rules read who signed)."""
    key = public_of_seed(new_user_seed())
    principal = Principal(name=name, role=Role.AGENT, keys=(PrincipalKey(public=key),))
    model = Decision.model_validate(d)
    return Candidate(seq, model, content_hash(model), Verified(
        principal, Signature(key=key, principal=name, sig="-", salt="-", signed_at=T0,
                             fields={})))
