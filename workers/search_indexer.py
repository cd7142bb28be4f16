"""The search indexer: one worker at a time (under the `role:search-indexer` lease) turns
the queue the recording and correction transactions leave into search entries
(store.search_index, ADR 0035). Searches are behind the recorder by about one interval
when it keeps up; the gauges show how far behind (ledger_search_index_*)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from store.leases import Leases
from store.search_index import SearchIndex

log = logging.getLogger(__name__)

LEASE_KEY = "role:search-indexer"
"""The lease the indexing worker holds (in plan_locks, beside plans')."""
STEPS_PER_PASS = 50
"""Steps (QUEUE_BATCH queue documents each) one pass takes before it sleeps: a large
backlog is worked through a bounded slice at a time, the lease renewed between steps."""


async def drain(index: SearchIndex, leases: Leases, owner: str,
                steps: int = STEPS_PER_PASS) -> int:
    """Index until nothing waits, `steps` are done or the lease is lost; entries added."""
    indexed = 0
    for _ in range(steps):
        step = await index.step()
        indexed += step.indexed
        if step.failed:
            log.error("search indexing gave up on %d queue document(s) (failed_at set; "
                      "the gauge ledger_search_index_failed counts them)", step.failed)
        if step.queued == 0 or not await leases.acquire(LEASE_KEY, owner):
            break
    return indexed


async def search_index_loop(index: SearchIndex, leases: Leases, owner: str,
                            every: float) -> None:
    """A pass every `every` seconds when the queue holds something and this worker
    holds (or takes) the lease; a failed pass is logged and the next one starts where
    the queue stands. Stopping hands the lease back, so another worker takes over at
    its next pass."""
    try:
        while True:
            try:
                # Only when something waits: an idle ledger sees one read per interval
                # and no lease written (a lease left to run out is taken by whoever
                # finds work next).
                if await index.waiting() and await leases.acquire(LEASE_KEY, owner):
                    await drain(index, leases, owner)
            except Exception:
                log.exception("search indexing pass failed; the next pass tries again")
            await asyncio.sleep(every)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(leases.release(LEASE_KEY, owner))
