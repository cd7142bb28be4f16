"""The correction service's decisions over the in-memory store: no servers, milliseconds.

The memory store keeps the real store's rules (tests/contract/ holds both to them), so
what the runner does on a conflict, a lost lease, a failed archive or a database that
fails a read is tested here on every path, and the races are set up through the ports
(a port that does something at the worst moment), not by patching the service.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contracts.corrections.record import Correction
from contracts.corrections.refusals import CancelRefused
from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.revert import RevertWrites
from contracts.corrections.states import CorrectionAttemptState, CorrectionMode, CorrectionStatus
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.recording.message import Candidate, content_hash
from contracts.shared.ids import new_id
from contracts.shared.persistence import LeaseLost, StoreFailure, StoreUnreachable
from services.archive.watch import Progress
from services.archive.writer import Archive, ArchiveResult
from services.corrections.policy import CorrectionPolicy
from services.corrections.service import CorrectionService
from tests.factories import decision, root
from tests.memory_store import MemoryStore
from tests.port_wrappers import ImpactThen, Published

pytestmark = pytest.mark.unit

S = CorrectionStatus
A = CorrectionAttemptState
FAST = CorrectionPolicy(attempt_backoff_seconds=0.0, conflict_backoff_seconds=0.0,
                        conflict_backoff_max_seconds=0.0, max_conflicts=3)


@dataclasses.dataclass
class Scene:
    store: MemoryStore
    published: Published
    service: CorrectionService
    tree: list[Decision]

    @property
    def plan_id(self) -> str:
        return self.tree[0].plan_id

    def request(self, target: int, mode: str = "revert") -> CorrectionRequest:
        return CorrectionRequest(plan_id=self.plan_id, decision_id=self.tree[target].decision_id,
                                 mode=CorrectionMode(mode), guidance="Use a token bucket.",
                                 requested_by="alice")

    async def get(self, correction_id: str) -> Correction:
        c = await self.service.get_correction(correction_id)
        assert c is not None
        return c


def chain(size: int) -> list[Decision]:
    plan = new_id()
    out = [Decision.model_validate({**root(plan), "artifacts_produced": []})]
    for _ in range(size - 1):
        out.append(Decision.model_validate(
            {**decision(plan, out[-1].decision_id), "artifacts_produced": []}))
    return out


async def scene(tmp_path: Path, size: int = 4, *, archive: Archive | None = None,
                store: MemoryStore | None = None, impact: ImpactThen | None = None,
                policy: CorrectionPolicy = FAST) -> Scene:
    m = store or MemoryStore(lease_seconds=5)
    tree = await m.load_plan(chain(size))
    published = Published()
    ports: Any = m if impact is None else _with(m, impact=impact)
    svc = CorrectionService(ports, published,
                            archive or Archive(tmp_path / "archive", tmp_path / "artifacts"),
                            policy=policy)
    return Scene(m, published, svc, tree)


def _with(m: MemoryStore, **ports: Any) -> Any:
    """The memory store with some ports replaced (the rest shared)."""
    view = MemoryStore.__new__(MemoryStore)
    view.__dict__.update(m.__dict__)
    view.__dict__.update(ports)
    return view


# --- the happy paths ---------------------------------------------------------------------


async def test_a_revert_is_applied_with_every_event_once(tmp_path: Path) -> None:
    s = await scene(tmp_path)
    req = s.request(1)
    await s.service.request_correction(req)
    assert await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.APPLIED
    assert c.superseded_ids == [d.decision_id for d in s.tree[1:]]
    assert s.published.statuses(req.correction_id) == [
        "pending", "analyzing", "executing", "applied"]
    [attempt] = await s.service.list_attempts(req.correction_id)
    assert attempt.state is A.COMPLETE
    assert len(s.published.on("corrections.resume.")) == 1
    assert len(s.published.on("decisions.persisted.")) == 1  # the replacement
    assert await s.store.outbox.count() == 0  # everything committed was published
    assert await s.store.leases.holder(s.plan_id) is None


async def test_an_append_spawns_a_child_plan(tmp_path: Path) -> None:
    s = await scene(tmp_path)
    req = s.request(2, "append")
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.APPLIED
    [child_plan] = c.child_plans_spawned
    child = await s.store.plans.get(child_plan)
    assert child is not None and child.parent_plan_id == s.plan_id
    assert all(d.superseded_by is None for d in await s.store.decisions.in_sequence(s.plan_id))
    assert len(s.published.on("decisions.persisted.")) == 2  # intervention, child root


async def test_a_request_delivered_twice_is_one_correction(tmp_path: Path) -> None:
    s = await scene(tmp_path)
    req = s.request(1)
    first = await s.service.request_correction(req)
    assert await s.service.request_correction(req) == first
    assert len(await s.service.list_corrections(s.plan_id)) == 1


async def test_a_concurrent_delivery_that_recorded_it_first(tmp_path: Path) -> None:
    """Both deliveries read "unknown"; the second's insert meets DuplicateRecord and it
    answers with what the first recorded."""
    s = await scene(tmp_path)
    req = s.request(1)
    inner = s.store.corrections
    racing = True

    class ReadBeforeTheOther:
        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        async def get(self, correction_id: str) -> Any:
            nonlocal racing
            if racing:
                racing = False
                await other.request_correction(req)  # commits meanwhile
                return None
            return await inner.get(correction_id)

    other = s.service
    svc = CorrectionService(_with(s.store, corrections=ReadBeforeTheOther()), s.published,
                            Archive(tmp_path / "archive"), policy=FAST)
    got = await svc.request_correction(req)
    assert got == await s.get(req.correction_id)
    assert s.published.statuses(req.correction_id) == ["pending"]


# --- cancel ------------------------------------------------------------------------------


async def test_cancel_from_pending_only_before_it_runs(tmp_path: Path) -> None:
    s = await scene(tmp_path)
    req = s.request(1)
    await s.service.request_correction(req)
    cancelled = await s.service.cancel_correction(req.correction_id, "changed my mind")
    assert isinstance(cancelled, Correction) and cancelled.status is S.CANCELLED
    assert await s.service.run_plan(s.plan_id)  # nothing left to do
    again = await s.service.cancel_correction(req.correction_id, plan_id=s.plan_id)
    assert isinstance(again, CancelRefused) and again.status is S.CANCELLED
    assert s.published.statuses(req.correction_id) == ["pending", "cancelled"]


async def test_a_cancel_during_the_analysis_wins(tmp_path: Path) -> None:
    """The race formerly set up by patching the service's private _analyze."""
    box: dict[str, str] = {}
    m = MemoryStore(lease_seconds=5)

    async def cancel(_: int) -> None:
        await s.service.cancel_correction(box["id"], "too risky")

    s = await scene(tmp_path, store=m, impact=ImpactThen(m.impact, cancel))
    req = s.request(1)
    box["id"] = req.correction_id
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.CANCELLED
    assert [h.to_status for h in c.history] == [S.PENDING, S.ANALYZING, S.CANCELLED]
    assert await s.service.list_attempts(req.correction_id) == []
    assert all(d.superseded_by is None for d in await s.store.decisions.in_sequence(s.plan_id))


