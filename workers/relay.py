"""The outbox relay: republishes the events a dead process committed to the outbox but
never published."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from bootstrap.settings import Settings
from contracts.shared.timestamps import utc_now
from services.corrections.service import CorrectionService

log = logging.getLogger(__name__)


async def relay_loop(service: Callable[[], CorrectionService], settings: Settings) -> None:
    """Republish what a dead process left in the outbox: all of it at start, then every
    interval whatever is older than the grace period (fresher events are their step's)."""
    first = True
    while True:
        try:
            before = None if first else utc_now() - timedelta(
                seconds=settings.outbox_relay_grace)
            n = await service().relay(before)
            if n:
                log.info("relayed the pending events of %d correction(s)", n)
            first = False
        except Exception:
            log.exception("outbox relay failed; retrying")
        await asyncio.sleep(settings.outbox_relay_interval)
