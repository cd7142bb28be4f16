"""The recorder's partitions (workers.leading): replicas over one real database, each
partition recorded by one replica at a time under its lease, the partitions spread over
the live replicas and moving when one stops, dies or joins."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.recording.message import Candidate, content_hash
from contracts.shared.partitions import Partition, partitions
from contracts.shared.persistence import LeaseLost
from contracts.shared.timestamps import utc_now
from store.database import DECISIONS, PLAN_LOCKS, Document
from store.lease_view import LeaseViews
from store.leases import Leases, Taken
from store.recorder import RecorderRepository
from store.workers import WorkerRegistry
from tests.factories import root
from workers.batch import HeldLease
from workers.leading import LeadingPullers

pytestmark = pytest.mark.store

TTL = 0.9


class FakePuller:
    """Stands in for a partition's BatchPuller: says when it runs."""

    def __init__(self, owner: str, durable: str, board: Board) -> None:
        self.owner, self.durable, self._board = owner, durable, board
        self.metrics: Any = None
        self.lease: HeldLease | None = None
        self.running = False
        self.ack_wait = 1.0
        self.hold_off: float | None = None

    async def start(self, hold_off: float = 0.0) -> None:
        self.hold_off = hold_off
        self._board.started(self)
        self.running = True

    async def stop(self, timeout: float) -> None:
        # A batch in hand settled slowly (a loaded machine): longer than the lease.
        await asyncio.sleep(self._board.stop_seconds)
        self.running = False


@dataclass
class Board:
    """Every fake puller, and any moment two of one partition ran at once."""

    pullers: list[FakePuller] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    stop_seconds: float = 0.0

    def started(self, p: FakePuller) -> None:
        if any(q.running and q.durable == p.durable for q in self.pullers):
            self.overlaps.append(p.durable)
        self.pullers.append(p)

    def spread(self) -> dict[str, int]:
        return dict(Counter(p.owner for p in self.pullers if p.running))

    def recording(self) -> int:
        return sum(p.running for p in self.pullers)


@dataclass
class Replica:
    name: str
    pullers: LeadingPullers
    registry: WorkerRegistry
    beat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.registry.heartbeat()
        self.beat = asyncio.create_task(self._beat())
        await self.pullers.start()

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(TTL / 4)
            await self.registry.heartbeat()

    async def stop(self) -> None:
        """Graceful: pullers stopped and leases released, then the registry left."""
        await self.pullers.stop(1.0)
        await self.quiet()
        await self.registry.leave()

    async def quiet(self) -> None:
        if self.beat is not None:
            self.beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.beat

    async def die(self, board: Board) -> None:
        """Its loops and pullers stop and nothing is released: its leases and heartbeat
        expire."""
        await self.quiet()
        for loop in (self.pullers._loop, self.pullers._renewer):
            assert loop is not None
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        for p in board.pullers:
            if p.owner == self.name:
                p.running = False


def replica(db: AsyncDatabase[Document], name: str, board: Board,
            parts: tuple[Partition, ...], leases: Leases | None = None) -> Replica:
    def make(p: Partition) -> Any:
        return FakePuller(name, p.durable, board)

    return Replica(name, LeadingPullers(make, parts, leases or Leases(db, TTL),
                                        LeaseViews(db).read,
                                        owner=name, stream="DECISIONS",
                                        graceful_timeout=1.0),
                   WorkerRegistry(db, name, TTL))


def candidate(raw: dict[str, object]) -> Candidate:
    model = Decision.model_validate(raw)
    return Candidate(0, model, content_hash(model))


async def until(check: Any, seconds: float = 8.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.05)


async def test_one_partition_two_replicas_never_record_at_once_and_hand_over(
        db: AsyncDatabase[Document]) -> None:
    board = Board()
    one = partitions("decisions.recorded", "recorder", 1)
    assert [p.durable for p in one] == ["recorder"]
    a, b = replica(db, "a", board, one), replica(db, "b", board, one)
    await asyncio.gather(a.start(), b.start())  # both ask at once
    await until(lambda: board.recording() == 1)
    first, second = (a, b) if a.pullers.held else (b, a)
    assert a.pullers.running and b.pullers.running  # a replica holding nothing is ready
    for _ in range(int(3 * TTL / 0.05)):  # renewals keep it where it is (no churn)
        assert board.recording() == 1 and first.pullers.held == ["recorder"]
        await asyncio.sleep(0.05)
    await first.stop()  # graceful: released at once, taken within a round or two
    await until(lambda: second.pullers.held == ["recorder"])
    assert board.pullers[-1].hold_off == 0.0  # released settled: nothing to wait for
    await second.stop()
    assert board.recording() == 0 and board.overlaps == []


async def test_a_dead_holders_partitions_move_only_once_its_leases_expired(
        db: AsyncDatabase[Document]) -> None:
    board = Board()
    six = partitions("decisions.recorded", "recorder", 6)
    a = replica(db, "a", board, six)
    await a.start()
    assert len(a.pullers.held) == 6  # a lone replica records every partition at once
    assert [p.hold_off for p in board.pullers] == [0.0] * 6  # nobody held them
    await a.die(board)
    died = asyncio.get_running_loop().time()
    b = replica(db, "b", board, six)
    await b.start()
    assert b.pullers.held == []  # the leases have not expired yet
    await until(lambda: len(b.pullers.held) == 6)
    assert asyncio.get_running_loop().time() - died >= TTL * 0.9
    # Taken from a holder that died: what it had pulled comes back before b pulls.
    taken = [p for p in board.pullers if p.owner == "b"]
    assert [p.hold_off for p in taken] == [b.pullers.hold_off(1.0)] * 6
    assert b.pullers.hold_off(1.0) > 0
    await b.stop()