# --- conflicts ---------------------------------------------------------------------------


async def test_a_stale_impact_is_recomputed_not_reused(tmp_path: Path) -> None:
    """root -> a -> T -> b -> c; b is superseded by someone else after the analysis: the
    revert's first commit conflicts, the impact is walked again, T alone is reverted."""
    m = MemoryStore(lease_seconds=5)

    async def supersede_b(call: int) -> None:
        if call == 1:
            b = s.tree[3]
            m.db.state.decisions[b.decision_id] = b.model_copy(
                update={"superseded_by": new_id()})

    impact = ImpactThen(m.impact, supersede_b)
    s = await scene(tmp_path, 5, store=m, impact=impact)
    req = s.request(2)
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.APPLIED
    assert c.superseded_ids == [s.tree[2].decision_id]
    assert impact.calls == 2
    [attempt] = await s.service.list_attempts(req.correction_id)
    assert attempt.state is A.COMPLETE


async def test_a_tree_that_keeps_changing_ends_the_attempt_then_the_correction(
        tmp_path: Path) -> None:
    """Every walk is stale by the commit: max_conflicts in a row end an attempt FAILED,
    and max_attempts attempts end the correction FAILED, nothing written to the tree."""
    m = MemoryStore(lease_seconds=5)

    async def record_under_target(_: int) -> None:  # as the recorder records one
        late = Decision.model_validate({**decision(s.plan_id, s.tree[3].decision_id),
                                        "artifacts_produced": []})
        await m.decisions.insert_recorded([Candidate(1, late, content_hash(late))],
                                          datetime.now(UTC))

    s = await scene(tmp_path, store=m, impact=ImpactThen(m.impact, record_under_target))
    req = s.request(1)
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.FAILED and "failed 3 time(s)" in (c.error or "")
    attempts = await s.service.list_attempts(req.correction_id)
    assert [a.state for a in attempts] == [A.FAILED] * 3
    assert all("ConcurrentChange" in (a.error or "") for a in attempts)
    assert all(d.superseded_by is None for d in await s.store.decisions.in_sequence(s.plan_id))


