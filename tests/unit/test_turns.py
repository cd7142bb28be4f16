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
    however many steps it has (here 100 of 1 ms, a turn every 5 ms): not after the loop."""
    ready_at: list[float] = []
    ran_at: list[float] = []

    async def waiter() -> None:
        ready_at.append(time.perf_counter())
        await asyncio.sleep(0)
        ran_at.append(time.perf_counter())

    turns = Turns(every=0.005)
    task = asyncio.create_task(waiter())
    for _ in range(100):
        _work(0.001)
        await turns.take()
    await task
    assert ready_at and ran_at
    assert ran_at[0] - ready_at[0] < 0.03