async def test_six_partitions_spread_over_three_replicas_and_follow_stops_and_joins(
        db: AsyncDatabase[Document]) -> None:
    board = Board()
    six = partitions("decisions.recorded", "recorder", 6)
    reps = [replica(db, n, board, six) for n in "abc"]
    for r in reps:
        await r.start()
    await until(lambda: sorted(board.spread().values()) == [2, 2, 2])
    await reps[2].stop()  # graceful: its two go to the others
    await until(lambda: sorted(board.spread().values()) == [3, 3])
    await reps[1].die(board)  # killed: its three move once its leases expire
    await until(lambda: board.spread() == {"a": 6})
    joined = [replica(db, n, board, six) for n in "de"]
    for r in joined:
        await r.start()
    await until(lambda: sorted(board.spread().values()) == [2, 2, 2])
    assert board.recording() == 6
    assert board.overlaps == []
    for r in (reps[0], *joined):
        await r.stop()
    assert board.recording() == 0


async def test_a_hand_over_slower_than_the_lease_never_lets_two_record(
        db: AsyncDatabase[Document]) -> None:
    """The lease of a partition being handed over stays renewed until its puller has
    settled what it held, however long that takes: the joiner waits for it."""
    board = Board(stop_seconds=3 * TTL)
    two = partitions("decisions.recorded", "recorder", 2)
    a = replica(db, "a", board, two)
    await a.start()
    assert len(a.pullers.held) == 2
    b = replica(db, "b", board, two)
    await b.start()
    await until(lambda: board.spread() == {"a": 1, "b": 1}, seconds=15)
    assert board.overlaps == []
    await asyncio.gather(a.stop(), b.stop())
    assert board.overlaps == [] and board.recording() == 0


async def test_a_stalled_holder_wakes_up_fenced_and_stops_pulling(
        db: AsyncDatabase[Document]) -> None:
    """A holder whose process stalled past its lease (its loops silent, its puller still
    holding a batch) while another replica took the partition: its batch's write is
    refused by the lease it carries, and it stops pulling at once."""
    board = Board()
    one = partitions("decisions.recorded", "recorder", 1)
    a = replica(db, "a", board, one)
    await a.start()
    stalled = next(p for p in board.pullers if p.owner == "a")
    assert stalled.lease is not None
    fence = stalled.lease.fence
    assert fence.lease == one[0].lease and fence.owner == "a"
    for loop in (a.pullers._loop, a.pullers._renewer):  # the stall: nothing renews
        assert loop is not None
        loop.cancel()
    await a.quiet()
    b = replica(db, "b", board, one)
    await b.start()
    await until(lambda: b.pullers.held == ["recorder"])
    r = root()
    with pytest.raises(LeaseLost):
        await RecorderRepository(db).insert_recorded([candidate(r)], utc_now(), fence=fence)
    assert await db[DECISIONS].count_documents({"plan_id": r["plan_id"]}) == 0
    stalled.lease.lost()  # what the recorder's handler does on LeaseLost
    await until(lambda: not stalled.running)
    assert a.pullers.held == []
    await b.stop()


class SilentLeases(Leases):
    """A database that stops answering renewals (no error, no reply)."""

    silent = False

    async def renew_all(self, lease_ids: Sequence[str], owner: str) -> set[str]:
        if self.silent:
            await asyncio.Event().wait()
        return await super().renew_all(lease_ids, owner)


async def test_renewals_never_answered_stop_the_pullers_once_the_lease_is_over(
        db: AsyncDatabase[Document]) -> None:
    board = Board()
    leases = SilentLeases(db, TTL)
    one = partitions("decisions.recorded", "recorder", 1)
    a = replica(db, "a", board, one, leases)
    await a.start()
    assert a.pullers.held == ["recorder"]
    leases.silent = True
    await until(lambda: board.recording() == 0, seconds=4 * TTL)
    assert a.pullers.held == []
    await a.stop()


class AnsweredLate(Leases):
    """A database that grants a take but whose answer is slow to come back (`late`), or
    never comes (`late` None)."""

    slow = False
    late: float | None = 0.3
    granted = False

    async def take(self, plan_id: str, owner: str, *, fenced: bool = False) -> Taken:
        taken = await super().take(plan_id, owner, fenced=fenced)
        if self.slow and taken is not Taken.REFUSED:
            self.granted = True
            if self.late is None:
                await asyncio.Event().wait()
            else:
                await asyncio.sleep(self.late)
        return taken


@pytest.mark.parametrize("late", [0.3, None], ids=["answered", "never-answered"])
async def test_a_stop_in_the_middle_of_a_take_leaves_no_lease_behind(
        db: AsyncDatabase[Document], late: float | None) -> None:
    """A graceful stop hands every partition over at once: none is left leased to a
    replica that has gone, for the next one to wait out as if it had died."""
    board = Board()
    one = partitions("decisions.recorded", "recorder", 1)
    a = replica(db, "a", board, one)
    await a.start()
    leases = AnsweredLate(db, TTL)
    leases.late = late
    b = replica(db, "b", board, one, leases)
    leases.slow = True
    await b.start()  # refused: a holds the partition
    await a.stop()
    await until(lambda: leases.granted)  # b's round took it; the answer is on its way
    await b.stop()
    assert board.recording() == 0
    assert await db[PLAN_LOCKS].find({"_id": {"$regex": "^role:"}}).to_list() == []