# --- a lost lease, a failed archive, a database that fails ------------------------------


async def test_a_runner_that_lost_its_lease_commits_nothing(tmp_path: Path) -> None:
    m = MemoryStore(lease_seconds=5)

    async def taken(_: int) -> None:  # as if it had stalled past its lease
        m.db.state.leases[s.plan_id] = ("successor", datetime(2100, 1, 1, tzinfo=UTC))

    s = await scene(tmp_path, store=m, impact=ImpactThen(m.impact, taken))
    req = s.request(1)
    await s.service.request_correction(req)
    with pytest.raises(LeaseLost):
        await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.ANALYZING  # the successor carries on from here
    assert await s.store.leases.holder(s.plan_id) == "successor"
    assert await s.service.list_attempts(req.correction_id) == []


class FlakyArchive(Archive):
    def __init__(self, failures: int, root: Path) -> None:
        super().__init__(root)
        self.failures = failures

    def write(self, plan: RevertWrites, progress: Progress | None = None) -> ArchiveResult:
        if self.failures:
            self.failures -= 1
            raise PermissionError(13, "read-only file system")
        return super().write(plan, progress)


async def test_a_failed_archive_costs_one_attempt(tmp_path: Path) -> None:
    s = await scene(tmp_path, archive=FlakyArchive(1, tmp_path / "archive"))
    req = s.request(1)
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.APPLIED
    first, second = await s.service.list_attempts(req.correction_id)
    assert first.state is A.FAILED and "read-only" in (first.error or "")
    assert second.state is A.COMPLETE


async def test_an_archive_that_always_fails_fails_the_correction(tmp_path: Path) -> None:
    s = await scene(tmp_path, archive=FlakyArchive(99, tmp_path / "archive"))
    req = s.request(1)
    await s.service.request_correction(req)
    await s.service.run_plan(s.plan_id)
    c = await s.get(req.correction_id)
    assert c.status is S.FAILED and "PermissionError" in (c.error or "")
    assert len(await s.service.list_attempts(req.correction_id)) == FAST.max_attempts
    assert s.published.statuses(req.correction_id)[-1] == "failed"


async def test_a_database_that_fails_a_read_leaves_the_correction_for_a_retry(
        tmp_path: Path) -> None:
    """A StoreFailure before any write is not the correction's fault: it propagates (the
    request is redelivered), nothing is recorded against it, and the lease is freed."""
    s0 = await scene(tmp_path)
    down = True

    class Decisions:
        def __getattr__(self, name: str) -> Any:
            return getattr(s0.store.decisions, name)

        async def get(self, decision_id: str) -> Decision | None:
            if down:
                raise StoreUnreachable("connection refused")
            return await s0.store.decisions.get(decision_id)

    svc = CorrectionService(_with(s0.store, decisions=Decisions()), s0.published,
                            Archive(tmp_path / "archive"), policy=FAST)
    req = s0.request(1)
    await svc.request_correction(req)
    with pytest.raises(StoreFailure):
        await svc.run_plan(s0.plan_id)
    c = await s0.get(req.correction_id)
    assert c.status is S.ANALYZING and c.error is None
    assert await s0.store.leases.holder(s0.plan_id) is None
    down = False
    assert await svc.run_plan(s0.plan_id)
    assert (await s0.get(req.correction_id)).status is S.APPLIED


async def test_a_revert_of_a_spawning_decision_rolls_its_child_plan_back(
        tmp_path: Path) -> None:
    m = MemoryStore(lease_seconds=5)
    plan, child = new_id(), new_id()
    r = Decision.model_validate({**root(plan), "artifacts_produced": []})
    spawn = Decision.model_validate({**decision(plan, r.decision_id, "subplan_spawn",
                                                downstream_plan_ids=[child]),
                                     "artifacts_produced": []})
    tree = await m.load_plan([r, spawn])
    await m.load_plan([Decision.model_validate({**root(child), "artifacts_produced": []})])
    s = await scene(tmp_path, store=m)
    s.tree = tree
    req = s.request(1)
    await s.service.request_correction(req)
    await s.service.run_plan(plan)
    assert (await s.get(req.correction_id)).status is S.APPLIED
    assert await s.store.plans.statuses([child]) == {child: PlanStatus.ROLLED_BACK}
