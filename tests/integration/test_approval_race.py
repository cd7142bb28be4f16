"""Two verdicts on one approval at once, and a verdict racing the expiry, against the
real database: the approval moves on exactly once (the update is conditional on
`requested` inside the transaction), its hold follows the winner, and one set of events
goes to the outbox."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from pymongo.asynchronous.database import AsyncDatabase

from contracts.invariants.approvals import Approval, ApprovalStatus, outbox_key
from contracts.invariants.holds import Hold, HoldStatus
from contracts.shared.ids import new_id
from store.approvals import ApprovalRepository, open_approvals
from store.database import Document
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
