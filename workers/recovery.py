"""The recovery sweep: take over what a dead worker left behind, within seconds.

Two things a SIGKILLed worker leaves:

- its open MongoDB transactions, which hold their write locks until the server gives
  up on them (60 s): every tick this worker renews its own heartbeat and ends the
  sessions of workers whose heartbeat expired (store.workers), so a redelivered batch
  or a resumed correction finds its documents free. Heartbeats and leases expire by the
  database server's clock (ADR 0027), so a worker whose clock is off is neither taken
  for dead nor takes the live for dead;
- its corrections (below).

A driver holds its plan's lease while it works and renews it; a SIGKILLed driver
stops renewing, so its lease expires CORRECTIONS_LEASE_SECONDS after its last
renewal. Every worker looks for plans with unfinished corrections and no live lease
every CORRECTIONS_SWEEP_INTERVAL (and at once on start) and drives them. Without
this, an interrupted correction waited for JetStream to redeliver its request after
the consumer's ack wait: a minute in the worst case, and nothing at all once the
request had been acked.

Several replicas sweep at once safely: run_plan takes the lease with one
conditional write, so exactly one of them gets each plan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bootstrap.settings import Settings
from services.corrections.service import CorrectionService
from services.tasks import stop_tasks
from store.workers import WorkerRegistry

log = logging.getLogger(__name__)

Service = Callable[[], CorrectionService]


class Sweeper:
    """Runs the sweep loop and the drives it starts (at most one per plan here)."""

    def __init__(self, service: Service, settings: Settings,
                 registry: WorkerRegistry | None = None) -> None:
        self._service = service
        self._registry = registry
        self._interval = settings.corrections_sweep_interval
        self._driving: dict[str, asyncio.Task[bool]] = {}
        self._after: str | None = None
        """Where the next page of plans starts (None: at the first)."""

    async def run(self) -> None:
        while True:
            try:
                await self.beat_and_reap()
            except Exception as exc:
                log.warning("worker heartbeat failed (%s); trying again in %.1fs",
                            type(exc).__name__, self._interval)
            try:
                await self.sweep_once()
            except Exception as exc:
                log.warning("recovery sweep failed (%s); trying again in %.1fs",
                            type(exc).__name__, self._interval)
            await asyncio.sleep(self._interval)

    async def beat_and_reap(self) -> list[str]:
        """Renew this worker's heartbeat; end the sessions of workers that stopped."""
        if self._registry is None:
            return []
        await self._registry.heartbeat()
        return await self._registry.reap()

    async def sweep_once(self) -> list[str]:
        """Start a drive for every orphaned plan of the next page not already being
        driven here. One page per tick, so a tick's cost is bounded whatever the backlog,
        and every plan is looked at within (plans / page) ticks: the page after the last
        is the first again."""
        plans, self._after = await self._service().orphaned_plans(self._after)
        started = []
        for plan_id in plans:
            if plan_id in self._driving:
                continue
            task = asyncio.create_task(self._drive(plan_id), name=f"sweep:{plan_id}")
            self._driving[plan_id] = task
            started.append(plan_id)
        return started

    async def _drive(self, plan_id: str) -> bool:
        try:
            took = await self._service().run_plan(plan_id)
            if took:
                log.info("recovery sweep drove plan %s's unfinished corrections", plan_id)
            return took
        except Exception:
            log.warning("recovery sweep could not drive plan %s; next sweep retries",
                        plan_id, exc_info=True)
            return False
        finally:
            self._driving.pop(plan_id, None)

    async def stop(self, timeout: float) -> None:
        """Let the drives in hand finish (each step is one transaction), then cancel."""
        tasks = list(self._driving.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        await stop_tasks(late)
