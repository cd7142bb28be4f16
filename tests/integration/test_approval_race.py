"""Two verdicts on one approval at once, and a verdict racing the expiry, against the
real database: the approval moves on exactly once (the update is conditional on
`requested` inside the transaction), its hold follows the winner, and one set of events
goes to the outbox. Likewise two judges settling one hold: only the claim holder's
settle and its event commit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.approvals import Approval, ApprovalStatus, outbox_key
from contracts.invariants.hold_wire import outbox_key as hold_outbox_key
from contracts.invariants.holds import Hold, HoldStatus
from contracts.invariants.outcomes import GateEffects
from contracts.shared.ids import new_id
from store.approvals import ApprovalRepository, open_approvals
from store.database import Document
from store.holds import HoldRepository
from store.transactions import run_in_transaction

VERDICTS = (ApprovalStatus.GRANTED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED)


async def _requested(db: AsyncDatabase[Document], now: datetime) -> Approval:
    hold = Hold(decision_id=new_id(), plan_id=new_id(), status=HoldStatus.AWAITING_APPROVAL,
                digest="sha256:" + "a" * 64, created_at=now, updated_at=now)
    await db["decision_holds"].insert_one(
        {"_id": hold.decision_id, **hold.model_dump(mode="python", exclude={"decision_id"})})

    async def write(s: object) -> None:
        await open_approvals(db, [hold], now, timedelta(hours=1), s)  # type: ignore[arg-type]

    await run_in_transaction(db.client, write)
    found = await ApprovalRepository(db).get(hold.decision_id)
    assert found is not None and found.status is ApprovalStatus.REQUESTED
    return found


async def test_a_grant_a_denial_and_the_expiry_at_once_only_one_wins(
        db: AsyncDatabase[Document]) -> None:
    now = datetime.now(UTC)
    for _ in range(3):
        approval = await _requested(db, now)
        # Each writer with its own repository, as two worker replicas would be.
        won = await asyncio.gather(*(ApprovalRepository(db).decide(
            approval.model_copy(update={"status": s, "decided_at": now,
                                        "decided_by": None if s is ApprovalStatus.EXPIRED
                                        else f"op-{s.value}"}), {}, now)
            for s in VERDICTS))
        assert sum(won) == 1, won
        winner = VERDICTS[won.index(True)]
        stored = await ApprovalRepository(db).get(approval.decision_id)
        assert stored is not None and stored.status is winner
        hold = await db["decision_holds"].find_one({"_id": approval.decision_id})
        assert hold is not None and hold["status"] != HoldStatus.AWAITING_APPROVAL.value
        subjects = [d["subject"] async for d in db["outbox"].find(
            {"correction_id": outbox_key(approval.decision_id)})]
        assert sorted(s.rsplit(".", 1)[1] for s in subjects) == sorted(
            ["requested", winner.value]), subjects


async def test_two_judges_settling_one_hold_only_the_claim_holder_wins(
        db: AsyncDatabase[Document]) -> None:
    """A judge whose claim ran out settles while the worker that claimed it after settles
    too, each with its own repository: only the current claim holder's settle commits,
    and one hold event goes to the outbox."""
    now = datetime.now(UTC)
    hold = Hold(decision_id=new_id(), plan_id=new_id(), status=HoldStatus.AWAITING_JUDGE,
                digest="sha256:" + "b" * 64, created_at=now, updated_at=now)
    await db["decision_holds"].insert_one(
        {"_id": hold.decision_id, **hold.model_dump(mode="python", exclude={"decision_id"})})
    first, second = HoldRepository(db), HoldRepository(db)
    assert await first.claim("judge-a", now, timedelta(0)) is not None  # its lease ends now
    claimed = await second.claim("judge-b", now + timedelta(seconds=1), timedelta(minutes=1))
    assert claimed is not None and claimed[1] == 2

    won = await asyncio.gather(
        first.settle(hold, "judge-a", HoldStatus.RELEASED, reasons=[], effects=GateEffects(),
                     now=now),
        second.settle(hold, "judge-b", HoldStatus.REFUSED, reasons=[], effects=GateEffects(),
                      now=now))
    assert won == [False, True]
    stored = await HoldRepository(db).get(hold.decision_id)
    assert stored is not None and stored.status is HoldStatus.REFUSED
    subjects = [d["subject"] async for d in db["outbox"].find(
        {"correction_id": hold_outbox_key(hold.decision_id)})]
    assert [s.rsplit(".", 1)[1] for s in subjects] == ["refused"], subjects
