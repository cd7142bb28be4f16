"""The recorder's first try at a batch of first deliveries skips asking which decisions
are stored already; these are the cases where one is, and the outcome must be what the
full facts give: a publisher's retry is a duplicate (acked, nothing written or
announced), not a new decision and not a refusal by a tree rule."""

from __future__ import annotations

from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.shared.inbound import Inbound
from services.recorder import RecorderService
from services.recorder_policy import Verdict
from store.database import Document
from store.dead_letters import DeadLetterRepository
from store.recorder import RecorderRepository
from tests.factories import decision, encode, headers, root, subject
from tests.integration.wire import events
from workers.streams import ensure_streams

pytestmark = pytest.mark.store


def inbound(d: dict[str, Any], seq: int) -> Inbound:
    """A first delivery (a publisher's retry is a new stream message, delivered once)."""
    return Inbound(subject(d), headers(d), encode(d), stream_sequence=seq, delivered=1)


@pytest.fixture
async def recorder(db: AsyncDatabase[Document], nc: nats.NATS) -> RecorderService:
    await ensure_streams(nc.jetstream())
    return RecorderService(RecorderRepository(db), DeadLetterRepository(db),
                           JetStreamPublisher(nc))


async def test_a_retry_the_batch_would_accept_is_found_by_the_insert(
        recorder: RecorderService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    r = root()
    a = decision(r["plan_id"], r["decision_id"])
    b = decision(r["plan_id"], r["decision_id"])
    first = await recorder.record([inbound(r, 1), inbound(a, 2)])
    assert {v.verdict for v in first.values()} == {Verdict.ACK}
    # `a` again beside a new sibling: every rule accepts both, the insert finds `a`.
    again = await recorder.record([inbound(a, 3), inbound(b, 4)])
    assert again[3].verdict is again[4].verdict is Verdict.ACK
    stored = {d["_id"]: d async for d in db["decisions"].find()}
    assert set(stored) == {r["decision_id"], a["decision_id"], b["decision_id"]}
    assert stored[a["decision_id"]]["recorded_from"] == 2
    assert stored[b["decision_id"]]["sequence_number"] == 2
    persisted = [e["decision_id"] for _, e, _ in await events(nc, "decisions.persisted.>")]
    assert sorted(persisted) == sorted([r["decision_id"], a["decision_id"], b["decision_id"]])
    assert await db["dead_letters"].count_documents({}) == 0


async def test_a_retry_a_tree_rule_would_refuse_is_still_a_duplicate(
        recorder: RecorderService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    r = root()
    a = decision(r["plan_id"], r["decision_id"])
    await recorder.record([inbound(r, 1), inbound(a, 2)])
    # What a revert of r leaves behind: r superseded, the plan's epoch moved.
    await db["decisions"].update_one({"_id": r["decision_id"]},
                                     {"$set": {"superseded_by": a["decision_id"]}})
    await db["plans"].update_one({"_id": r["plan_id"]}, {"$inc": {"epoch": 1}})
    # Without the stored decision in view, a's parent is superseded (parent_superseded);
    # with it, a is what it is: a retry of a decision recorded before the revert.
    again = await recorder.record([inbound(a, 3)])
    assert again[3].verdict is Verdict.ACK
    assert await db["dead_letters"].count_documents({}) == 0
    assert await db["decisions"].count_documents({}) == 2
    assert len(await events(nc, "decisions.persisted.>")) == 2
    assert await events(nc, "decisions.rejected.>") == []
