"""The retention loop: one worker at a time (under a lease) runs a pass of the retention
policies every RETENTION_INTERVAL_SECONDS (services.retention; docs/retention.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bootstrap.retention import retention_service
from bootstrap.settings import Settings
from contracts.shared.timestamps import utc_now
from store.leases import Leases
from store.mongo_store import MongoStore

log = logging.getLogger(__name__)

LEASE_KEY = "role:retention"
"""The lease one worker holds while it runs a pass (in plan_locks, beside plans')."""


async def retention_loop(store: Callable[[], MongoStore], leases: Leases, owner: str,
                         settings: Settings) -> None:
    """Run a pass every interval while holding the lease; a failed pass is logged and
    the next interval tries again (each batch is its own transaction)."""
    every = settings.retention.interval_seconds
    while True:
        await asyncio.sleep(every)
        try:
            if not await leases.acquire(LEASE_KEY, owner):
                continue
            svc = retention_service(settings.retention, store(),
                                    settings.resolved_archive_root())
            for o in await svc.run(utc_now()):
                if o.done or o.held:
                    log.info("retention %s: %d due, %d done, %d held", o.policy.name,
                             o.due, o.done, o.held)
        except Exception:
            log.exception("retention pass failed; the next interval tries again")

