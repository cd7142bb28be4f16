"""The search indexer (store.search_index) against the real server: the recorder leaves
a queue, the indexer works it off in bounded steps, indexing twice changes nothing, an
erasure and a retention removal are reflected whichever runs first, a worker that stops
half-way is followed by another that finishes, and a queue document that cannot be
indexed ends as a counted failure instead of being retried for ever."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.decisions.search import SearchFilter
from contracts.recording.message import Candidate, content_hash
from contracts.shared.ids import new_id
from services.search import search
from store.database import DECISION_SEARCH, PLAN_LOCKS, SEARCH_QUEUE, Document
from store.erasure import ErasureRepository
from store.leases import Leases
from store.mongo_store import MongoStore
from store.retention import RetentionStore
from store.search_index import MAX_ATTEMPTS, SearchIndex
from tests.factories import decision, plan_tree, root
from workers.search_indexer import LEASE_KEY, drain, search_index_loop

pytestmark = pytest.mark.store

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def cand(raw: dict[str, object]) -> Candidate:
    model = Decision.model_validate(raw)
    return Candidate(0, model, content_hash(model))


async def record(ms: MongoStore, decisions: list[dict[str, object]], per_batch: int) -> None:
    """Through the recorder's own write path, `per_batch` decisions per transaction."""
    for i in range(0, len(decisions), per_batch):
        assert await ms.recorder.insert_recorded(
            [cand(x) for x in decisions[i:i + per_batch]], NOW) is not None


async def texts(ms: MongoStore, text: str) -> list[str]:
    page = await search(ms, SearchFilter(text=text))
    return [h.found.decision.decision_id for h in page.hits]


