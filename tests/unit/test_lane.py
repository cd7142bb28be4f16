"""workers.lane: room per stage, given back once, waiters served in turn."""

from __future__ import annotations

import asyncio

import pytest

from workers.lane import Lane

pytestmark = pytest.mark.unit


async def test_a_batch_begins_only_when_the_one_before_is_being_written() -> None:
    lane = Lane(ahead=1, writing=1)
    first = await lane.begin()
    second = asyncio.create_task(lane.begin())
    await asyncio.sleep(0)
    assert not second.done()  # the first is still being read
    writing = await lane.write(first)
    begun = await asyncio.wait_for(second, 1)  # room given back when the first writes
    third = asyncio.create_task(lane.write(begun))
    await asyncio.sleep(0)
    assert not third.done()  # one batch written at a time
    writing.release()
    writing.release()  # again: a no-op, not room for two
    (await asyncio.wait_for(third, 1)).release()
    assert lane._writing._value == 1 and lane._ahead._value == 1


async def test_waiters_are_served_first_come_first_served() -> None:
    lane = Lane(ahead=1)
    held = await lane.begin()
    order: list[int] = []

    async def waiter(i: int) -> None:
        (await lane.begin()).release()
        order.append(i)

    waiters = [asyncio.create_task(waiter(i)) for i in range(5)]
    await asyncio.sleep(0)
    held.release()
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert order == [0, 1, 2, 3, 4]


def test_a_stage_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one batch"):
        Lane(ahead=0)
    with pytest.raises(ValueError, match="at least one batch"):
        Lane(writing=0)
