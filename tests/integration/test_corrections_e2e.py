"""Corrections through their public subjects, with `python -m workers` as its own process:
dry run over request-reply, revert and append observed by a plain subscriber,
cancel and its refusal, duplicate requests, unreadable requests, and faults (MongoDB
fail points; SIGKILL at every step) after which every correction still ends APPLIED
or FAILED, the tree is fully corrected or untouched, and each event is in the
stream exactly once and in lifecycle order."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.requests import CorrectionRequest
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer
from store.database import LEASE_FENCES, PLAN_LOCKS, Document
from tests.conftest import Workers, worker_env
from tests.in_process_workers import InProcessWorkers
from tests.integration.correction_support import (
    RevertScene,
    dump,
    per_status,
    request,
    revert_scene,
    statuses_of,
    transition_events,
)
from tests.integration.wire import events

pytestmark = pytest.mark.e2e

APP = "ledger-workers"
FAST = {
    "CORRECTIONS_RETRY_DELAY": "0.2", "CORRECTIONS_LEASE_SECONDS": "2",
    "CORRECTIONS_ACK_WAIT_SECONDS": "3", "OUTBOX_RELAY_INTERVAL": "0.5",
    "OUTBOX_RELAY_GRACE": "0.5", "CORRECTIONS_CANCEL_WAIT_SECONDS": "2",
    "CONSUMER_BACKOFF": "0.2,0.4",
}
TERMINAL = {"applied", "failed", "cancelled"}


def _env(nats_server: ManagedServer, mongo_uri: str, db_name: str, tmp_path: Path,
         **extra: str) -> dict[str, str]:
    sep = "&" if "?" in mongo_uri else "/?"
    return worker_env(nats_server.url, f"{mongo_uri}{sep}appName={APP}", db_name, **FAST,
                      ARTIFACTS_ROOT=str(tmp_path / "artifacts"),
                      ARCHIVE_ROOT=str(tmp_path / "archive"), **extra)


@pytest.fixture
async def cworkers(nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document],
                   db_name: str, tmp_path: Path) -> AsyncIterator[InProcessWorkers]:
    """The workers in this process (tests/in_process_workers.py); the tests that kill
    them start their own process."""
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    w = InProcessWorkers(_env(nats_server, mongo_uri, db_name, tmp_path),
                         tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        yield w
    finally:
        await w.stop()


async def publish(nc: nats.NATS, req: CorrectionRequest, msg_id: str | None = None) -> None:
    await nc.jetstream().publish(f"corrections.requested.{req.plan_id}",
                                 req.model_dump_json().encode(),
                                 headers={"Nats-Msg-Id": msg_id or req.correction_id})


async def wait_terminal(db: AsyncDatabase[Document], correction_id: str,
                        timeout: float = 30.0) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        doc = await db.corrections.find_one({"_id": correction_id})
        if doc is not None and doc["status"] in TERMINAL:
            return doc
        await asyncio.sleep(0.1)
    raise AssertionError(f"correction {correction_id} not terminal in {timeout}s: {doc}")


async def assert_all_or_nothing(db: AsyncDatabase[Document], scene: RevertScene,
                                doc: dict[str, Any]) -> None:
    corrections = await db.decisions.find({"is_correction": True}).to_list()
    superseded = await db.decisions.find({"superseded_by": {"$ne": None}}).to_list()
    child = await db.plans.find_one({"_id": scene.child_plan_id})
    if doc["status"] == "applied":
        assert [c["_id"] for c in corrections] == [doc["new_decision_id"]]
        assert {d["_id"] for d in superseded} == set(scene.affected)
        assert {d["superseded_by"] for d in superseded} == {doc["new_decision_id"]}
        assert child is not None and child["status"] == "rolled_back"
    else:
        assert doc["status"] == "failed"
        assert corrections == [] and superseded == []
        assert child is not None and child["status"] == "active"


async def assert_events_once_in_order(nc: nats.NATS, doc: dict[str, Any]) -> None:
    evs = await transition_events(nc)
    counts = per_status(evs)
    assert set(counts.values()) == {1}, counts
    assert statuses_of(evs, doc["_id"]) == [h["to_status"] for h in doc["history"]]
    attempts = [b for _, b, _ in await events(nc, "corrections.attempts.>", 0.5)]
    assert set(Counter((a["attempt_id"], a["to_state"]) for a in attempts).values()) <= {1}


# --- the happy paths over NATS --------------------------------------------------------


async def test_dry_run_over_nats_reports_and_changes_nothing(
        cworkers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    scene = await revert_scene(db)
    before = await _ledger(db)
    req = request(scene.plan_id, scene.target.decision_id)
    reply = await nc.request(f"corrections.dryrun.{scene.plan_id}",
                             req.model_dump_json().encode(), timeout=10)
    report = json.loads(reply.data)
    assert {"impact", "decisions_to_invalidate", "child_plans_to_rollback",
            "estimated_recompute_time_seconds", "warnings"} <= set(report)
    assert report["impact"]["affected_count"] == 7
    assert report["impact"]["risk_level"] == "medium"
    assert sorted(report["decisions_to_invalidate"]) == sorted(scene.affected)
    assert report["child_plans_to_rollback"] == [scene.child_plan_id]
    assert sorted(report["impact"]["affected_files"]) == sorted(scene.files)
    assert any("rolled back" in w for w in report["warnings"])
    missing = request(scene.plan_id, new_id())
    err = json.loads((await nc.request(f"corrections.dryrun.{scene.plan_id}",
                                       missing.model_dump_json().encode(), timeout=10)).data)
    assert err["error"] == "target_not_found" and missing.decision_id in err["message"]
    bad = json.loads((await nc.request(f"corrections.dryrun.{scene.plan_id}", b"{nope",
                                       timeout=10)).data)
    assert bad["error"] == "invalid_request"
    assert await _ledger(db) == before


async def _ledger(db: AsyncDatabase[Document]) -> dict[str, list[Document]]:
    """Every collection but the workers' heartbeats and leases, which move every second
    or so whatever a dry run does (a loaded machine stretched the test past a renewal)."""
    return {k: v for k, v in (await dump(db)).items()
            if k not in ("workers", PLAN_LOCKS, LEASE_FENCES)}


async def test_revert_over_nats_applied_event_reaches_a_plain_subscriber(
        cworkers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document],
        tmp_path: Path) -> None:
    scene = await revert_scene(db, tmp_path / "artifacts")
    sub = await nc.subscribe("corrections.events.*.applied")
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    msg = await sub.next_msg(timeout=30)
    applied = json.loads(msg.data)
    assert msg.subject == f"corrections.events.{scene.plan_id}.applied"
    assert applied["correction_id"] == req.correction_id
    assert applied["from_status"] == "executing" and applied["to_status"] == "applied"
    assert sorted(applied["superseded_ids"]) == sorted(scene.affected)
    assert applied["child_plans_rolled_back"] == [scene.child_plan_id]
    archive = Path(applied["archived_artifacts_path"])
    assert archive.is_relative_to(tmp_path / "archive")
    assert len(json.loads((archive / "manifest.json").read_text())["artifacts"]) == 3
    doc = await wait_terminal(db, req.correction_id)
    await assert_all_or_nothing(db, scene, doc)
    await assert_events_once_in_order(nc, doc)


async def test_append_over_nats(cworkers: InProcessWorkers, nc: nats.NATS,
                                db: AsyncDatabase[Document]) -> None:
    scene = await revert_scene(db)
    sub = await nc.subscribe("corrections.events.*.applied")
    req = request(scene.plan_id, scene.target.decision_id, "append")
    await publish(nc, req)
    applied = json.loads((await sub.next_msg(timeout=30)).data)
    [child] = applied["child_plans_spawned"]
    assert await db.decisions.count_documents({"superseded_by": {"$ne": None}}) == 0
    intervention = await db.decisions.find_one({"_id": applied["new_decision_id"]})
    assert intervention is not None and intervention["downstream_plan_ids"] == [child]
    assert await db.plans.count_documents({"_id": child, "parent_plan_id": scene.plan_id}) == 1


async def test_cancel_over_nats_and_refusal(cworkers: InProcessWorkers, nc: nats.NATS,
                                            db: AsyncDatabase[Document]) -> None:
    scene = await revert_scene(db)
    # Someone else "holds" the plan, so the request stays PENDING until cancelled.
    await db.plan_locks.insert_one({"_id": scene.plan_id, "owner": "test",
                                    "expires_at": datetime.now(UTC) + timedelta(hours=1)})
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    for _ in range(100):
        if await db.corrections.find_one({"_id": req.correction_id}):
            break
        await asyncio.sleep(0.1)
    cancel = {"correction_id": req.correction_id, "plan_id": scene.plan_id, "reason": "oops"}
    await nc.jetstream().publish(f"corrections.cancel.{scene.plan_id}",
                                 json.dumps(cancel).encode())
    doc = await wait_terminal(db, req.correction_id)
    assert doc["status"] == "cancelled"
    await db.plan_locks.delete_many({})
    # A second request, applied; a cancel now is refused and the refusal reported.
    refused_sub = await nc.subscribe(f"corrections.cancel_refused.{scene.plan_id}")
    late = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, late)
    assert (await wait_terminal(db, late.correction_id))["status"] == "applied"
    await nc.jetstream().publish(f"corrections.cancel.{scene.plan_id}", json.dumps(
        {"correction_id": late.correction_id, "plan_id": scene.plan_id}).encode())
    refusal = json.loads((await refused_sub.next_msg(timeout=15)).data)
    assert refusal["status"] == "applied" and "only pending or analyzing" in refusal["reason"]
    assert statuses_of(await transition_events(nc), req.correction_id) == [
        "pending", "cancelled"]


async def test_same_correction_id_twice_over_nats_is_one_correction(
        cworkers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    scene = await revert_scene(db)
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    await wait_terminal(db, req.correction_id)
    await publish(nc, req, msg_id=new_id())  # past JetStream's dedup: the worker must see it
    await asyncio.sleep(1.5)
    assert await db.corrections.count_documents({}) == 1
    assert await db.decisions.count_documents({"is_correction": True}) == 1
    assert set(per_status(await transition_events(nc)).values()) == {1}


async def test_unreadable_request_is_dead_lettered_once(
        cworkers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    plan = new_id()
    await nc.jetstream().publish(f"corrections.requested.{plan}", json.dumps(
        {"correction_id": new_id(), "plan_id": plan, "decision_id": new_id(),
         "mode": "rewind", "guidance": "", "requested_by": "bob"}).encode())
    for _ in range(100):
        if await db.dead_letters.count_documents({}):
            break
        await asyncio.sleep(0.1)
    [letter] = await db.dead_letters.find({}).to_list()
    assert {e["field"] for e in letter["errors"]} >= {"mode", "guidance"}
    rejected = await events(nc, "corrections.rejected.>", 0.5)
    assert len(rejected) == 1 and rejected[0][0] == f"corrections.rejected.{plan}"
    assert await db.corrections.count_documents({}) == 0


# --- faults -------------------------------------------------------------------------------


FAIL_POINTS = {
    "insert_error": {"failCommands": ["insert"], "errorCode": 8},
    "update_error": {"failCommands": ["update"], "errorCode": 8},
    "commit_error": {"failCommands": ["commitTransaction"], "errorCode": 8},
    "insert_closed": {"failCommands": ["insert"], "closeConnection": True},
    "update_closed": {"failCommands": ["update"], "closeConnection": True},
    "commit_closed": {"failCommands": ["commitTransaction"], "closeConnection": True},
}


async def fail_point(client: AsyncMongoClient[Document], data: dict[str, Any] | None,
                     times: int = 2, skip: int = 0) -> None:
    mode: Any = {"times": times, "skip": skip} if data else "off"
    await client.admin.command({"configureFailPoint": "failCommand", "mode": mode,
                                "data": {**(data or {}), "appName": APP}})


@pytest.mark.parametrize("skip", [0, 3])
@pytest.mark.parametrize("name", list(FAIL_POINTS))
async def test_fail_points_leave_all_or_nothing_and_events_once(
        cworkers: InProcessWorkers, nc: nats.NATS, db: AsyncDatabase[Document],
        mongo_client: AsyncMongoClient[Document], name: str, skip: int) -> None:
    scene = await revert_scene(db)
    req = request(scene.plan_id, scene.target.decision_id)
    await fail_point(mongo_client, FAIL_POINTS[name], times=2, skip=skip)
    try:
        await publish(nc, req)
        doc = await wait_terminal(db, req.correction_id, timeout=45)
    finally:
        await fail_point(mongo_client, None)
    await assert_all_or_nothing(db, scene, doc)
    # The relay publishes what a failed publish left in the outbox.
    for _ in range(50):
        if not await db.outbox.count_documents({}):
            break
        await asyncio.sleep(0.1)
    assert await db.outbox.count_documents({}) == 0
    await assert_events_once_in_order(nc, doc)


CRASH_STEPS = ["after_commit:pending", "after_commit:analyzing", "after_commit:executing",
               "before_execute_commit", "after_commit:applied", "after_publish:applied",
               "before_ack"]


@pytest.mark.slow
@pytest.mark.parametrize("step", CRASH_STEPS)
async def test_sigkill_at_each_step_loses_and_doubles_nothing(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path, step: str) -> None:
    (tmp_path / "artifacts").mkdir()
    scene = await revert_scene(db, tmp_path / "artifacts")
    doomed = Workers(_env(nats_server, mongo_uri, db_name, tmp_path,
                          CORRECTIONS_CRASH_AT=step), tmp_path / "doomed.log")
    await doomed.start(nats_server.url)
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    assert doomed.proc is not None
    for _ in range(200):
        if doomed.proc.poll() is not None:
            break
        await asyncio.sleep(0.05)
    assert doomed.proc.poll() == -9, doomed.log()
    survivor = Workers(_env(nats_server, mongo_uri, db_name, tmp_path),
                       tmp_path / "survivor.log")
    await survivor.start(nats_server.url)
    try:
        doc = await wait_terminal(db, req.correction_id, timeout=45)
        assert doc["status"] == "applied"
        await assert_all_or_nothing(db, scene, doc)
        for _ in range(50):
            if not await db.outbox.count_documents({}):
                break
            await asyncio.sleep(0.1)
        assert await db.outbox.count_documents({}) == 0
        await assert_events_once_in_order(nc, doc)
        attempts = await db.correction_attempts.find({}).to_list()
        assert attempts[-1]["state"] == "complete"
    finally:
        survivor.stop()


@pytest.mark.slow
async def test_sigkill_between_the_archive_and_applied_leaves_what_the_retry_cleans_up(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    scene = await revert_scene(db, tmp_path / "artifacts")
    doomed = Workers(_env(nats_server, mongo_uri, db_name, tmp_path,
                          CORRECTIONS_CRASH_AT="before_execute_commit"), tmp_path / "doomed.log")
    await doomed.start(nats_server.url)
    req = request(scene.plan_id, scene.target.decision_id)
    await publish(nc, req)
    assert doomed.proc is not None
    for _ in range(200):
        if doomed.proc.poll() is not None:
            break
        await asyncio.sleep(0.05)
    assert doomed.proc.poll() == -9, doomed.log()
    # Killed with the archive written (and fsynced) but the correction not applied.
    folder = tmp_path / "archive" / "corrections" / scene.plan_id / req.correction_id
    left = json.loads((folder / "manifest.json").read_text())
    assert all((folder / a["archived_as"]).is_file() for a in left["artifacts"])
    doc = await db.corrections.find_one({"_id": req.correction_id})
    assert doc is not None and doc["status"] == "executing"
    (folder / "half-written.tmp").write_text("as a copy cut short would leave it")
    survivor = Workers(_env(nats_server, mongo_uri, db_name, tmp_path),
                       tmp_path / "survivor.log")
    await survivor.start(nats_server.url)
    try:
        doc = await wait_terminal(db, req.correction_id, timeout=45)
    finally:
        survivor.stop()
    assert doc["status"] == "applied"
    assert doc["archived_artifacts_path"] == str(folder.resolve())
    manifest = json.loads((folder / "manifest.json").read_text())
    # The retry wrote the archive again, for the replacement it applied, and nothing else.
    assert manifest["new_decision_id"] == doc["new_decision_id"] != left["new_decision_id"]
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(["manifest.json", *(a["archived_as"] for a in manifest["artifacts"])])
    for a in manifest["artifacts"]:
        assert a["copied"] is True
        assert (folder / a["archived_as"]).read_text() == f"contents of {a['artifact_path']}\n"
    await assert_all_or_nothing(db, scene, doc)


async def test_execution_failing_every_attempt_ends_failed_and_untouched(
        nats_server: ManagedServer, mongo_uri: str, db: AsyncDatabase[Document], db_name: str,
        nc: nats.NATS, mongo_client: AsyncMongoClient[Document], tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    w = Workers(_env(nats_server, mongo_uri, db_name, tmp_path, CORRECTIONS_MAX_ATTEMPTS="1"),
                tmp_path / "workers.log")
    await w.start(nats_server.url)
    scene = await revert_scene(db, tmp_path / "artifacts")
    req = request(scene.plan_id, scene.target.decision_id)
    # Inserts before the revert's transaction: the correction and its pending event,
    # the analyzing event, the attempt and its events; the 6th is the new decision.
    await fail_point(mongo_client, FAIL_POINTS["insert_error"], times=1, skip=5)
    try:
        await publish(nc, req)
        doc = await wait_terminal(db, req.correction_id)
    finally:
        await fail_point(mongo_client, None)
        w.stop()
    assert doc["status"] == "failed" and "failed 1 time(s)" in doc["error"]
    await assert_all_or_nothing(db, scene, doc)
    assert not (tmp_path / "archive" / "corrections" / scene.plan_id / req.correction_id).exists()
    [attempt] = await db.correction_attempts.find({}).to_list()
    assert attempt["state"] == "failed" and attempt["completed_at"] is not None
    await assert_events_once_in_order(nc, doc)