async def test_a_backlog_is_indexed_in_bounded_steps(db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    tree = plan_tree(60, seed=3)
    await record(ms, tree, per_batch=2)
    assert await db[SEARCH_QUEUE].count_documents({}) == 30
    assert await db[DECISION_SEARCH].count_documents({}) == 0
    assert await texts(ms, tree[0]["question"]) == []  # not yet indexed: not found
    index = SearchIndex(db)
    backlog = await index.backlog()
    assert (backlog.pending, backlog.failed) == (30, 0) and backlog.oldest is not None

    first = await index.step(batch=20)
    assert (first.queued, first.indexed, first.failed) == (20, 40, 0)
    leases = Leases(db, 10)
    assert await leases.acquire(LEASE_KEY, "w1")
    assert await drain(index, leases, "w1") == 20
    assert await db[DECISION_SEARCH].count_documents({}) == 60
    assert await db[SEARCH_QUEUE].count_documents({}) == 0
    assert (await index.backlog()).pending == 0
    assert tree[0]["decision_id"] in await texts(ms, tree[0]["question"])


async def test_indexing_again_changes_nothing(db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    tree = plan_tree(5, seed=4)
    await record(ms, tree, per_batch=5)
    queued = await db[SEARCH_QUEUE].find().to_list()
    index = SearchIndex(db)
    assert (await index.step()).indexed == 5
    before = await db[DECISION_SEARCH].find().sort("_id", 1).to_list()
    # The same queue document again, as after a crash between the entries and its delete.
    await db[SEARCH_QUEUE].insert_many(queued)
    step = await index.step()
    assert (step.queued, step.indexed) == (1, 0)
    assert await db[DECISION_SEARCH].find().sort("_id", 1).to_list() == before


async def test_a_stopped_indexer_is_followed_by_another(db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    tree = plan_tree(40, seed=5)
    await record(ms, tree, per_batch=1)
    leases = Leases(db, 10)
    assert await leases.acquire(LEASE_KEY, "first")
    assert await drain(SearchIndex(db), leases, "first", steps=1) == 20  # then it dies
    assert not await leases.acquire(LEASE_KEY, "second")  # held until it runs out
    await leases.release(LEASE_KEY, "first")              # (or is handed back)
    assert await leases.acquire(LEASE_KEY, "second")
    assert await drain(SearchIndex(db), leases, "second") == 20
    assert await db[DECISION_SEARCH].count_documents({}) == 40


async def test_an_erasure_cuts_the_entry_before_or_after_indexing(
        db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    top = root()
    early = decision(top["plan_id"], top["decision_id"], question="Which vault for zebras?",
                     agent={"name": "vault-agent"})
    late = decision(top["plan_id"], top["decision_id"], question="Which vault for okapis?",
                    agent={"name": "vault-agent"})
    await record(ms, [top, early], per_batch=2)
    index = SearchIndex(db)
    await index.step()                      # `early` indexed, then erased
    await record(ms, [late], per_batch=1)   # `late` erased before the indexer gets to it
    erasures = ErasureRepository(db)
    for target in (early, late):
        reach = await erasures.reach(decision_id=str(target["decision_id"]))
        await erasures.erase({"_id": new_id(), "by": "op", "reason": "test"}, reach, NOW)
    assert (await index.step()).indexed == 0  # its queued entry finds the cut one there
    for target in (early, late):
        stored = await db[DECISION_SEARCH].find_one({"_id": target["decision_id"]})
        assert stored is not None
        assert sorted(stored["tokens"]) == ["agent:vault-agent", "type:strategy_choice"]
    assert await texts(ms, "vault") == []
    by_agent = await search(ms, SearchFilter(agent="vault-agent"))
    assert len(by_agent.hits) == 2


async def test_retention_removes_entries_and_orphans_are_dropped(
        db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    gone, kept = plan_tree(4, seed=6), plan_tree(3, seed=7)
    for t in (gone, kept):
        for x in t:
            x["question"] = "Which carrier pigeon?"
    await record(ms, gone + kept, per_batch=7)
    index = SearchIndex(db)
    await index.step()
    queued = await db[SEARCH_QUEUE].count_documents({})
    counts = await RetentionStore(db).remove([str(gone[0]["plan_id"])], {"_id": new_id()})
    assert counts[DECISION_SEARCH] == 4 and queued == 0
    assert set(await texts(ms, "pigeon")) == {x["decision_id"] for x in kept}
    # An entry written just after its decision went (the indexer read it before the
    # removal) is never shown, and the search that meets it drops it.
    await db[DECISION_SEARCH].insert_one({"_id": "~orphan", "plan_id": gone[0]["plan_id"],
                                          "tokens": ["pigeon"]})
    assert set(await texts(ms, "pigeon")) == {x["decision_id"] for x in kept}
    assert await db[DECISION_SEARCH].count_documents({"_id": "~orphan"}) == 0


async def test_a_queue_document_that_cannot_be_indexed_ends_as_failed(
        db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    tree = plan_tree(3, seed=8)
    await record(ms, tree[:1], per_batch=1)
    queued = await db[SEARCH_QUEUE].find_one({})
    assert queued is not None
    # Whatever lands in the queue: an entry the indexer cannot use stops only its own
    # queue document, and only for MAX_ATTEMPTS steps.
    await db[SEARCH_QUEUE].update_one({"_id": queued["_id"]},
                                      {"$push": {"entries": {"_id": {"$where": "1"}}}})
    await record(ms, tree[1:], per_batch=2)
    index = SearchIndex(db)
    steps = [await index.step() for _ in range(MAX_ATTEMPTS)]
    assert [s.failed for s in steps] == [0] * (MAX_ATTEMPTS - 1) + [1]
    assert await index.step() == (await index.step())  # nothing left but the failed one
    failed = await db[SEARCH_QUEUE].find_one({})
    assert failed is not None and failed["attempts"] == MAX_ATTEMPTS
    assert failed["failed_at"] is not None and "queue entry" in failed["error"]
    backlog = await index.backlog()
    assert (backlog.pending, backlog.failed) == (0, 1)
    # Its good entry and the other document's were indexed all the same.
    assert await db[DECISION_SEARCH].count_documents({}) == 3


async def test_the_loop_writes_nothing_while_idle_and_indexes_what_arrives(
        db: AsyncDatabase[Document]) -> None:
    ms = MongoStore(db)
    task = asyncio.create_task(search_index_loop(SearchIndex(db), Leases(db, 10), "w1", 0.05))
    try:
        await asyncio.sleep(0.5)
        assert await db[PLAN_LOCKS].count_documents({"_id": LEASE_KEY}) == 0
        tree = plan_tree(4, seed=9)
        await record(ms, tree, per_batch=2)
        for _ in range(200):
            if await db[DECISION_SEARCH].count_documents({}) == 4:
                break
            await asyncio.sleep(0.05)
        assert await db[DECISION_SEARCH].count_documents({}) == 4
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert await db[PLAN_LOCKS].count_documents({"_id": LEASE_KEY}) == 0  # handed back
