"""Stopping a background task within a bound.

Every loop of the workers and their services is stopped by cancelling its task, and a
stop must end: a shutdown that waits forever is a worker that never exits. A cancelled
task can outlive its cancel: one blocked in a database call that never answers (the
embedded test server left a burst of counts unanswered) stayed "cancelling", and on
Python 3.11 `asyncio.wait_for` drops a cancel that arrives as the awaited event fires,
so a `while True` loop around it goes on as if never cancelled (cpython#86296). A
stopping worker with webhooks once waited in its stop until a test's 10-minute timeout;
every cancel-and-wait of the workers and services goes through here since.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 5.0
"""How long a stop waits for a cancelled task to end before it goes on without it."""


async def stop_task(task: asyncio.Task[Any] | None, wait: float = STOP_WAIT_SECONDS) -> None:
    """Cancel `task` (if any) and wait until it has ended, at most `wait` seconds; one
    that outlives the wait is named in the log and left to the process's end."""
    if task is None:
        return
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=wait)
    if not done:
        log.warning("task %s did not end within %g s of its cancel; stopping without it",
                    task.get_name(), wait)
        return
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("task %s had ended with %s: %s", task.get_name(), type(exc).__name__,
                    exc)


async def stop_tasks(tasks: Iterable[asyncio.Task[Any]],
                     wait: float = STOP_WAIT_SECONDS) -> None:
    """`stop_task` for each of `tasks`, together (so at most `wait` in all)."""
    await asyncio.gather(*(stop_task(t, wait) for t in list(tasks)))
