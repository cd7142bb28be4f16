"""Running a plan's corrections: whoever holds the plan's lease works its unfinished
corrections one at a time, a started one first, then oldest arrival
(contracts.corrections.running), each step by step to a terminal status.

A heartbeat renews the lease while the runner holds it, and every step's transaction
renews it conditionally on its owner, so a runner that stalled past its lease cannot
commit. A concurrent change is met by reading again (and recomputing the impact), with
a growing pause, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime

from opentelemetry import propagate, trace

from contracts.corrections.changes import Changes, Versioned
from contracts.corrections.record import Correction
from contracts.corrections.running import Step, next_step, next_to_run
from contracts.corrections.states import CorrectionMode
from contracts.corrections.states import CorrectionStatus as S
from contracts.shared.ids import new_id
from contracts.shared.persistence import ConcurrentChange, LeaseLost, StoreFailure
from services.archive.writer import Archive
from services.corrections.applying import Analysed
from services.corrections.committing import Committer
from services.corrections.messages import correction_event
from services.corrections.policy import AnalysisFailed, CorrectionPolicy, PlanBusy
from services.corrections.steps import Steps
from services.ports.corrections import CorrectionStorePort
from services.tasks import stop_task

log = logging.getLogger(__name__)

_tracer = trace.get_tracer("decision_ledger.corrections")

SWEEP_PAGE = 500
"""Plans the recovery sweep looks at per tick: it pages through them all, tick by tick."""


@contextlib.contextmanager
def step_span(c: Correction) -> Iterator[None]:
    """One span per lifecycle step, a child of the request's trace context (when the
    request carried one), naming the correction, its plan and its target."""
    parent = propagate.extract(c.trace_context) if c.trace_context else None
    with _tracer.start_as_current_span(
            f"correction {c.status.value}", context=parent, attributes={
                "gen_ai.conversation.id": c.plan_id,
                "ledger.correction_id": c.correction_id, "ledger.plan_id": c.plan_id,
                "ledger.decision_id": c.decision_id, "ledger.mode": c.mode.value}):
        yield


class PlanRunner:
    def __init__(self, store: CorrectionStorePort, writes: Committer, steps: Steps,
                 archive: Archive, policy: CorrectionPolicy, *, worker_id: str,
                 clock: Callable[[], datetime]) -> None:
        self._store = store
        self._writes = writes
        self._steps = steps
        self._archive = archive
        self.policy = policy
        self._worker_id = worker_id
        self._clock = clock
        self._holding_plans: set[str] = set()
        """Plans a runner of this process holds the lease of: never orphaned here, even
        while a long transaction keeps their lease from being renewed (it holds the
        lease document until it commits)."""

    async def run_plan(self, plan_id: str) -> bool:
        """Work the plan's unfinished corrections, oldest arrival first, until none remain.

        False if another runner holds the plan's lease (it will do the work)."""
        owner = self._owner()
        if not await self._store.leases.acquire(plan_id, owner):
            return False
        async with self._holding(plan_id, owner):
            # Read again after each one: a request recorded meanwhile takes its place
            # by arrival (a stale list would run a later arrival before it). Only the
            # head of each status is read, so a long queue costs the same per correction.
            while todo := await self._store.corrections.heads(plan_id):
                v = todo[next_to_run([t.correction.status for t in todo])]
                await self._advance(v.correction.correction_id, owner)
            return True

    async def execute_correction(self, correction_id: str) -> Correction:
        """Run one correction to a terminal status now; PlanBusy if its plan is being worked."""
        v = await self._writes.get(correction_id)
        owner = self._owner()
        plan_id = v.correction.plan_id
        if not await self._store.leases.acquire(plan_id, owner):
            raise PlanBusy(plan_id)
        async with self._holding(plan_id, owner):
            return await self._advance(correction_id, owner)

    @contextlib.asynccontextmanager
    async def _holding(self, plan_id: str, owner: str) -> AsyncIterator[None]:
        """Keep the lease just acquired renewed while the body runs, then release it."""
        beat = asyncio.create_task(self._renew_lease(plan_id, owner),
                                   name=f"lease-heartbeat:{plan_id}")
        self._holding_plans.add(plan_id)
        try:
            yield
        finally:
            self._holding_plans.discard(plan_id)
            await stop_task(beat)
            await self._store.leases.release(plan_id, owner)

    async def _renew_lease(self, plan_id: str, owner: str) -> None:
        # Every third of the lease: two renewals can fail (a database hiccup) before it
        # expires. The renewal is conditional on the owner, so once another runner took
        # the plan this one stops renewing and its next commit fails its fence.
        every = self._store.leases.ttl.total_seconds() / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await self._store.leases.renew(plan_id, owner):
                    log.warning("lease on plan %s lost by %s; its next commit will fail",
                                plan_id, owner)
                    return
            except StoreFailure as exc:
                log.warning("renewing the lease on plan %s failed: %s", plan_id, exc)

    async def orphaned_plans(self, after: str | None = None, limit: int = SWEEP_PAGE
                             ) -> tuple[list[str], str | None]:
        """A page of the plans with unfinished corrections and no live lease (their
        runner died, or none ever started), in plan ID order after `after`, and where the
        next page starts (None: this was the last). Whoever calls run_plan on one takes
        it over; the lease decides who, so two sweeping replicas never both run it."""
        plans, after = await self._store.corrections.plans_with_unfinished(after, limit)
        if not plans:
            return [], after
        live = await self._store.leases.live(plans)
        return [p for p in plans if p not in live and p not in self._holding_plans], after

    async def _advance(self, correction_id: str, owner: str) -> Correction:
        analysed: Analysed | None = None
        conflicts = 0
        analysis_failures = 0
        last_conflict: Exception | None = None
        while True:
            v = await self._writes.get(correction_id)
            c = v.correction
            step = next_step(c.status, conflicts=conflicts,
                             max_conflicts=self.policy.max_conflicts)
            if step is Step.FINISHED:
                # Its last events may be in the outbox if our own commit looked failed
                # but had committed (an unknown commit result).
                await self._writes.flush(correction_id)
                if c.status is S.FAILED and c.mode is CorrectionMode.REVERT:
                    # Failed under us (an operator's fail) maybe after we wrote the archive.
                    await self._archive.discard(c.plan_id, c.correction_id)
                return c
            try:
                with step_span(c):
                    analysed = await self._step(
                        step, v, owner, analysed, analysis_failures=analysis_failures,
                        stuck=last_conflict if step is Step.FAIL_ATTEMPT else None)
                conflicts, last_conflict = 0, None
            except AnalysisFailed:
                analysis_failures += 1
                await asyncio.sleep(self.policy.attempt_backoff_seconds * analysis_failures)
            except ConcurrentChange as exc:
                if isinstance(exc, LeaseLost):
                    raise
                # Whatever changed may be the tree the impact was computed from: never
                # reuse it, and do not spin while the other writer finishes.
                analysed = None
                conflicts += 1
                last_conflict = exc
                log.info("correction %s changed under us (%s); reading it again (round %d)",
                         correction_id, exc, conflicts)
                await asyncio.sleep(self.policy.conflict_backoff(conflicts))

    async def _step(self, step: Step, v: Versioned, owner: str,
                    analysed: Analysed | None, *, analysis_failures: int,
                    stuck: Exception | None) -> Analysed | None:
        """Do `step` (contracts.corrections.running) for the correction as read; the impact an
        analysis computed, for the execution that follows it."""
        c = v.correction
        if step is Step.START_ANALYSIS:
            analyzing = c.transition(S.ANALYZING, self._clock())
            await self._writes.commit(Changes(analyzing, v.version, lease_owner=owner,
                                       events=[correction_event(analyzing)]))
            return analysed
        if step is Step.ANALYZE:
            return await self._steps.analyze(v, owner, analysis_failures)
        await self._steps.execute(v, owner, analysed, stuck)
        return None

    def _owner(self) -> str:
        # One owner per run, not per process: two deliveries in one worker must not
        # both believe they hold the plan.
        return f"{self._worker_id}:{new_id()}"
