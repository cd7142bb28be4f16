"""The correction service against real MongoDB and NATS, driven in-process.

The worker around it is tested in test_corrections_e2e.py; here each rule is shown
directly: what a revert and an append write, what fails and leaves the tree alone,
idempotent requests, cancellation, and the specified attempt repository API (ADR 0001).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.planning import validate_target
from contracts.corrections.refusals import CancelRefused
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.decisions.types import DecisionType
from contracts.impact.errors import TargetNotFound
from contracts.shared.errors import IllegalTransition
from contracts.shared.ids import new_id
from contracts.shared.persistence import (
    ForeignKeyViolation,
    ResourceNotFoundError,
    RestrictViolation,
)
from services.archive.writer import Archive
from services.corrections.service import CorrectionService
from store.correction_store import CorrectionStore
from store.database import Document
from tests.integration.correction_support import (
    chain_plan,
    dump,
    per_status,
    request,
    revert_scene,
    statuses_of,
    transition_events,
    unchained,
)
from tests.port_wrappers import ImpactThen
from workers.streams import ensure_streams

pytestmark = pytest.mark.store

S = CorrectionStatus


@pytest.fixture
async def svc(db: AsyncDatabase[Document], nc: nats.NATS,
              tmp_path: Path) -> AsyncIterator[CorrectionService]:
    await ensure_streams(nc.jetstream())
    (tmp_path / "artifacts").mkdir()
    yield CorrectionService(
        CorrectionStore.open(db, lease_seconds=5), JetStreamPublisher(nc),
        Archive(tmp_path / "archive", tmp_path / "artifacts"))


async def test_revert_supersedes_exactly_the_subtree_rolls_back_and_archives(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS,
        tmp_path: Path) -> None:
    scene = await revert_scene(db, tmp_path / "artifacts")
    req = request(scene.plan_id, scene.target.decision_id, chosen_option="token bucket")
    await svc.request_correction(req, arrival=1)
    assert await svc.run_plan(scene.plan_id)
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.APPLIED
    new = await db.decisions.find_one({"_id": c.new_decision_id})
    assert new is not None
    assert new["is_correction"] and new["corrects_decision_id"] == scene.target.decision_id
    assert new["parent_decision_id"] == scene.parent.decision_id
    assert new["decision_type"] == scene.target.decision_type.value
    assert new["question"] == scene.target.question
    assert new["chosen_option"] == "token bucket"
    assert new["correction_reason"] == req.guidance
    assert new["sequence_number"] == 8  # the plan had 0..7
    superseded = {d["_id"] async for d in db.decisions.find({"superseded_by": c.new_decision_id})}
    assert superseded == set(scene.affected)
    # History: each superseded decision says when and by which correction.
    applied_at = c.history[-1].at
    async for d in db.decisions.find({"superseded_by": c.new_decision_id}):
        assert d["superseded_by_correction"] == req.correction_id
        assert d["superseded_at"] == new["created_at"]  # a time cut shows one of the two
        assert abs((d["superseded_at"].replace(tzinfo=None)
                    - applied_at.replace(tzinfo=None)).total_seconds()) < 60
    assert sorted(c.superseded_ids) == sorted(scene.affected)
    assert await db.decisions.count_documents(
        {"_id": {"$in": scene.unaffected}, "superseded_by": None}) == 3
    plan = await db.plans.find_one({"_id": scene.child_plan_id})
    assert plan is not None and plan["status"] == "rolled_back"
    record = await svc._store.plans.get(scene.child_plan_id)
    assert record is not None and record.rolled_back_by == req.correction_id
    assert record.rolled_back_at is not None
    assert c.child_plans_rolled_back == [scene.child_plan_id]
    archive = Path(c.archived_artifacts_path or "")
    manifest = json.loads((archive / "manifest.json").read_text())
    assert sorted(a["artifact_path"] for a in manifest["artifacts"]) == sorted(scene.files)
    assert all(a["copied"] for a in manifest["artifacts"])
    for a in manifest["artifacts"]:
        assert (archive / a["archived_as"]).read_text() == f"contents of {a['artifact_path']}\n"
    [attempt] = await svc.list_attempts(req.correction_id)
    assert attempt.state is CorrectionAttemptState.COMPLETE
    assert attempt.new_decision_id == c.new_decision_id
    assert attempt.archived_artifacts_path == c.archived_artifacts_path
    assert attempt.completed_at is not None
    evs = await transition_events(nc)
    assert statuses_of(evs, req.correction_id) == ["pending", "analyzing", "executing", "applied"]
    assert evs[-1]["superseded_ids"] == c.superseded_ids
    assert await db.outbox.count_documents({}) == 0
    assert await db.plan_locks.count_documents({}) == 0
    # The corrected tree: the new decision stands where the target stood.
    current = {d.decision_id for d in await svc._store.decisions.current_tree(scene.plan_id)}
    assert c.new_decision_id in current and not current & set(scene.affected)


async def test_append_spawns_a_child_plan_and_leaves_the_tree(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    scene = await revert_scene(db)
    before = await db.decisions.find({"plan_id": scene.plan_id}).to_list()
    req = request(scene.plan_id, scene.target.decision_id, "append")
    await svc.request_correction(req)
    await svc.run_plan(scene.plan_id)
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.APPLIED, c
    originals = {d["_id"]: d for d in await db.decisions.find(
        {"_id": {"$in": [d["_id"] for d in before]}}).to_list()}
    assert originals == {d["_id"]: d for d in before}
    [child_plan] = c.child_plans_spawned
    plan = await db.plans.find_one({"_id": child_plan})
    assert plan is not None
    assert plan["parent_plan_id"] == scene.plan_id
    assert plan["spawned_from_decision_id"] == scene.target.decision_id
    assert plan["guidance"] == req.guidance and plan["status"] == "active"
    assert plan["next_sequence"] == 1
    child_root = await db.decisions.find_one({"plan_id": child_plan})
    assert child_root is not None
    assert child_root["decision_type"] == "prompt_definition"
    assert child_root["sequence_number"] == 0 and child_root["chosen_option"] == req.guidance
    assert plan["root_decision_id"] == child_root["_id"]
    intervention = await db.decisions.find_one({"_id": c.new_decision_id})
    assert intervention is not None
    assert intervention["decision_type"] == DecisionType.USER_INTERVENTION.value
    assert intervention["parent_decision_id"] == scene.target.decision_id
    assert intervention["downstream_plan_ids"] == [child_plan]
    assert intervention["sequence_number"] == 8
    evs = await transition_events(nc)
    assert statuses_of(evs, req.correction_id) == ["pending", "analyzing", "executing", "applied"]
    assert evs[-1]["child_plans_spawned"] == [child_plan]


@pytest.mark.parametrize("case", ["missing", "superseded", "other_plan"])
async def test_bad_targets_fail_with_a_reason_and_change_nothing(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS, case: str) -> None:
    tree = await chain_plan(db, 3)
    other = await chain_plan(db, 2)
    plan = tree[0].plan_id
    if case == "superseded":
        first = request(plan, tree[1].decision_id)
        await svc.request_correction(first)
        await svc.run_plan(plan)
    target = {"missing": new_id(), "superseded": tree[1].decision_id,
              "other_plan": other[1].decision_id}[case]
    before = await dump(db)
    req = request(plan, target)
    await svc.request_correction(req)
    await svc.run_plan(plan)
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.FAILED
    expected = {"missing": "not found", "superseded": "already superseded",
                "other_plan": f"belongs to plan {other[0].plan_id}"}[case]
    assert c.error is not None and expected in c.error
    after = await dump(db)
    assert after["decisions"] == before["decisions"]
    assert unchained(after["plans"]) == unchained(before["plans"])
    assert await svc.list_attempts(req.correction_id) == []
    evs = await transition_events(nc)
    assert statuses_of(evs, req.correction_id) == ["pending", "analyzing", "failed"]
    assert evs[-1]["error"] == c.error


async def test_same_correction_id_twice_is_one_correction(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    tree = await chain_plan(db, 3)
    req = request(tree[0].plan_id, tree[2].decision_id)
    await svc.request_correction(req, arrival=1)
    await svc.run_plan(tree[0].plan_id)
    await svc.request_correction(req, arrival=2)
    await svc.run_plan(tree[0].plan_id)
    assert await db.corrections.count_documents({}) == 1
    assert await db.decisions.count_documents({"is_correction": True}) == 1
    assert set(per_status(await transition_events(nc)).values()) == {1}


async def test_dry_run_reports_and_writes_nothing(
        svc: CorrectionService, db: AsyncDatabase[Document]) -> None:
    scene = await revert_scene(db)
    before = await dump(db)
    report = await svc.generate_dry_run_report(request(scene.plan_id, scene.target.decision_id))
    assert await dump(db) == before
    assert report.impact.affected_count == 7
    assert sorted(report.decisions_to_invalidate) == sorted(scene.affected)
    assert report.child_plans_to_rollback == [scene.child_plan_id]
    assert report.impact.risk_level.value == "medium"
    assert sorted(report.impact.affected_files) == sorted(scene.files)
    with pytest.raises(TargetNotFound):
        await svc.generate_dry_run_report(request(scene.plan_id, new_id()))
    with pytest.raises(TargetInOtherPlan):
        await svc.generate_dry_run_report(request(new_id(), scene.target.decision_id))


async def test_cancel_from_pending_and_analyzing_only(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    pending = request(plan, tree[2].decision_id)
    await svc.request_correction(pending)
    cancelled = await svc.cancel_correction(pending.correction_id, "changed my mind")
    assert not isinstance(cancelled, CancelRefused) and cancelled.status is S.CANCELLED
    # The same cancel met twice (applied as its queued request was recorded, then by
    # the cancel consumer): done, not refused.
    same = await svc.cancel_correction(pending.correction_id, "changed my mind")
    assert not isinstance(same, CancelRefused) and same.status is S.CANCELLED
    again = await svc.cancel_correction(pending.correction_id)
    assert isinstance(again, CancelRefused) and again.status is S.CANCELLED
    applied = request(plan, tree[1].decision_id)
    await svc.request_correction(applied)
    await svc.run_plan(plan)
    refused = await svc.cancel_correction(applied.correction_id, plan_id=plan)
    assert isinstance(refused, CancelRefused) and refused.status is S.APPLIED
    assert "only pending or analyzing" in refused.reason
    unknown = await svc.cancel_correction(new_id(), plan_id=plan)
    assert isinstance(unknown, CancelRefused) and unknown.status is None
    evs = await transition_events(nc)
    assert statuses_of(evs, pending.correction_id) == ["pending", "cancelled"]
    assert evs[1]["reason"] == "changed my mind"
    refusals = [json.loads(m.data) for m in await _all(nc, "corrections.cancel_refused.>")]
    assert [r["status"] for r in refusals] == ["cancelled", "applied", None]


async def test_cancel_while_analyzing_stops_the_runner(
        make: Any, db: AsyncDatabase[Document]) -> None:
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    req = request(plan, tree[1].decision_id)

    async def cancel_first(_: int) -> None:
        await svc.cancel_correction(req.correction_id, "too risky")

    svc = make(ports=lambda store: dataclasses.replace(
        store, impact=ImpactThen(store.impact, cancel_first)))
    await svc.request_correction(req)
    await svc.run_plan(plan)
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.CANCELLED
    assert [h.to_status for h in c.history] == [S.PENDING, S.ANALYZING, S.CANCELLED]
    assert await db.decisions.count_documents({"superseded_by": {"$ne": None}}) == 0


async def test_corrections_of_a_plan_apply_in_arrival_order(
        svc: CorrectionService, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    tree = await chain_plan(db, 4)
    plan = tree[0].plan_id
    # The later request targets a descendant of the earlier one's target: applied in
    # order, the first supersedes it and the second fails.
    first, second = request(plan, tree[1].decision_id), request(plan, tree[3].decision_id)
    await svc.request_correction(second, arrival=20)
    await svc.request_correction(first, arrival=10)
    await svc.run_plan(plan)
    a, b = await svc.get_correction(first.correction_id), await svc.get_correction(
        second.correction_id)
    assert a is not None and a.status is S.APPLIED
    assert b is not None and b.status is S.FAILED and "superseded" in (b.error or "")
    assert a.history[-1].at <= b.history[1].at


async def test_attempt_repository_follows_the_seed(
        svc: CorrectionService, db: AsyncDatabase[Document]) -> None:
    repo, decisions, plans = svc._store.attempts, svc._store.decisions, svc._store.plans
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    req = request(plan, tree[2].decision_id)
    c = await svc.request_correction(req)
    record = CorrectionAttemptRecord.for_correction(c, c.requested_at)
    with pytest.raises(ForeignKeyViolation, match="correction_id"):
        await repo.create(record.model_copy(update={"correction_id": new_id()}))
    with pytest.raises(ForeignKeyViolation, match="original_decision_id"):
        await repo.create(record.model_copy(update={"original_decision_id": new_id()}))
    await repo.create(record)
    assert await repo.get(record.id) == record
    with pytest.raises(ResourceNotFoundError):
        await repo.get(new_id())
    running = await repo.update_state(record.id, CorrectionAttemptState.EXECUTING)
    assert running.completed_at is None
    with pytest.raises(IllegalTransition):
        await repo.update_state(record.id, CorrectionAttemptState.PENDING)
    done = await repo.update_state(record.id, CorrectionAttemptState.COMPLETE,
                                   new_decision_id=tree[1].decision_id,
                                   archived_artifacts_path="/var/archive/x")
    assert done.completed_at is not None and done.new_decision_id == tree[1].decision_id
    assert [a.id for a in await repo.list_by_plan(plan)] == [record.id]
    # RESTRICT: decisions named by the attempt (original and new) cannot be deleted.
    for named in (tree[2].decision_id, tree[1].decision_id):
        with pytest.raises(RestrictViolation, match=record.id):
            await decisions.delete(named)
    await decisions.delete(tree[0].decision_id)  # named by no attempt
    with pytest.raises(ResourceNotFoundError):
        await decisions.delete(tree[0].decision_id)
    await repo.delete(record.id)
    with pytest.raises(ResourceNotFoundError):
        await repo.delete(record.id)
    await decisions.delete(tree[2].decision_id)  # no longer named
    # Deleting a plan deletes its attempts.
    await repo.create(record.model_copy(update={"id": new_id(), "original_decision_id":
                                                tree[1].decision_id}))
    await plans.delete(plan)
    assert await repo.list_by_plan(plan) == []
    assert await db.decisions.count_documents({"plan_id": plan}) == 0
    assert await db.corrections.count_documents({"plan_id": plan}) == 0


async def test_dry_run_of_a_superseded_target_names_its_current_replacement(
        svc: CorrectionService, db: AsyncDatabase[Document]) -> None:
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    first = request(plan, tree[1].decision_id)
    await svc.request_correction(first)
    await svc.run_plan(plan)
    r1 = (await svc.get_correction(first.correction_id)).new_decision_id  # type: ignore[union-attr]
    assert r1 is not None
    second = request(plan, r1)  # the replacement is reverted in turn
    await svc.request_correction(second)
    await svc.run_plan(plan)
    r2 = (await svc.get_correction(second.correction_id)).new_decision_id  # type: ignore[union-attr]
    assert r2 is not None and r2 != r1
    # tree[2] was superseded by r1, itself superseded by r2: the chain is followed.
    report = await svc.generate_dry_run_report(request(plan, tree[2].decision_id))
    assert report.current_replacement_id == r2
    assert any("already superseded" in w and r2 in w for w in report.warnings)
    # Applying it still fails.
    late = request(plan, tree[2].decision_id)
    await svc.request_correction(late)
    await svc.run_plan(plan)
    c = await svc.get_correction(late.correction_id)
    assert c is not None and c.status is S.FAILED and "already superseded" in (c.error or "")
    with pytest.raises(TargetSuperseded):
        validate_target(late, await svc._store.decisions.get(tree[2].decision_id))


async def _all(nc: nats.NATS, subject: str) -> list[nats.aio.msg.Msg]:
    sub = await nc.jetstream().subscribe(subject, ordered_consumer=True)
    out = []
    try:
        while True:
            try:
                out.append(await sub.next_msg(timeout=0.5))
            except (TimeoutError, nats.errors.TimeoutError):
                return out
    finally:
        await sub.unsubscribe()
