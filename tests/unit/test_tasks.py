"""services.tasks: a stop ends within its bound, whatever its tasks do with the cancel."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable

import pytest

from services.tasks import stop_task, stop_tasks, wait_event


async def _deaf(done: asyncio.Event) -> None:
    """A loop that outlives every cancel (as a `while True` around Python 3.11's
    `wait_for` can, when the cancel comes as its event fires), until `done`."""
    while not done.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await done.wait()


async def _obedient() -> None:
    await asyncio.sleep(10)


async def test_tasks_that_ignore_their_cancel_do_not_hold_the_stop(
        caplog: pytest.LogCaptureFixture) -> None:
    done = asyncio.Event()
    deaf = [asyncio.create_task(_deaf(done), name=f"deaf-{i}") for i in range(3)]
    obedient = asyncio.create_task(_obedient(), name="obedient")
    started = time.monotonic()
    await stop_tasks([*deaf, obedient], wait=0.2)
    assert time.monotonic() - started < 1.0  # together, not one wait after another
    assert obedient.cancelled()
    assert sorted(r.getMessage().split()[1] for r in caplog.records) == [
        "deaf-0", "deaf-1", "deaf-2"]
    assert not any(t.done() for t in deaf)  # left running: here, to the test's end
    done.set()
    await asyncio.gather(*deaf)


async def test_no_task_and_a_failed_task_are_a_quiet_and_a_logged_stop(
        caplog: pytest.LogCaptureFixture) -> None:
    await stop_task(None)

    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails(), name="fails")
    await asyncio.sleep(0)
    await stop_task(failed)
    assert any("fails had ended with RuntimeError: boom" in r.getMessage()
               for r in caplog.records)


async def _with_wait_for(event: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True


async def _cancelled_as_the_event_fires(wait: Callable[[asyncio.Event, float],
                                                       Awaitable[bool]]) -> bool:
    """Whether a `while True` loop sleeping on `wait` ends when its cancel comes in the
    same step as its event (a stop that sets the event it waits on, then cancels it)."""
    woken = asyncio.Event()

    async def loop() -> None:
        while True:
            await wait(woken, 10)
            woken.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop now waits on the event
    woken.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.5)
    task.cancel()  # a second cancel ends it either way
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return bool(done)


async def test_a_loop_waiting_on_an_event_keeps_a_cancel_that_comes_as_it_fires() -> None:
    assert await _cancelled_as_the_event_fires(wait_event)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's wait_for keeps the cancel")
async def test_python_3_11_wait_for_drops_that_cancel() -> None:
    """Why wait_event exists (cpython#86296): the same loop around wait_for goes on."""
    assert not await _cancelled_as_the_event_fires(_with_wait_for)


async def test_wait_event_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert not await wait_event(event, 0.01)
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5)
    assert await wait_event(event, 0)  # already set: no wait at all
