"""Retention against a real MongoDB: a few thousand plans of mixed statuses and ages, a
dry run that counts what each policy would do, then the run (export first, then
removal by whole families, erasure keeping the tree), with the counts checked in the
store, the export readable by the audit verifier, and the workers' loop doing the same
under its lease."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.retention_settings import RetentionSettings
from bootstrap.settings import Settings
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.retention.erasure import ERASED
from contracts.retention.policies import Policy, parse_policies
from contracts.shared.ids import new_id
from contracts.shared.timestamps import utc_now
from contracts.trust.audit import verify_export
from store.database import Document
from store.decisions import to_document
from store.leases import Leases
from store.mongo_store import MongoStore
from store.retention import RetentionStore
from tests.factories import decision, root
from tests.integration.cli_support import Agents, agents
from tests.integration.wire import until
from workers.retention import retention_loop

__all__ = ["agents"]

POLICIES = json.dumps([
    {"name": "completed", "plans": ["completed"], "older_than_days": 365, "action": "remove",
     "export": True},
    {"name": "rolled-back", "plans": ["rolled_back"], "older_than_days": 30,
     "action": "erase"},
    {"name": "letters", "records": "dead_letters", "older_than_days": 90},
])


def _plan(now: datetime, status: str, days: float, parent: str | None = None
          ) -> tuple[Document, list[Document]]:
    top = root(project="billing", parent_plan_id=parent)
    plan = top["plan_id"]
    child = decision(plan, top["decision_id"], question=f"secret of {plan}")
    at = now - timedelta(days=days)
    docs = [to_document(Decision.model_validate({**d, "created_at": at}).model_copy(
        update={"sequence_number": i})) for i, d in enumerate((top, child))]
    since = {"rolled_back": "rolled_back_at", "completed": "ended_at",
             "active": "created_at"}[status]
    plan_doc = {"_id": plan, "status": status, "created_at": at, since: at,
                "parent_plan_id": parent, "next_sequence": 2, "project": "billing",
                "root_decision_id": top["decision_id"]}
    return plan_doc, docs


async def _load(db: AsyncDatabase[Document], now: datetime, n: int) -> dict[str, Any]:
    """`n` plans, a quarter each: completed over a year ago, completed ten days ago,
    rolled back 40 days ago, active for 500 days; and two families: an old completed
    plan with an active child, and one with an old completed child."""
    kinds = [("completed", 400), ("completed", 10), ("rolled_back", 40), ("active", 500)]
    plans, decisions = [], []
    for i in range(n):
        p, ds = _plan(now, *kinds[i % 4])
        plans.append(p)
        decisions += ds
    held_parent, ds1 = _plan(now, "completed", 400)
    held_child, ds2 = _plan(now, "active", 400, parent=held_parent["_id"])
    gone_parent, ds3 = _plan(now, "completed", 400)
    gone_child, ds4 = _plan(now, "completed", 400, parent=gone_parent["_id"])
    plans += [held_parent, held_child, gone_parent, gone_child]
    decisions += ds1 + ds2 + ds3 + ds4
    await db.plans.insert_many(plans)
    await db.decisions.insert_many(decisions)
    letters = [{"_id": f"DECISIONS:{i}", "subject": "x", "headers": {}, "payload": b"{}",
                "payload_size": 2, "payload_sha256": "0", "errors": [], "delivered": 1,
                "rejected_at": now - timedelta(days=100 if i < 50 else 1)} for i in range(70)]
    await db.dead_letters.insert_many(letters)
    return {"held": held_parent["_id"], "gone": [gone_parent["_id"], gone_child["_id"]]}


@pytest.mark.parametrize("n", [40, pytest.param(3000, marks=pytest.mark.slow)])
async def test_retention_dry_run_then_run(n: int, db: AsyncDatabase[Document], agents: Agents,
                                          tmp_path: Path) -> None:
    now = utc_now()
    q = n // 4
    family = await _load(db, now, n)
    env = {"RETENTION_POLICIES": POLICIES, "RETENTION_EXPORT_DIR": str(tmp_path / "cold"),
           "ARCHIVE_ROOT": str(tmp_path / "archive")}
    before = await db.decisions.count_documents({})
    archived = tmp_path / "archive" / "corrections" / family["gone"][0] / new_id()
    archived.mkdir(parents=True)
    (archived / "manifest.json").write_text("{}")

    dry = (await agents.ok("retention", "run", "--dry-run", "--json", env=env)).json
    counts = {p["policy"]: (p["due"], p["done"], p["held"]) for p in dry["policies"]}
    # 750 old completed plans, the family of two, and the parent whose child is active
    # (held: it cannot go without its child).
    assert counts == {"completed": (q + 3, q + 2, 1), "rolled-back": (q, q, 0),
                      "letters": (50, 50, 0)}
    assert await db.decisions.count_documents({}) == before  # nothing changed
    shown = (await agents.ok("retention", "show", env=env)).out
    assert "completed plans: exported, then removed after 365 days" in shown

    done = (await agents.ok("retention", "run", "--json", env=env)).json
    assert {p["policy"]: p["done"] for p in done["policies"]} == {
        "completed": q + 2, "rolled-back": q, "letters": 50}
    assert await db.plans.count_documents({}) == n + 4 - (q + 2)
    assert await db.decisions.count_documents({}) == before - 2 * (q + 2)
    assert await db.plans.find_one({"_id": family["held"]}) is not None
    assert await db.plans.count_documents({"_id": {"$in": family["gone"]}}) == 0
    assert not archived.exists()  # a removed plan's revert archives go with it
    assert await db.dead_letters.count_documents({}) == 20
    erased = await db.decisions.count_documents({"question": ERASED})
    assert erased == 2 * q  # the rolled-back plans' roots and children, kept as a tree
    assert await db.decisions.count_documents({"erased": {"$exists": True}}) == erased

    # The export holds every removed plan in the audit export format.
    exported = [json.loads(line) for f in sorted((tmp_path / "cold").glob("*.jsonl"))
                for line in f.read_text().splitlines()]
    heads = [x for x in exported if "format" in x]
    assert sum(len(h["plans"]) for h in heads) == q + 2
    assert sum(1 for x in exported if x.get("kind") == "decision") == 2 * (q + 2)
    assert verify_export(heads[0], [x for x in exported if "format" not in x][:2]).records

    again = (await agents.ok("retention", "run", "--dry-run", "--json", env=env)).json
    assert {p["policy"]: p["done"] for p in again["policies"]} == {
        "completed": 0, "rolled-back": 0, "letters": 0}


async def test_the_workers_loop_applies_the_policies_under_a_lease(
        db: AsyncDatabase[Document], mongo_uri: str, db_name: str) -> None:
    now = utc_now()
    p, ds = _plan(now, "rolled_back", 40)
    await db.plans.insert_one(p)
    await db.decisions.insert_many(ds)
    settings = Settings(mongodb_uri=mongo_uri, mongodb_db=db_name, retention=RetentionSettings(
        policies=parse_policies(POLICIES), interval_seconds=0.05))
    store = MongoStore.connect(mongo_uri, db_name)
    task = asyncio.create_task(retention_loop(lambda: store, Leases(db, 1.0), new_id(),
                                              settings))
    try:
        await until(lambda: db.decisions.count_documents({"question": ERASED}), timeout=20)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.close()
    assert await db.erasures.count_documents({"by": "retention"}) >= 1


async def test_due_plans_of_several_statuses_page_in_id_order(
        db: AsyncDatabase[Document]) -> None:
    """A policy over two statuses reads one indexed query per status (ADR 0038) and
    merges them: every due plan once, in ID order, pages of `limit`, nothing else."""
    now = utc_now()
    old = now - timedelta(days=400)
    docs = [{"_id": f"P{i:03d}", "status": status, "ended_at": old, "created_at": old}
            for i, status in enumerate(["completed", "abandoned", "active", "rolled_back"] * 7)]
    docs.append({"_id": "P999", "status": "completed", "ended_at": now, "created_at": old})
    await db.plans.insert_many(docs)
    policy = Policy("old", 365, statuses=(PlanStatus.COMPLETED, PlanStatus.ABANDONED))
    store, pages, after = RetentionStore(db), [], None
    while page := await store.due_plans(policy, now - timedelta(days=365), 5, after):
        pages.append(page)
        after = page[-1]
    want = [d["_id"] for d in docs if d["status"] in ("completed", "abandoned")
            and d["ended_at"] == old]
    assert [len(p) for p in pages] == [5, 5, 4]
    assert [i for p in pages for i in p] == sorted(want)
