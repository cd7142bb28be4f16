"""Stopping a background task within a bound.

Every loop of the workers and their services is stopped by cancelling its task, and a
stop must end: a shutdown that waits forever is a worker that never exits. A cancelled
task can outlive its cancel: one blocked in a database call that never answers (the
embedded test server left a burst of counts unanswered) stayed "cancelling", and on
Python 3.11 `asyncio.wait_for` drops a cancel that arrives as the awaited event fires,
so a `while True` loop around it goes on as if never cancelled (cpython#86296). A
stopping worker with webhooks once waited in its stop until a test's 10-minute timeout;
every cancel-and-wait of the workers and services goes through here since, and every
loop that sleeps until an event or a timeout waits with `wait_event`, which keeps its
cancel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 5.0
"""How long a stop waits for a cancelled task to end before it goes on without it."""


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` seconds pass; whether it was set.

    Unlike `asyncio.wait_for(event.wait(), timeout)` on Python 3.11, a cancel that arrives
    as the event fires still cancels the caller: nothing runs the wait in a task of its
    own whose result could stand in for the cancel."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


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
