"""The decisions repository against the real server: what only MongoDB shows (the
contract both stores keep is tests/contract/test_store_contract.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from contracts.decisions.model import Decision
from contracts.recording.message import Candidate, content_hash
from store.database import Document
from store.decisions import DecisionRepository, to_document
from store.recorder import RecorderRepository
from tests.factories import decision, root

pytestmark = pytest.mark.store
NOW = datetime(2026, 11, 30, tzinfo=UTC)


def cand(d: dict[str, object], seq: int = 0) -> Candidate:
    model = Decision.model_validate(d)
    return Candidate(seq, model, content_hash(model))


async def test_reads_the_trees(db: AsyncDatabase[Document]) -> None:
    repo = DecisionRepository(db)
    r = root()
    plan = r["plan_id"]
    s1 = decision(plan, r["decision_id"])
    s2 = decision(plan, r["decision_id"])
    i1 = decision(plan, s1["decision_id"], "implementation_choice")
    t1 = decision(plan, i1["decision_id"], "tool_invocation")
    tree = [r, s1, s2, i1, t1]
    await RecorderRepository(db).insert_recorded([cand(d) for d in tree], NOW)
    await db["decisions"].update_one({"_id": s2["decision_id"]},
                                     {"$set": {"superseded_by": t1["decision_id"]}})

    got = await repo.get(i1["decision_id"])
    assert got is not None and got.model_dump(exclude={"sequence_number", "created_at"}) == \
        Decision.model_validate(i1).model_dump(exclude={"sequence_number", "created_at"})
    assert [d.decision_id for d in await repo.current_tree(plan)] == \
        [d["decision_id"] for d in tree if d is not s2]
    assert len(await repo.full_tree(plan)) == 5
    assert [d.decision_id for d in await repo.subtree(s1["decision_id"])] == \
        [s1["decision_id"], i1["decision_id"], t1["decision_id"]]
    assert [d.decision_id for d in await repo.children(r["decision_id"])] == [s1["decision_id"]]
    assert len(await repo.children(r["decision_id"], current_only=False)) == 2
    assert await repo.get("01JD7X4Q9R8N2V5K3M6P1T0W7Y") is None


async def test_the_server_refuses_a_reused_sequence(db: AsyncDatabase[Document]) -> None:
    """The index under the contract's dense numbering (the rest of this file's former
    tests, a second root and a concurrent writer, are in tests/contract/)."""
    repo = RecorderRepository(db)
    r = root()
    await repo.insert_recorded([cand(r)], NOW)
    other = Decision.model_validate(decision(r["plan_id"], r["decision_id"]))
    with pytest.raises(DuplicateKeyError):
        await db["decisions"].insert_one(
            to_document(other.model_copy(update={"sequence_number": 0})))
