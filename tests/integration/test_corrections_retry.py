"""An operator's retry of a FAILED correction (ADR 0017), against real MongoDB and NATS,
driven in-process: a new round (failed -> pending -> ... -> applied) with a new attempt,
the earlier attempts kept; a retry of anything but a FAILED correction, or of one whose
target can no longer be corrected, is refused with an event saying why.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.record import Correction
from contracts.corrections.refusals import RetryRefused
from contracts.corrections.states import CorrectionAttemptState, CorrectionStatus
from contracts.shared.ids import new_id
from store.database import Document
from tests.integration.correction_support import (
    request,
    revert_scene,
    statuses_of,
    transition_events,
)
from tests.integration.wire import events

pytestmark = pytest.mark.store

S = CorrectionStatus
A = CorrectionAttemptState


async def _failed_revert(make: Any, db: AsyncDatabase[Document],
                         tmp_path: Path) -> tuple[Any, Correction]:
    """A revert FAILED because its archive root lies under a regular file."""
    (tmp_path / "a-file").write_text("not a folder")
    broken = make(tmp_path / "a-file" / "archive")
    scene = await revert_scene(db, tmp_path / "artifacts")
    req = request(scene.plan_id, scene.target.decision_id)
    await broken.request_correction(req, arrival=1)
    async with asyncio.timeout(20):
        await broken.run_plan(scene.plan_id)
    c = await broken.get_correction(req.correction_id)
    assert c is not None and c.status is S.FAILED
    return scene, c


async def test_a_retry_after_the_cause_is_fixed_ends_applied_with_every_attempt_kept(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    scene, failed = await _failed_revert(make, db, tmp_path)
    fixed = make(tmp_path / "archive")  # the operator pointed ARCHIVE_ROOT elsewhere
    retry_id = new_id()
    retried = await fixed.retry_correction(failed.correction_id, retry_id,
                                           plan_id=scene.plan_id, reason="archive fixed")
    assert isinstance(retried, Correction)
    assert retried.status is S.PENDING and retried.error is None
    assert retried.last.reason == "retried by an unverified sender: archive fixed"
    # A redelivered retry request is recognised, not a second command nor a refusal.
    again = await fixed.retry_correction(failed.correction_id, retry_id, plan_id=scene.plan_id)
    assert again == retried

    async with asyncio.timeout(20):
        await fixed.run_plan(scene.plan_id)
    done = await fixed.get_correction(failed.correction_id)
    assert done is not None and done.status is S.APPLIED
    assert [h.to_status for h in done.history] == [
        S.PENDING, S.ANALYZING, S.EXECUTING, S.FAILED,
        S.PENDING, S.ANALYZING, S.EXECUTING, S.APPLIED]
    assert done.history[3].error is not None  # the failure stays readable
    assert done.history[4].attempts_before == 3 and done.history[4].retry_id == retry_id
    attempts = await fixed.list_attempts(failed.correction_id)
    assert [a.state for a in attempts] == [A.FAILED, A.FAILED, A.FAILED, A.COMPLETE]
    assert attempts[-1].new_decision_id == done.new_decision_id
    assert sorted(done.superseded_ids) == sorted(scene.affected)

    evs = await transition_events(nc)
    assert statuses_of(evs, failed.correction_id) == [
        "pending", "analyzing", "executing", "failed",
        "pending", "analyzing", "executing", "applied"]
    mine = [e for e in evs if e["correction_id"] == failed.correction_id]
    assert [e["round"] for e in mine] == [1, 1, 1, 1, 2, 2, 2, 2]
    completes = await events(nc, "corrections.attempts.*.complete", 0.3)
    assert len(completes) == 1


async def test_a_retry_of_a_correction_that_did_not_fail_is_refused_with_an_event(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    scene, failed = await _failed_revert(make, db, tmp_path)
    fixed = make(tmp_path / "archive")
    await fixed.retry_correction(failed.correction_id, new_id(), plan_id=scene.plan_id)
    async with asyncio.timeout(20):
        await fixed.run_plan(scene.plan_id)

    refused = await fixed.retry_correction(failed.correction_id, new_id(),
                                           plan_id=scene.plan_id)
    assert isinstance(refused, RetryRefused)
    assert refused.status is S.APPLIED and "only a failed correction" in refused.reason
    other_plan = await fixed.retry_correction(failed.correction_id, new_id(), plan_id=new_id())
    assert isinstance(other_plan, RetryRefused) and other_plan.status is None
    published = await events(nc, "corrections.retry_refused.>", 0.3)
    assert {b["status"] for _, b, _ in published} == {"applied", None}
    c = await fixed.get_correction(failed.correction_id)
    assert c is not None and c.status is S.APPLIED


async def test_a_retry_whose_target_was_reverted_meanwhile_is_refused_naming_why(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    scene, failed = await _failed_revert(make, db, tmp_path)
    fixed = make(tmp_path / "archive")
    # Another operator reverted the parent meanwhile: the failed one's target is superseded.
    other = request(scene.plan_id, scene.parent.decision_id)
    await fixed.request_correction(other, arrival=2)
    async with asyncio.timeout(20):
        await fixed.run_plan(scene.plan_id)

    refused = await fixed.retry_correction(failed.correction_id, new_id(),
                                           plan_id=scene.plan_id)
    assert isinstance(refused, RetryRefused)
    assert refused.status is S.FAILED and "superseded" in refused.reason
    c = await fixed.get_correction(failed.correction_id)
    assert c is not None and c.status is S.FAILED
    [(_, body, headers)] = await events(nc, "corrections.retry_refused.>", 0.3)
    assert body["reason"] == refused.reason
    assert headers["Nats-Msg-Id"] == f"retry_refused:{failed.correction_id}:failed:1"


async def test_a_retry_that_meets_the_same_cause_gets_a_fresh_budget_then_fails_again(
        make: Any, db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path) -> None:
    scene, failed = await _failed_revert(make, db, tmp_path)
    still_broken = make(tmp_path / "a-file" / "archive")
    await still_broken.retry_correction(failed.correction_id, new_id(), plan_id=scene.plan_id)
    async with asyncio.timeout(20):
        await still_broken.run_plan(scene.plan_id)
    c = await still_broken.get_correction(failed.correction_id)
    assert c is not None and c.status is S.FAILED and c.round_of() == 2
    assert c.error is not None and "failed 3 time(s)" in c.error
    attempts = await still_broken.list_attempts(failed.correction_id)
    assert [a.state for a in attempts] == [A.FAILED] * 6
    evs = [e for e in await transition_events(nc) if e["correction_id"] == c.correction_id]
    assert [(e["to_status"], e["round"]) for e in evs][-5:] == [
        ("failed", 1), ("pending", 2), ("analyzing", 2), ("executing", 2), ("failed", 2)]
    assert await db.plan_locks.count_documents({}) == 0
