"""The judge loop: every worker with JUDGE_URL set asks the judge about the decisions
awaiting it (services.judging), JUDGE_CONCURRENCY at a time, and looks again every
JUDGE_POLL_SECONDS when none is waiting. A failed round (the database is down) is
logged and tried again after the same pause: each decision's own failures are
outcomes, settled by the service, never retried here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bootstrap.judge_settings import JudgeSettings
from contracts.shared.ids import new_id
from services.judging import JudgeService

log = logging.getLogger(__name__)


async def judge_loop(service: Callable[[], JudgeService], settings: JudgeSettings) -> None:
    owner = f"judge:{new_id()}"
    while True:
        try:
            svc = service()
            busy = await asyncio.gather(*(svc.judge_next(owner)
                                          for _ in range(settings.concurrency)))
        except Exception:
            log.exception("the judge loop failed; trying again")
            busy = [False]
        if not any(busy):
            await asyncio.sleep(settings.poll_seconds)
