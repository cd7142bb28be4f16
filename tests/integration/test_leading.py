"""One recorder at a time (workers.leading): two replicas over one real database, the
lease deciding between them; a graceful stop hands over, a dead holder's lease expires."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from store.leases import Leases
from workers.leading import RECORDER_ROLE, LeadingPuller

pytestmark = pytest.mark.store

TTL = 0.9


class FakePuller:
    """Stands in for the recorder's BatchPuller: says when it runs."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self._log, self.metrics, self.running = name, log, None, False

    async def start(self) -> None:
        self.running = True
        self._log.append(f"start {self.name}")

    async def stop(self, timeout: float) -> None:
        self.running = False
        self._log.append(f"stop {self.name}")


def replica(db: AsyncDatabase[Document], name: str, log: list[str],
            pullers: dict[str, FakePuller]) -> LeadingPuller:
    def make() -> Any:
        pullers[name] = FakePuller(name, log)
        return pullers[name]

    return LeadingPuller(make, Leases(db, TTL), role=RECORDER_ROLE, owner=name,
                         stream="DECISIONS", durable="recorder", graceful_timeout=1.0)


def recording(pullers: dict[str, FakePuller]) -> list[str]:
    return sorted(n for n, p in pullers.items() if p.running)


async def until(check: Any, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.05)


async def test_two_replicas_never_record_at_once_and_hand_over(
        db: AsyncDatabase[Document]) -> None:
    log: list[str] = []
    pullers: dict[str, FakePuller] = {}
    a, b = replica(db, "a", log, pullers), replica(db, "b", log, pullers)
    await asyncio.gather(a.start(), b.start())  # both ask at once
    assert recording(pullers) in (["a"], ["b"])
    first, second = (a, b) if a.leading else (b, a)
    assert a.running and b.running  # a standby is ready too
    for _ in range(int(3 * TTL / 0.05)):  # renewals keep it where it is
        assert len(recording(pullers)) == 1 and first.leading and not second.leading
        await asyncio.sleep(0.05)
    await first.stop(1.0)  # graceful: released at once, taken at the next poll
    await until(lambda: second.leading)
    assert len(recording(pullers)) == 1
    await second.stop(1.0)
    assert recording(pullers) == []


async def test_a_dead_holders_lease_expires_before_a_standby_records(
        db: AsyncDatabase[Document]) -> None:
    log: list[str] = []
    pullers: dict[str, FakePuller] = {}
    a = replica(db, "a", log, pullers)
    await a.start()
    assert a.leading
    # a dies: its loop stops, nothing is released (its puller object stays "running"
    # here only in memory; the lease in the database is what counts).
    assert a._loop is not None
    a._loop.cancel()
    died = asyncio.get_running_loop().time()
    b = replica(db, "b", log, pullers)
    await b.start()
    assert not b.leading  # the lease has not expired yet
    await until(lambda: b.leading)
    assert asyncio.get_running_loop().time() - died >= TTL * 0.9
    await b.stop(1.0)
