"""One recording replica at a time: the recorder's puller runs only under a lease.

Why: several replicas pulling the one recorder durable split each plan's messages
between them, and a child pulled by one replica while its parent sits in another's
batch waits a redelivery for it, level after level. The fault runs at scale
(bench/workers_fault_run.py, bench/cluster_fault_run.py) showed deep plans outlasting
the parent wait that way: with two or three workers, thousands of acknowledged
decisions were dead-lettered as `parent_exists` with nothing killed at all, while one
worker recorded every one. On this machine a second recorder bought no throughput
either (384, 264, 281 decisions/s with 1, 2, 3 workers). So the recorder is
active/standby: every replica runs the corrections and invariants consumers, and the
one holding the `role:recorder` lease (store.leases, the same findAndModify lease the
plans' correction drivers use) also records. A replica that stops gracefully releases
the lease, so a standby takes over within one poll; one that dies lets it expire
(`RECORDER_LEASE_SECONDS`), and JetStream redelivers what it held after the ack wait.
Growing past one recorder means partitioning the subjects per plan
(docs/operations.md), not more replicas on one durable.

A replica that cannot renew (the database is unreachable) keeps its puller until the
lease it last renewed expires (its batches fail and are retried meanwhile, as with one
worker), then stops; a standby may take over only after that expiry. The lease's expiry
is the database server's clock (store.leases, ADR 0027), so replicas whose clocks
disagree still agree on who holds it; the step-down counts the lease's length on this
process's monotonic clock from just before the renewal was sent, which ends no later
than the server's expiry. Two recorders could overlap only if one's process stalled
past its expiry: harmless for the ledger (every write is idempotent; the overlap costs
waits), unlike a standby that never takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from store.leases import Leases
from workers.metrics import Metrics
from workers.pull import BatchPuller

log = logging.getLogger(__name__)

RECORDER_ROLE = "role:recorder"
"""The lease's `_id` in `plan_locks` (plan IDs are ULIDs, so it can meet none)."""


class LeadingPuller:
    """A `BatchPuller` started while this replica holds `role`, stopped when it does not.

    Looks like a puller to the app (stream, durable, running, metrics, start, stop), so
    readiness, metrics and shutdown treat it like the others: a standby is ready."""

    def __init__(self, make: Callable[[], BatchPuller[Any]], locks: Leases, *,
                 role: str, owner: str, stream: str, durable: str,
                 graceful_timeout: float) -> None:
        self._make = make
        self._locks = locks
        self._role = role
        self._owner = owner
        self._graceful = graceful_timeout
        self.stream = stream
        self.durable = durable
        self.metrics: Metrics | None = None
        self._active: BatchPuller[Any] | None = None
        self._valid_until = time.monotonic()
        self._loop: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def leading(self) -> bool:
        return self._active is not None

    @property
    def problem(self) -> str | None:
        """The active puller's durable's (workers.consumer_watch); a standby has none."""
        return self._active.problem if self._active is not None else None

    @property
    def running(self) -> bool:
        """The lease loop is alive, and so is the puller while this replica leads."""
        if self._loop is None or self._loop.done():
            return False
        return self._active is None or self._active.running

    async def start(self) -> None:
        # The first try here, so a lone replica is recording once `start` returns.
        await self._step()
        self._loop = asyncio.create_task(self._run(), name=f"lease:{self._role}")

    async def stop(self, timeout: float) -> None:
        self._stopping.set()
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        if self._active is not None:
            await self._active.stop(timeout)
            self._active = None
            # Handed over at once: a standby takes the role at its next poll.
            with contextlib.suppress(Exception):
                await self._locks.release(self._role, self._owner)

    async def _run(self) -> None:
        every = max(0.2, self._locks.ttl.total_seconds() / 3)
        while not self._stopping.is_set():
            await asyncio.sleep(every)
            await self._step()

    async def _step(self) -> None:
        sent = time.monotonic()
        try:
            held = await (self._locks.renew(self._role, self._owner) if self.leading
                          else self._locks.acquire(self._role, self._owner))
        except Exception as exc:  # the database is unreachable: nothing is known
            if self.leading and time.monotonic() >= self._valid_until:
                log.warning("cannot renew the %s lease (%s) and it has expired: recording "
                            "stops", self._role, type(exc).__name__)
                await self._step_down()
            return
        if held:
            self._valid_until = sent + self._locks.ttl.total_seconds()
        if held and not self.leading and not self._stopping.is_set():
            puller = self._make()
            puller.metrics = self.metrics
            await puller.start()
            self._active = puller
            log.info("this replica now holds %s: recording", self._role)
        elif not held and self.leading:
            log.warning("the %s lease passed to another replica: recording stops", self._role)
            await self._step_down()

    async def _step_down(self) -> None:
        active, self._active = self._active, None
        if active is not None:
            await active.stop(self._graceful)
