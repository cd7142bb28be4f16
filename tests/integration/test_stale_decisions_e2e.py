"""Late decisions after a revert (ADR 0019), over NATS with `python -m workers`: once a
revert is applied nothing is current under what it removed; late decisions, and
decisions into a rolled-back child plan, are refused with parent_superseded /
plan_rolled_back naming the correction and the decision to resume under; and a revert
racing hundreds of decisions recorded under its subtree leaves no current decision
under a superseded parent."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.factories import decision
from tests.integration.correction_support import request, revert_scene
from tests.integration.test_corrections_e2e import cworkers, publish, wait_terminal
from tests.integration.wire import events, publish_all

pytestmark = pytest.mark.e2e
__all__ = ["cworkers"]  # the fixture, used by name


async def settled(db: AsyncDatabase[Document], ids: list[str], timeout: float = 90.0) -> None:
    """Until every published decision is either stored or dead-lettered."""
    deadline = asyncio.get_running_loop().time() + timeout
    done = 0
    while asyncio.get_running_loop().time() < deadline:
        stored = await db.decisions.count_documents({"_id": {"$in": ids}})
        refused = await db.dead_letters.count_documents({"decision_id": {"$in": ids}})
        done = stored + refused
        if done >= len(ids):
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"only {done} of {len(ids)} decisions settled")


async def orphans(db: AsyncDatabase[Document]) -> list[str]:
    """Current decisions under a superseded (or missing) parent, or in a rolled-back plan."""
    current = await db.decisions.find({"superseded_by": None},
                                      {"parent_decision_id": 1, "plan_id": 1}).to_list()
    ids = {d["_id"] for d in current}
    rolled = {p["_id"] for p in await db.plans.find({"status": "rolled_back"}).to_list()}
    return [d["_id"] for d in current
            if (d.get("parent_decision_id") is not None and d["parent_decision_id"] not in ids)
            or d["plan_id"] in rolled]


async def test_late_decisions_are_refused_naming_correction_and_replacement(
        cworkers: Any, nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    scene = await revert_scene(db, tmp_path / "artifacts")
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    doc = await wait_terminal(db, req.correction_id)
    assert doc["status"] == "applied"
    replacement = doc["new_decision_id"]
    late = decision(scene.plan_id, scene.target.decision_id)          # under the target
    child_root = await db.decisions.find_one({"plan_id": scene.child_plan_id,
                                              "parent_decision_id": None})
    assert child_root is not None
    into_child = decision(scene.child_plan_id, child_root["_id"])    # rolled-back plan
    fine = decision(scene.plan_id, scene.sibling.decision_id)         # still current
    await publish_all(nc.jetstream(), [late, into_child, fine])
    ids = [late["decision_id"], into_child["decision_id"], fine["decision_id"]]
    await settled(db, ids)
    letters = {dl["decision_id"]: dl for dl in await db.dead_letters.find().to_list()}
    assert set(letters) == {late["decision_id"], into_child["decision_id"]}
    assert [e["rule"] for e in letters[late["decision_id"]]["errors"]] == ["parent_superseded"]
    assert [e["rule"] for e in letters[into_child["decision_id"]]["errors"]] == \
        ["plan_rolled_back"]
    for dl in letters.values():
        assert req.correction_id in dl["errors"][0]["message"]
        assert replacement in dl["errors"][0]["message"]
    stored = await db.decisions.find_one({"_id": fine["decision_id"]})
    assert stored is not None and stored["superseded_by"] is None
    rejected = {b["decision_id"]: b for _, b, _ in await events(nc, "decisions.rejected.>")}
    for d in (late, into_child):
        assert rejected[d["decision_id"]]["resume"] == {
            "correction_id": req.correction_id, "replacement_decision_id": replacement,
            "plan_id": scene.plan_id}
    assert await orphans(db) == []


@pytest.mark.slow
async def test_a_revert_racing_hundreds_of_decisions_leaves_none_under_a_superseded_parent(
        cworkers: Any, nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    scene = await revert_scene(db, tmp_path / "artifacts")
    rng = random.Random(8)
    under: dict[str, list[str]] = {scene.plan_id: list(scene.affected[:5]),
                                   scene.child_plan_id: list(scene.affected[5:])}
    published: list[dict[str, Any]] = []
    for _ in range(300):
        plan = rng.choice([scene.plan_id, scene.plan_id, scene.child_plan_id])
        d = decision(plan, rng.choice(under[plan]))
        under[plan].append(d["decision_id"])
        published.append(d)
    js = nc.jetstream()

    async def agents() -> None:
        for i in range(0, len(published), 10):
            await publish_all(js, published[i:i + 10])
            await asyncio.sleep(0.2)

    writing = asyncio.create_task(agents())
    await asyncio.sleep(0.3)
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    await writing
    doc = await wait_terminal(db, req.correction_id, timeout=120)
    await settled(db, [d["decision_id"] for d in published], timeout=120)
    assert doc["status"] == "applied", doc.get("error")
    assert await orphans(db) == []
    refused = await db.dead_letters.find().to_list()
    rules = {e["rule"] for dl in refused for e in dl["errors"]}
    assert rules <= {"parent_superseded", "plan_rolled_back", "parent_exists"}, rules
