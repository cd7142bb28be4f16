"""The parent wait's clock, one contract on both of its stores: `MemoryWaits` and the
MongoDB `ParentWaits` (services.recorder_policy.ParentWaitClock).

A wait adds up the gaps between a decision's sightings, each counted as at most the
gap bound: a longer gap is time nobody was looking (an outage, a hand-over) or the
clock stepping forward. The test moves time by stepping the memory clock and, on the
server, whose clock a test cannot move, by moving the last sighting back: the same gap
either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from services.recorder_policy import MemoryWaits, ParentWaitClock, RecorderPolicy
from store.database import PARENT_WAITS, Document
from store.deliveries import ParentWaits

GAP_MAX = RecorderPolicy().wait_gap_max_seconds


@dataclass
class Clock:
    name: str
    waits: ParentWaitClock
    step: Callable[[str, float], Awaitable[None]]
    """Make `seconds` pass for the key before its next sighting."""


@pytest.fixture(params=[pytest.param("memory", marks=pytest.mark.unit),
                        pytest.param("mongo", marks=pytest.mark.store)])
def clock(request: pytest.FixtureRequest) -> Clock:
    if request.param == "memory":
        now = [1000.0]

        async def forward(_key: str, seconds: float) -> None:
            now[0] += seconds
        return Clock("memory", MemoryWaits(lambda: now[0]), forward)
    db: AsyncDatabase[Document] = request.getfixturevalue("db")

    async def back(key: str, seconds: float) -> None:
        doc = await db[PARENT_WAITS].find_one({"_id": key})
        assert doc is not None
        await db[PARENT_WAITS].update_one(
            {"_id": key}, {"$set": {"seen": doc["seen"] - timedelta(seconds=seconds)}})
    return Clock("mongo", ParentWaits(db), back)


async def test_a_wait_begins_at_zero_and_grows_by_its_gaps(clock: Clock) -> None:
    w = clock.waits
    assert await w.waited(["DECISIONS:1", "DECISIONS:2"], GAP_MAX) == {
        "DECISIONS:1": 0.0, "DECISIONS:2": 0.0}
    await clock.step("DECISIONS:1", 3.0)
    later = await w.waited(["DECISIONS:1", "DECISIONS:3"], GAP_MAX)
    assert 3.0 <= later["DECISIONS:1"] < 3.5 and later["DECISIONS:3"] == 0.0
    await clock.step("DECISIONS:1", 4.0)
    assert 7.0 <= (await w.waited(["DECISIONS:1"], GAP_MAX))["DECISIONS:1"] < 7.5


async def test_a_gap_longer_than_the_bound_counts_as_the_bound(clock: Clock) -> None:
    """Ten minutes between two sightings (nobody recording, or the clock stepped): the
    wait grows by the bound, and goes on growing by its gaps after that."""
    w = clock.waits
    await w.waited(["DECISIONS:7"], GAP_MAX)
    await clock.step("DECISIONS:7", 600.0)
    after = (await w.waited(["DECISIONS:7"], GAP_MAX))["DECISIONS:7"]
    assert GAP_MAX <= after < GAP_MAX + 0.5
    await clock.step("DECISIONS:7", 2.0)
    assert GAP_MAX + 2 <= (await w.waited(["DECISIONS:7"], GAP_MAX))["DECISIONS:7"] \
        < GAP_MAX + 2.5


async def test_the_clock_going_back_takes_nothing_off(clock: Clock) -> None:
    w = clock.waits
    await w.waited(["DECISIONS:9"], GAP_MAX)
    await clock.step("DECISIONS:9", 5.0)
    five = (await w.waited(["DECISIONS:9"], GAP_MAX))["DECISIONS:9"]
    await clock.step("DECISIONS:9", -60.0)
    assert five <= (await w.waited(["DECISIONS:9"], GAP_MAX))["DECISIONS:9"] < five + 0.5


async def test_one_key_asked_twice_in_a_call_is_seen_once(clock: Clock) -> None:
    w = clock.waits
    await w.waited(["DECISIONS:4"], GAP_MAX)
    await clock.step("DECISIONS:4", 2.0)
    got = await w.waited(["DECISIONS:4", "DECISIONS:4"], GAP_MAX)
    assert list(got) == ["DECISIONS:4"] and 2.0 <= got["DECISIONS:4"] < 2.5


@pytest.mark.store
async def test_the_servers_own_clock_moves_the_wait(db: AsyncDatabase[Document]) -> None:
    """Without a step: real time on the server's clock counts."""
    waits = ParentWaits(db)
    await waits.waited(["DECISIONS:11"], GAP_MAX)
    await asyncio.sleep(0.3)
    assert (await waits.waited(["DECISIONS:11"], GAP_MAX))["DECISIONS:11"] >= 0.29
    doc = await db[PARENT_WAITS].find_one({"_id": "DECISIONS:11"})
    assert doc is not None and doc["since"] < doc["seen"]


@pytest.mark.unit
def test_the_bound_is_at_least_the_longest_backoff() -> None:
    """Else a wait could take more deliveries than MaxDeliver allows it."""
    with pytest.raises(ValueError, match="wait_gap_max_seconds"):
        RecorderPolicy(max_backoff_seconds=5.0, wait_gap_max_seconds=4.0)
