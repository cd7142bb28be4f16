"""Invariants follow the plan lineage, against the real servers and workers: an append's
child plan is announced and reconciled (with its parent's PLAN invariants), a parent's
unresolved error violation blocks the child's Execute phase until resolved, and
`agents invariant reconcile` back-fills plans recorded before an invariant existed."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.invariants.model import InvariantScope
from contracts.invariants.reconciliation import enforced_decision_id
from contracts.shared.ids import new_id
from services.invariants import InvariantService
from store.database import Document
from store.invariant_store import InvariantStore
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import (
    Agents,
    agents,
    assert_one_line_error,
    cli_workers,
    seed_plan,
)
from tests.integration.wire import events, publish_all, until, wait_for_count

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e

ENFORCED = {"decision_type": "invariant_enforced"}



async def append(nc: nats.NATS, db: AsyncDatabase[Document], plan_id: str,
                 target: str) -> dict[str, Any]:
    """An append correction over NATS; its applied document once APPLIED."""
    req = CorrectionRequest(plan_id=plan_id, decision_id=target, mode=CorrectionMode.APPEND,
                            guidance="Use a token bucket instead.", requested_by="alice")
    await nc.jetstream().publish(f"corrections.requested.{plan_id}",
                                 req.model_dump_json().encode(),
                                 headers={"Nats-Msg-Id": req.correction_id})
    doc = await until(lambda: db.corrections.find_one(
        {"_id": req.correction_id, "status": "applied"}))
    assert isinstance(doc, dict)
    return doc


async def test_append_child_plan_is_reconciled_and_blocked_by_its_parent(
        cli_workers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    service = InvariantService.from_store(InvariantStore.open(db), JetStreamPublisher(nc))
    tree = await seed_plan(js, db, size=3)
    parent = tree[0]["plan_id"]
    g = await service.add_invariant("no-prod-deletes", "Never delete production data")
    await service.add_invariant("tests", "Tests are optional")
    own = await service.add_invariant("tests", "Every change needs tests",
                                      InvariantScope.PLAN, parent)

    applied = await append(nc, db, parent, tree[1]["decision_id"])
    [child] = applied["child_plans_spawned"]
    child_root = await db.decisions.find_one({"plan_id": child, "parent_decision_id": None})
    assert child_root is not None
    # The child root and the intervention are announced like recorded decisions, and
    # the child's root on decisions.began too ...
    persisted = await events(nc, "decisions.persisted.*", settle=0.3)
    announced = {ev["decision_id"]: h["Nats-Msg-Id"] for _, ev, h in persisted}
    for d in (child_root["_id"], applied["new_decision_id"]):
        assert announced[d] == f"persisted:{d}"
    began = await events(nc, f"decisions.began.{child}", settle=0.3)
    assert [(ev["decision_id"], h["Nats-Msg-Id"]) for _, ev, h in began] == [
        (child_root["_id"], f"began:{child_root['_id']}")]
    # ... so the child plan is reconciled: the parent's PLAN invariant outranks GLOBAL.
    assert await wait_for_count(db, "decisions", 2, query={"plan_id": child, **ENFORCED}) == 2
    got = {d["_id"] async for d in db.decisions.find({"plan_id": child, **ENFORCED})}
    assert got == {enforced_decision_id(child_root["_id"], i) for i in (g.id, own.id)}

    # The parent's unresolved error violation blocks the child's Execute phase.
    violation = new_id()
    await js.publish(f"invariants.violations.{parent}", json.dumps(
        {"violation_id": violation, "invariant_id": g.id, "plan_id": parent,
         "severity": "error", "details": "dropped the prod users table"}).encode(),
        headers={"Nats-Msg-Id": violation})
    await until(lambda: db.invariant_violations.find_one({"_id": violation}))
    execute = decision(child, child_root["_id"], "implementation_choice")
    strategize = decision(child, child_root["_id"], "strategy_choice")
    await publish_all(js, [execute, strategize])
    letter = await until(lambda: db.dead_letters.find_one(
        {"decision_id": execute["decision_id"]}))
    [error] = letter["errors"]
    assert error["rule"] == "reconciliation_blocked"
    assert f"ancestor plan {parent}" in error["message"] and violation in error["message"]
    assert await wait_for_count(db, "decisions", 1,
                                query={"_id": strategize["decision_id"]}) == 1

    await service.resolve_violation(violation)
    later = decision(child, child_root["_id"], "implementation_choice")
    await publish_all(js, [later])
    assert await wait_for_count(db, "decisions", 1, query={"_id": later["decision_id"]}) == 1


async def test_cli_reconcile_backfills_once(cli_workers: InProcessWorkers, agents: Agents,
                                            nc: nats.NATS,
                                            db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    first, second = root(), root()
    await publish_all(js, [first, second])
    assert await wait_for_count(db, "decisions", 2) == 2
    added = (await agents.ok("invariant", "add", "no-prod-deletes", "--description",
                             "Never delete production data", "--json")).json
    expected = {r["plan_id"]: enforced_decision_id(r["decision_id"], added["id"])
                for r in (first, second)}

    one = (await agents.ok("invariant", "reconcile", "--plan", first["plan_id"],
                           "--json")).json
    assert one["published"] == 1
    assert one["plans"] == [{"plan_id": first["plan_id"], "skipped": None,
                             "published": [expected[first["plan_id"]]],
                             "invariants": [added["id"]]}]
    assert await wait_for_count(db, "decisions", 1,
                                query={"_id": expected[first["plan_id"]]}) == 1
    again = (await agents.ok("invariant", "reconcile", "--plan", first["plan_id"],
                             "--json")).json
    assert again["published"] == 0

    everything = (await agents.ok("invariant", "reconcile", "--all", "--json")).json
    assert everything["checked"] == 2 and everything["published"] == 1
    assert [p["published"] for p in everything["plans"]] == [[expected[second["plan_id"]]]]
    assert await wait_for_count(db, "decisions", 2, query=ENFORCED) == 2
    text = (await agents.ok("invariant", "reconcile", "--all")).out
    assert "2 plan(s) checked, 0 decision(s) published" in " ".join(text.split())
    assert await db.dead_letters.count_documents({}) == 0
    unknown = new_id()
    skipped = (await agents.ok("invariant", "reconcile", "--plan", unknown, "--json")).json
    assert skipped["plans"] == [{"plan_id": unknown, "published": [], "invariants": [],
                                 "skipped": "no root prompt_definition recorded"}]
    assert_one_line_error(await agents("invariant", "reconcile"), 2, "--plan ID or --all")
