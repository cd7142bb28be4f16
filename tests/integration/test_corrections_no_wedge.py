"""Corrections never wedge (ADR 0017), against real MongoDB and NATS, driven in-process.

An archive that cannot be written, a tree that changes under the runner, a slow archive
copy, an operator's fail, a correction over the decision limit, and reverts whose
events would once have exceeded the payload limit: each ends in a state someone can
see, within seconds, and never loops.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.record import Correction
from contracts.corrections.refusals import FailRefused
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.decisions.artifacts import STORED
from contracts.decisions.model import Decision
from contracts.shared.bounds import INLINE_IDS_MAX
from contracts.shared.ids import new_id
from contracts.shared.persistence import LeaseLost
from services.archive.watch import Progress
from services.archive.writer import Archive, ArchiveResult
from services.corrections.policy import CorrectionPolicy
from services.corrections.service import CorrectionService
from store.correction_store import CorrectionStore
from store.database import Document
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.integration.correction_support import (
    chain_plan,
    dump,
    request,
    revert_scene,
    statuses_of,
    transition_events,
    unchained,
)
from tests.integration.wire import events
from tests.port_wrappers import ImpactThen

pytestmark = pytest.mark.store

S = CorrectionStatus
A = CorrectionAttemptState


async def _revert(svc: CorrectionService, plan_id: str, target: str,
                  timeout: float = 20, **fields: Any) -> Any:
    req = request(plan_id, target, **fields)
    await svc.request_correction(req, arrival=1)
    async with asyncio.timeout(timeout):
        await svc.run_plan(plan_id)
    c = await svc.get_correction(req.correction_id)
    assert c is not None
    return c


# --- 1. a non-database error ends the attempt FAILED, never a loop --------------------------


async def test_unwritable_archive_ends_failed_within_seconds(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    # Tests run as root, so chmod cannot stop a write: the archive root lies under a file.
    (tmp_path / "a-file").write_text("not a folder")
    svc = make(Archive(tmp_path / "a-file" / "archive", tmp_path / "artifacts"))
    scene = await revert_scene(db, tmp_path / "artifacts")
    before = await db.decisions.find({}).to_list()
    started = time.monotonic()
    c = await _revert(svc, scene.plan_id, scene.target.decision_id)
    assert time.monotonic() - started < 10
    assert c.status is S.FAILED
    assert c.error is not None and "failed 3 time(s)" in c.error
    assert "NotADirectoryError" in c.error or "FileExistsError" in c.error
    attempts = await svc.list_attempts(c.correction_id)
    assert [a.state for a in attempts] == [A.FAILED] * 3
    assert all(a.error and "a-file" in a.error for a in attempts)
    assert await db.decisions.find({}).to_list() == before  # the tree untouched
    assert await db.plan_locks.count_documents({}) == 0
    failed_attempts = await events(nc, "corrections.attempts.*.failed", 0.3)
    assert len(failed_attempts) == 3 and all(b["error"] for _, b, _ in failed_attempts)
    assert statuses_of(await transition_events(nc), c.correction_id) == [
        "pending", "analyzing", "executing", "failed"]


async def test_a_link_inside_the_archive_root_is_refused_not_followed(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    root_dir, elsewhere = tmp_path / "archive", tmp_path / "elsewhere"
    root_dir.mkdir()
    elsewhere.mkdir()
    (root_dir / "corrections").symlink_to(elsewhere)
    svc = make(Archive(root_dir, tmp_path / "artifacts"))
    scene = await revert_scene(db, tmp_path / "artifacts")
    cid = new_id()
    # What the link points at holds a folder named like the correction's: the cleanup
    # of the FAILED correction must not reach it through the link either.
    bystander = elsewhere / scene.plan_id / cid / "keep.txt"
    bystander.parent.mkdir(parents=True)
    bystander.write_text("keep")
    c = await _revert(svc, scene.plan_id, scene.target.decision_id, correction_id=cid)
    assert c.status is S.FAILED and c.error is not None
    assert "NotAFolder" in c.error and "never follows links" in c.error
    assert [p.relative_to(elsewhere) for p in elsewhere.rglob("*") if p.is_file()] == [
        bystander.relative_to(elsewhere)]  # nothing written or removed through the link


async def test_links_and_unsafe_recorded_paths_are_never_followed_or_wedge(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    artifacts, secret = tmp_path / "artifacts", tmp_path / "secret"
    secret.mkdir()
    (secret / "key.pem").write_text("SECRET")
    (artifacts / "src").mkdir()
    (artifacts / "src" / "real.py").write_text("real\n")
    (artifacts / "src" / "link.py").symlink_to(secret / "key.pem")
    (artifacts / "linked-dir").symlink_to(secret)
    os.mkfifo(artifacts / "src" / "pipe")
    unsafe = ["/etc/passwd", "src/a\x00b.py", "src/" + "x" * 300, "../secret/key.pem"]
    safe = ["src/real.py", "src/link.py", "linked-dir/key.pem", "src/pipe", "src/missing.py"]
    plan = new_id()
    r = Decision.model_validate(root(plan, artifacts_produced=[]))
    # Recorded before the safe_artifact_path rule: loaded as stored data is.
    t = Decision.model_validate(decision(plan, r.decision_id, "tool_invocation",
                                         artifacts_produced=[
                                             {"artifact_path": p, "artifact_type": "file"}
                                             for p in unsafe + safe]),
                                context={STORED: True})
    await load_plan(db, [r, t])
    c = await _revert(make(), plan, t.decision_id)
    assert c.status is S.APPLIED, c.error
    folder = Path(c.archived_artifacts_path or "")
    manifest = json.loads((folder / "manifest.json").read_text())
    by_path = {a["artifact_path"]: a for a in manifest["artifacts"]}
    assert by_path["src/real.py"]["copied"] is True
    for p in unsafe:
        assert by_path[p]["copied"] is False and "unsafe artifact_path" in by_path[p]["skipped"]
    for p in safe[1:]:
        assert by_path[p]["copied"] is False and by_path[p]["skipped"]
    copies = [p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert [p.read_text() for p in copies] == ["real\n"]
    assert not any(p.is_symlink() for p in folder.rglob("*"))


# --- 2. a stale impact is recomputed ---------------------------------------------------------


async def test_a_stale_impact_is_recomputed_not_reused(
        make: Any, db: AsyncDatabase[Document]) -> None:
    tree = await chain_plan(db, 5)  # root -> a -> T -> b -> c
    plan, target, b = tree[0].plan_id, tree[2].decision_id, tree[3].decision_id

    async def then_the_tree_changes(call: int) -> None:
        # Someone supersedes b after the analysis: the impact (T, b, c) is now stale.
        if call == 1:
            await db.decisions.update_one({"_id": b}, {"$set": {"superseded_by": new_id()}})

    impact: list[ImpactThen] = []

    def ports(store: CorrectionStore) -> CorrectionStore:
        impact.append(ImpactThen(store.impact, then_the_tree_changes))
        return dataclasses.replace(store, impact=impact[0])  # type: ignore[arg-type]

    svc = make(ports=ports)
    c = await _revert(svc, plan, target, timeout=10)
    assert c.status is S.APPLIED
    assert c.superseded_ids == [target]  # recomputed: b and its child are no longer current
    assert impact[0].calls == 2
    [attempt] = await svc.list_attempts(c.correction_id)
    assert attempt.state is A.COMPLETE


# --- 3. the lease is renewed during a long phase, and fencing stays ------------------------


class SlowArchive(Archive):
    """An archive copy that takes `seconds` (a big artifact set, shrunk for the test)."""

    def __init__(self, seconds: float, *args: Any) -> None:
        super().__init__(*args)
        self.seconds = seconds

    def write(self, plan: RevertWrites, progress: Progress | None = None) -> ArchiveResult:
        time.sleep(self.seconds)
        return super().write(plan, progress)


async def test_the_lease_is_renewed_while_a_slow_archive_is_written(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    svc = make(SlowArchive(3.0, tmp_path / "archive", tmp_path / "artifacts"), lease=1.0)
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    req = request(plan, tree[1].decision_id)
    await svc.request_correction(req)
    running = asyncio.create_task(svc.run_plan(plan))
    await asyncio.sleep(2.0)  # twice the lease, in the middle of the copy
    intruder = CorrectionStore.open(db, lease_seconds=1.0).leases
    assert not await intruder.acquire(plan, "intruder")
    assert await running
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.APPLIED
    assert await db.plan_locks.count_documents({}) == 0


async def test_a_runner_whose_lease_was_taken_cannot_commit(
        make: Any, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    svc = make(SlowArchive(1.5, tmp_path / "archive", tmp_path / "artifacts"), lease=1.0)
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    req = request(plan, tree[1].decision_id)
    await svc.request_correction(req)
    running = asyncio.create_task(svc.run_plan(plan))
    await asyncio.sleep(0.7)
    # As if the runner had stalled past its lease and another had taken the plan.
    await db.plan_locks.update_one({"_id": plan}, {"$set": {"owner": "successor"}})
    with pytest.raises(LeaseLost):
        await running
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.EXECUTING
    assert await db.decisions.count_documents({"superseded_by": {"$ne": None}}) == 0


# --- 4. an operator fails a stuck correction ---------------------------------------------------


class HeldArchive(Archive):
    """An archive copy that waits to be let go: the runner is then EXECUTING, with an
    attempt running, exactly when an operator would give up on it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.entered = threading.Event()
        self.release = threading.Event()

    def write(self, writes: RevertWrites, progress: Progress | None = None) -> ArchiveResult:
        self.entered.set()
        self.release.wait(10)
        return super().write(writes, progress)


