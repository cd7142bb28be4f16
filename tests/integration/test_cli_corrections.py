"""`agents plan correct` and `agents correction ...` against the real servers and workers."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from clients.operator import CorrectionClient
from contracts.corrections.changes import Changes
from contracts.corrections.states import CorrectionStatus
from contracts.shared.ids import new_id
from services.archive.writer import Archive
from services.corrections.messages import correction_event
from services.corrections.service import CorrectionService
from store.correction_store import CorrectionStore
from store.database import Document
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import (
    Agents,
    agents,
    assert_one_line_error,
    cli_workers,
    seed_plan,
)
from tests.integration.wire import events

__all__ = ["agents", "cli_workers"]

pytestmark = pytest.mark.e2e


async def test_dry_run_user_errors_and_revert(cli_workers: InProcessWorkers, agents: Agents,
                                              nc: nats.NATS,
                                              db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db)
    plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]

    report = (await agents.ok("plan", "correct", "--mode", "revert", target, "--dry-run",
                              "--json")).json
    assert report["plan_id"] == plan_id and report["impact"]["target_decision_id"] == target
    assert report["impact"]["risk_level"] in {"low", "medium", "high"}
    text = (await agents.ok("plan", "correct", "--mode", "revert", target, "--dry-run")).out
    for line in ("dry run revert of " + target, "nothing was changed", "risk: ",
                 "affected decisions: ", "estimated recompute time: "):
        assert line in text, line
    appended = await agents.ok("plan", "correct", "--mode", "append", target, "--guidance",
                               "Split the work.", "--dry-run")
    for line in ("dry run append of " + target, f"child plan: a new plan under {plan_id}",
                 "invariants it would run under: 0"):
        assert line in appended.out, line
    assert await db.corrections.count_documents({}) == 0

    assert_one_line_error(await agents("plan", "correct", "--mode", "undo", target), 2,
                          "Invalid value for '--mode'")
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", target,
                                       "--guidance", "  "), 2, "--guidance is empty")
    assert_one_line_error(await agents("plan", "correct", "--mode", "append", target,
                                       "--guidance", "x" * 10_001), 2,
                          "--guidance is 10,001 characters; at most 10,000 allowed")
    assert_one_line_error(await agents("plan", "correct", "--mode", "append", target), 2,
                          "--guidance is required for an append")
    unknown = new_id()
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", unknown,
                                       "--guidance", "g"), 1, f"no decision {unknown}")

    done = await agents.ok("plan", "correct", "--mode", "revert", target, "--guidance",
                           "Use a token bucket.", "--wait", "--json")
    outcome = done.json
    assert outcome["status"] == "applied"
    assert [e["to_status"] for e in outcome["events"]] == [
        "pending", "analyzing", "executing", "applied"]
    cid = outcome["correction_id"]

    shown = (await agents.ok("correction", "show", cid, "--json")).json
    assert shown["status"] == "applied" and shown["requested_by"] is None \
        and shown["claimed_by"] == "tester"
    text = (await agents.ok("correction", "show", cid)).out
    assert f"correction {cid} applied" in text and "executing → applied" in text
    listed = (await agents.ok("correction", "list", "--plan", plan_id, "--status", "applied",
                              "--json")).json
    assert [c["correction_id"] for c in listed] == [cid]
    assert cid in (await agents.ok("correction", "list")).out
    [attempt] = (await agents.ok("correction", "attempts", cid, "--json")).json
    assert attempt["state"] == "complete"
    assert "complete" in (await agents.ok("correction", "attempts", cid)).out

    assert_one_line_error(await agents("correction", "cancel", cid), 1,
                          f"cancel refused: correction {cid} is applied")
    assert_one_line_error(await agents("correction", "show", unknown), 1,
                          f"no correction {unknown} is recorded")
    assert_one_line_error(await agents("plan", "correct", "--mode", "revert", target,
                                       "--guidance", "again"), 1, "already superseded by")
    tree_text = (await agents.ok("plan", "tree", plan_id, "--show-superseded")).out
    assert "superseded by" in tree_text and "correction of" in tree_text


async def test_request_cancel_and_wait_cancelled(cli_workers: InProcessWorkers, agents: Agents,
                                                 nc: nats.NATS,
                                                 db: AsyncDatabase[Document]) -> None:
    tree = await seed_plan(nc.jetstream(), db, size=4)
    plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]
    # Another driver "holds" the plan, so the correction stays PENDING until cancelled.
    await db.plan_locks.insert_one({"_id": plan_id, "owner": "test",
                                    "expires_at": datetime.now(UTC) + timedelta(hours=1)})
    waiting = asyncio.create_task(agents.concurrently(
        "plan", "correct", "--mode", "append", target, "--guidance", "Split the work.",
        "--wait"))
    for _ in range(200):
        doc = await db.corrections.find_one({"plan_id": plan_id})
        if doc is not None:
            break
        await asyncio.sleep(0.1)
    assert doc is not None and doc["status"] == "pending"
    cancelled = (await agents.ok("correction", "cancel", doc["_id"], "--reason", "wrong target",
                                 "--json")).json
    assert cancelled == {"correction_id": doc["_id"], "status": "cancelled",
                         "message": "wrong target"}
    waited = await waiting
    assert waited.code == 4, (waited.out, waited.err)
    assert "requested; waiting" in waited.out and "cancelled" in waited.out

    # Without --wait: the ID is printed, and the correction is applied once the plan is free.
    await db.plan_locks.delete_many({})
    r = await agents.ok("plan", "correct", "--mode", "append", target, "--guidance", "Again.")
    assert "requested (append of" in r.out
    cid = r.out.split()[1]
    for _ in range(200):
        if (await db.corrections.find_one({"_id": cid}) or {}).get("status") == "applied":
            break
        await asyncio.sleep(0.1)
    text = (await agents.ok("correction", "show", cid)).out
    assert "child plan spawned" in text


async def test_fail_a_stuck_correction_over_nats(cli_workers: InProcessWorkers, agents: Agents,
                                                 nc: nats.NATS, db: AsyncDatabase[Document],
                                                 tmp_path: Path) -> None:

    tree = await seed_plan(nc.jetstream(), db, size=4)
    plan_id, target = tree[0]["plan_id"], tree[1]["decision_id"]
    # A driver that "holds" the plan and is stuck: the correction stays where it is put.
    await db.plan_locks.insert_one({"_id": plan_id, "owner": "stuck",
                                    "expires_at": datetime.now(UTC) + timedelta(hours=1)})
    r = await agents.ok("plan", "correct", "--mode", "revert", target, "--guidance", "G.")
    cid = r.out.split()[1]
    store = CorrectionStore.open(db)
    for _ in range(200):
        if (v := await store.corrections.get(cid)) is not None:
            break
        await asyncio.sleep(0.1)
    assert v is not None
    analyzing = v.correction.transition(CorrectionStatus.ANALYZING, datetime.now(UTC))
    await store.writer.commit(Changes(analyzing, v.version, events=[correction_event(analyzing)]),
                              datetime.now(UTC))
    svc = CorrectionService(store, JetStreamPublisher(nc), Archive(tmp_path / "a"))
    await svc.flush(cid)

    done = (await agents.ok("correction", "fail", cid, "--reason", "stuck on a lost volume",
                            "--json")).json
    assert done == {"correction_id": cid, "status": "failed",
                    "message": "stuck on a lost volume"}
    text = (await agents.ok("correction", "show", cid)).out
    assert "error: failed by an operator: stuck on a lost volume" in " ".join(text.split())
    assert_one_line_error(await agents("correction", "fail", cid, "--reason", "again"), 1,
                          f"fail refused: correction {cid} is failed")
    assert_one_line_error(await agents("correction", "fail", cid, "--reason", " "), 2,
                          "--reason must hold 1 to 1,000 characters")

    # The client's fail reaches the same consumer; a late one is refused on the wire.
    ops = CorrectionClient(nc)
    await ops.fail(cid, plan_id, "from the client")
    for _ in range(50):
        refused = await events(nc, "corrections.fail_refused.*", 0.2)
        if refused:
            break
    [(_, body, _)] = refused
    assert body["correction_id"] == cid and body["status"] == "failed"
