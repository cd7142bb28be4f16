"""Plan lineage (ADR 0020), over NATS with `python -m workers`: a decision cannot claim an
unrelated plan or name its decisions, and a revert never reaches a plan that was merely
named, even in data recorded before the claim rules existed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from store.database import Document
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.integration.correction_support import request
from tests.integration.test_corrections_e2e import cworkers, publish, wait_terminal
from tests.integration.wire import events, publish_all

pytestmark = pytest.mark.e2e
__all__ = ["cworkers"]  # the fixture, used by name



def at(minutes: int) -> str:
    """Minutes after a start two minutes before the first call: every time lies within
    CREATED_AT_MAX_SKEW_SECONDS of the stream's."""
    start = _START.setdefault("t0", datetime.now(UTC) - timedelta(minutes=2))
    return (start + timedelta(minutes=minutes)).isoformat()


_START: dict[str, datetime] = {}


async def settled(db: AsyncDatabase[Document], ids: list[str], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        stored = await db.decisions.count_documents({"_id": {"$in": ids}})
        refused = await db.dead_letters.count_documents({"decision_id": {"$in": ids}})
        if stored + refused >= len(ids):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("decisions did not settle")


async def test_claiming_an_unrelated_plan_is_refused_and_a_real_spawn_is_recorded(
        cworkers: Any, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    b_root = root(created_at=at(0))
    b_work = decision(b_root["plan_id"], b_root["decision_id"], created_at=at(1))
    a_root = root(created_at=at(2))
    await publish_all(js, [b_root, b_work, a_root])
    await settled(db, [b_root["decision_id"], b_work["decision_id"], a_root["decision_id"]])
    attack = decision(a_root["plan_id"], a_root["decision_id"], "subplan_spawn",
                      downstream_plan_ids=[b_root["plan_id"]], created_at=at(3))
    reach = decision(a_root["plan_id"], a_root["decision_id"],
                     downstream_decision_ids=[b_work["decision_id"]], created_at=at(3))
    child = root(created_at=at(5), parent_plan_id=a_root["plan_id"])
    spawn = decision(a_root["plan_id"], a_root["decision_id"], "subplan_spawn",
                     downstream_plan_ids=[child["plan_id"]], created_at=at(4))
    await publish_all(js, [attack, reach, child, spawn])
    ids = [attack["decision_id"], reach["decision_id"], child["decision_id"],
           spawn["decision_id"]]
    await settled(db, ids)
    letters = {dl["decision_id"]: [e["rule"] for e in dl["errors"]]
               for dl in await db.dead_letters.find().to_list()}
    assert letters == {attack["decision_id"]: ["child_plan_claim"],
                       reach["decision_id"]: ["downstream_in_family"]}
    rejected = {b["decision_id"] for _, b, _ in await events(nc, "decisions.rejected.>", 0.5)}
    assert rejected == set(letters)
    b_plan = await db.plans.find_one({"_id": b_root["plan_id"]})
    assert b_plan is not None and b_plan.get("parent_plan_id") is None
    c_plan = await db.plans.find_one({"_id": child["plan_id"]})
    assert c_plan is not None
    assert (c_plan["parent_plan_id"], c_plan["spawned_from_decision_id"]) == \
        (a_root["plan_id"], spawn["decision_id"])


async def test_a_revert_never_reaches_a_merely_named_plan_in_legacy_data(
        cworkers: Any, nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    """Recorded before the rules: A's decision names B's plan and decision, and A's root
    as a dependent. Reverting it changes only A's subtree."""
    def d(raw: dict[str, Any]) -> Decision:
        return Decision.model_validate({**raw, "artifacts_produced": []})
    b0 = root(created_at=at(0))
    b1 = decision(b0["plan_id"], b0["decision_id"], created_at=at(1))
    a0 = root(created_at=at(2))
    a1 = decision(a0["plan_id"], a0["decision_id"], created_at=at(3))
    a2 = decision(a0["plan_id"], a1["decision_id"], "subplan_spawn", created_at=at(4),
                  downstream_plan_ids=[b0["plan_id"]],
                  downstream_decision_ids=[b1["decision_id"], a0["decision_id"]])
    await load_plan(db, [d(b0), d(b1)])
    await load_plan(db, [d(a0), d(a1), d(a2)])
    req = request(a0["plan_id"], a1["decision_id"])
    await publish(nc, req)
    doc = await wait_terminal(db, req.correction_id)
    assert doc["status"] == "applied", doc.get("error")
    assert sorted(doc["superseded_ids"]) == sorted([a1["decision_id"], a2["decision_id"]])
    assert doc["child_plans_rolled_back"] == []
    untouched = await db.decisions.find(
        {"_id": {"$in": [b0["decision_id"], b1["decision_id"], a0["decision_id"]]}}).to_list()
    assert [x["superseded_by"] for x in untouched] == [None, None, None]
    b_plan = await db.plans.find_one({"_id": b0["plan_id"]})
    assert b_plan is None or b_plan.get("status") == "active"
