"""services.turns: a long CPU loop lets other tasks run by the clock, not by count."""

from __future__ import annotations

import asyncio
import time

from services.turns import Turns


def _work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_no_turn_before_its_time() -> None:
    ran = asyncio.Event()
    turns = Turns(every=60.0)

    async def other() -> None:
        ran.set()

    task = asyncio.create_task(other())
    for _ in range(100):
        await turns.take()
    assert not ran.is_set()  # a take that gives no turn does not yield
    await task


async def test_a_waiting_task_runs_within_a_turn_of_being_ready() -> None:
    """A reply that comes while a loop works is taken up after at most one turn's work,
    however many steps it has (here 100 of at least 1 ms, a turn every 5 ms): not after
    the loop. Counted in the loop's steps, not in seconds: a step takes at least 1 ms of
    the clock, so a turn comes within 5 of them however loaded the machine is (a bound
    in seconds failed a CI run on a loaded machine: 79 ms against 30)."""
    step = 0
    ready_at: list[int] = []
    ran_at: list[int] = []

    async def waiter() -> None:
        ready_at.append(step)
        await asyncio.sleep(0)
        ran_at.append(step)

    turns = Turns(every=0.005)
    task = asyncio.create_task(waiter())
    for step in range(1, 101):  # noqa: B007 - the waiter reads it
        _work(0.001)
        await turns.take()
    await task
    assert ready_at and ran_at
    assert ran_at[0] < 100  # during the loop, not after it
    assert ran_at[0] - ready_at[0] <= 6  # five steps, and one for the clock's rounding
