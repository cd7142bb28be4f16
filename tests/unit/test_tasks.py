"""services.tasks: a stop ends within its bound, whatever its tasks do with the cancel."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from services.tasks import stop_task, stop_tasks


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