async def test_operator_fails_an_executing_correction_and_its_attempt(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    archive = HeldArchive(tmp_path / "archive", tmp_path / "artifacts")
    svc = make(archive)
    tree = await chain_plan(db, 3)
    plan = tree[0].plan_id
    req = request(plan, tree[1].decision_id)
    await svc.request_correction(req)
    running = asyncio.create_task(svc.run_plan(plan))
    assert await asyncio.to_thread(archive.entered.wait, 10)
    try:
        failed = await svc.fail_correction(req.correction_id, "archive volume lost",
                                           plan_id=plan)
    finally:
        archive.release.set()
    # The runner, coming back, loses its commit, finds it terminal and leaves it.
    assert await running
    assert isinstance(failed, Correction) and failed.status is S.FAILED
    c = await svc.get_correction(req.correction_id)
    assert c is not None and c.status is S.FAILED
    assert c.error == "failed by an operator: archive volume lost"
    assert c.history[-1].reason == "archive volume lost"
    [attempt] = await svc.list_attempts(req.correction_id)
    assert attempt.state is A.FAILED and attempt.error == c.error
    assert not archive.folder(plan, req.correction_id).exists()  # what it wrote is gone
    refused = await svc.fail_correction(req.correction_id, "again", plan_id=plan)
    assert isinstance(refused, FailRefused) and refused.status is S.FAILED
    assert "only analyzing or executing" in refused.reason
    [(_, body, headers)] = await events(nc, "corrections.fail_refused.*", 0.3)
    assert body["correction_id"] == req.correction_id and body["status"] == "failed"
    assert headers["Nats-Msg-Id"] == f"fail_refused:{req.correction_id}:failed"
    assert statuses_of(await transition_events(nc), req.correction_id) == [
        "pending", "analyzing", "executing", "failed"]
    assert await svc.run_plan(plan)
    assert await db.decisions.count_documents({"superseded_by": {"$ne": None}}) == 0


# --- 5. limits on big corrections ---------------------------------------------------------------


async def test_a_revert_over_the_limit_fails_before_writing_and_the_dry_run_says_so(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    svc = make(policy=CorrectionPolicy(max_decisions=50, attempt_backoff_seconds=0.05))
    tree = await chain_plan(db, 62)  # the target (tree[1]) has 61 decisions in its subtree
    plan, target = tree[0].plan_id, tree[1].decision_id
    report = await svc.generate_dry_run_report(request(plan, target))
    assert report.exceeds_limit and report.max_decisions == 50
    assert report.warnings[0].startswith("Too large: more than 50 decisions")
    assert report.impact.risk_level.value == "high"
    # The walk stops as soon as it knows the subtree is over the limit: it counts no
    # more than the limit plus one, and reads nothing past it.
    assert report.impact.affected_count <= 51
    before = await dump(db)
    c = await _revert(svc, plan, target)
    assert c.status is S.FAILED
    assert c.error is not None and "more than 50 decisions" in c.error
    assert "CORRECTIONS_MAX_DECISIONS" in c.error and "nothing was written" in c.error
    assert await svc.list_attempts(c.correction_id) == []
    after = await dump(db)
    # The tree is untouched; the plan's record chain gained the correction's request and
    # its FAILED end (docs/security.md, Tamper-evident history), nothing else.
    assert after["decisions"] == before["decisions"]
    assert unchained(after["plans"]) == unchained(before["plans"])
    assert not (tmp_path / "archive" / "corrections" / plan).exists()
    assert statuses_of(await transition_events(nc), c.correction_id) == [
        "pending", "analyzing", "failed"]


async def test_applied_event_and_dry_run_of_a_big_revert_stay_bounded(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    svc = make()
    plan = new_id()
    r = Decision.model_validate(root(plan, artifacts_produced=[]))
    t = Decision.model_validate(decision(plan, r.decision_id, artifacts_produced=[]))
    leaves = [Decision.model_validate(decision(plan, t.decision_id, artifacts_produced=[
        {"artifact_path": f"src/m{i}.py", "artifact_type": "file"}])) for i in range(249)]
    await load_plan(db, [r, t, *leaves])
    report = await svc.generate_dry_run_report(request(plan, t.decision_id))
    assert report.lists_truncated and report.decisions_to_invalidate_count == 250
    assert len(report.decisions_to_invalidate) == INLINE_IDS_MAX
    assert report.impact.affected_files_count == 249
    assert len(report.impact.affected_files) == INLINE_IDS_MAX
    c = await _revert(svc, plan, t.decision_id)
    assert c.status is S.APPLIED and len(c.superseded_ids) == 250  # all in the document
    [(_, applied, _)] = await events(nc, "corrections.events.*.applied", 0.3)
    assert applied["superseded_ids"] == c.superseded_ids[:INLINE_IDS_MAX]
    assert applied["superseded_count"] == 250 and applied["lists_truncated"] is True
    doc = await db.corrections.find_one({"_id": c.correction_id})
    assert doc is not None and len(doc["superseded_ids"]) == 250


async def test_an_analysis_that_keeps_failing_ends_failed(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS) -> None:
    svc = make()
    tree = await chain_plan(db, 4)
    # A stored decision the walk cannot read (written by hand, or by an older version).
    await db.decisions.update_one({"_id": tree[3].decision_id},
                                  {"$set": {"decision_type": "daydream"}})
    c = await _revert(svc, tree[0].plan_id, tree[1].decision_id, timeout=10)
    assert c.status is S.FAILED
    assert c.error is not None and "the impact analysis failed 3 time(s)" in c.error
    assert "daydream" in c.error
    assert await svc.list_attempts(c.correction_id) == []
    assert statuses_of(await transition_events(nc), c.correction_id) == [
        "pending", "analyzing", "failed"]


class ChangingArchive(Archive):
    """While the archive is written, someone supersedes the deepest affected decision:
    every round meets a concurrent change."""

    def __init__(self, mongo_uri: str, db_name: str, *args: Any) -> None:
        super().__init__(*args)
        self._client: MongoClient[Document] = MongoClient(mongo_uri)
        self._db = db_name

    def write(self, plan: RevertWrites, progress: Progress | None = None) -> ArchiveResult:
        self._client[self._db].decisions.update_one(
            {"_id": plan.supersede_ids[-1]}, {"$set": {"superseded_by": new_id()}})
        return super().write(plan, progress)


async def test_a_tree_that_keeps_changing_fails_the_attempts_not_a_loop(
        make: Any, db: AsyncDatabase[Document], mongo_uri: str, db_name: str,
        tmp_path: Path) -> None:
    archive = ChangingArchive(mongo_uri, db_name, tmp_path / "archive", tmp_path / "artifacts")
    svc = make(archive, policy=CorrectionPolicy(
        max_conflicts=3, conflict_backoff_seconds=0.01, attempt_backoff_seconds=0.01))
    tree = await chain_plan(db, 20)
    try:
        c = await _revert(svc, tree[0].plan_id, tree[1].decision_id, timeout=20)
    finally:
        archive._client.close()
    assert c.status is S.FAILED
    assert c.error is not None and "failed 3 time(s)" in c.error
    assert "ConcurrentChange" in c.error
    attempts = await svc.list_attempts(c.correction_id)
    assert [a.state for a in attempts] == [A.FAILED] * 3
    # Each attempt met max_conflicts changes and recomputed the impact each time.
    assert await db.decisions.count_documents({"superseded_by": {"$ne": None}}) == 9
