"""The inbound pipeline itself, on a real nats-server with a family written for the test:
a message that raises while read, and one that makes its batch's I/O fail, against
valid ones in the same batches."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig

from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from workers.inbound import Batch, Retry
from workers.lane import AHEAD, WRITING, Lane
from workers.pull import BatchPuller

pytestmark = pytest.mark.e2e


def make_puller(js: JetStreamContext, name: str, family: Any, batch_size: int, *,
                durable: str | None = None, subject: str | None = None,
                ack_wait: float = 5.0, lane: Lane | None = None) -> BatchPuller[Any]:
    """A puller of stream `name.upper()` (subjects `name.>` unless `subject` says which
    of them), durable `name` by default."""
    subject = subject or f"{name}.>"
    return BatchPuller(js, stream=name.upper(), subject=subject,
                       config=ConsumerConfig(durable_name=durable or name,
                                             filter_subject=subject, ack_wait=ack_wait),
                       batch_size=batch_size, max_wait=0.2, consumer=family,
                       retry=Retry(3, (0.1,)), lane=lane)


class Family:
    """Bodies are read as they are; `raise` raises while read; `poison` fails any
    batch it is in (as a message the database refuses would)."""

    trust = None

    def __init__(self) -> None:
        self.recorded: list[bytes] = []
        self.terminated: list[str] = []
        self.dead: list[tuple[bytes, list[str]]] = []

    def read(self, m: Msg, now: datetime) -> bytes:
        if m.data == b"raise":
            raise RecursionError("maximum recursion depth exceeded")
        return m.data

    def unreadable(self, m: Msg, why: RuleViolation) -> bytes:
        return f"unreadable {why.message}".encode()

    async def decide(self, batch: Batch[bytes]) -> None:
        if b"poison" in batch.reads:
            raise ValueError("a document the database refuses")
        for m, r in batch.items:
            if r.startswith(b"unreadable"):
                self.terminated.append(r.decode())
                await batch.term(m)
            else:
                self.recorded.append(r)
                await batch.ack(m)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        self.dead.append((msg.data, [v.message for v in violations]))


async def test_one_bad_message_never_holds_back_its_batch(nc: nats.NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="T", subjects=["t.>"]))
    bodies = [f"ok{i}".encode() for i in range(10)]
    for body in [*bodies[:4], b"raise", b"poison", *bodies[4:]]:
        await js.publish("t.x", body)
    family = Family()
    puller = make_puller(js, "t", family, 50, durable="p")
    await puller.start()
    try:
        for _ in range(100):
            if family.dead:
                break
            await asyncio.sleep(0.1)
        assert sorted(family.recorded) == sorted(bodies)  # each once
        assert len(family.terminated) == 1 and "RecursionError" in family.terminated[0]
        [(data, errors)] = family.dead
        assert data == b"poison"
        assert "delivered it 3 times" in errors[0]
        assert [e.split(" at ")[0] for e in errors[1:]] == ["delivery 1", "delivery 2",
                                                            "delivery 3"]
        assert all("ValueError: a document the database refuses" in e for e in errors[1:])
        info = await js.consumer_info("T", "p")
        assert info.num_pending == 0 and info.num_ack_pending == 0
        assert info.config.max_deliver == 3
    finally:
        await puller.stop(5.0)


class Sizes:
    """Records each batch's size; `handing_off` families hand off before settling and
    then wait until the next batch is being decided, which only a pipeline allows."""

    trust = None

    def __init__(self, handing_off: bool) -> None:
        self.sizes: list[int] = []
        self.handing_off = handing_off
        self.deciding = 0
        self.most_at_once = 0
        self.next_started = asyncio.Event()

    def read(self, m: Msg, now: datetime) -> bytes:
        return m.data

    def unreadable(self, m: Msg, why: RuleViolation) -> bytes:
        return b""

    async def decide(self, batch: Batch[bytes]) -> None:
        self.sizes.append(len(batch.msgs))
        self.next_started.set()
        self.deciding += 1
        self.most_at_once = max(self.most_at_once, self.deciding)
        try:
            await asyncio.sleep(0.05)  # the write
            if self.handing_off:
                self.next_started.clear()
                batch.hand_off()
                if sum(self.sizes) < 1000:  # the last batch has no next one
                    await asyncio.wait_for(self.next_started.wait(), 5)
            for m in batch.msgs:
                await batch.ack(m)
        finally:
            self.deciding -= 1

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        raise AssertionError("nothing fails here")


async def pull_backlog(nc: nats.NATS, family: Sizes) -> None:
    """1,000 messages waiting before the puller starts, in batches of 100."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="B", subjects=["b.>"]))
    acks = [await js.publish_async("b.x", f"m{i}".encode()) for i in range(1000)]
    await asyncio.gather(*acks)
    puller = make_puller(js, "b", family, 100)
    await puller.start()
    try:
        for _ in range(200):
            if sum(family.sizes) >= 1000:
                break
            await asyncio.sleep(0.05)
    finally:
        await puller.stop(5.0)
    assert sum(family.sizes) == 1000
    info = await js.consumer_info("B", "b")
    assert info.num_pending == 0 and info.num_ack_pending == 0


async def test_a_backlog_is_taken_in_full_batches(nc: nats.NATS) -> None:
    family = Sizes(handing_off=False)
    await pull_backlog(nc, family)
    assert family.sizes == [100] * 10
    assert family.most_at_once == 1  # no hand-off: one batch at a time


async def test_the_next_batch_is_decided_once_the_last_hands_off(nc: nats.NATS) -> None:
    family = Sizes(handing_off=True)
    await pull_backlog(nc, family)  # each batch waits for the next one to start
    assert family.most_at_once == 2


class SlowFirst(Family):
    """`Family`, recording each batch's size; the first batch's write takes
    `first_write` seconds, the others are quick."""

    def __init__(self, first_write: float) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.first_write = first_write
        self.first_started = asyncio.Event()

    async def decide(self, batch: Batch[bytes]) -> None:
        self.sizes.append(len(batch.msgs))
        if len(self.sizes) == 1:
            self.first_started.set()
            await asyncio.sleep(self.first_write)
        await super().decide(batch)


async def test_what_arrives_during_a_commit_joins_the_next_batch(nc: nats.NATS) -> None:
    """Messages trickling in while a batch commits make one next batch, not a sliver
    taken at the commit's start and then the rest; one among them that raises while
    read is that message's alone."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="S", subjects=["s.>"]))
    family = SlowFirst(first_write=0.8)
    puller = make_puller(js, "s", family, 100)
    trickle = [f"m{i}".encode() for i in range(19)]
    trickle.insert(7, b"raise")
    await puller.start()
    try:
        await js.publish("s.x", b"first")
        await asyncio.wait_for(family.first_started.wait(), 5)
        for body in trickle:  # about 0.3 s of trickle, well inside the first commit
            await js.publish("s.x", body)
            await asyncio.sleep(0.015)
        for _ in range(100):
            if sum(family.sizes) >= 21:
                break
            await asyncio.sleep(0.05)
    finally:
        await puller.stop(5.0)
    assert family.sizes == [1, 20]
    assert family.recorded == [b"first", *(b for b in trickle if b != b"raise")]
    assert len(family.terminated) == 1 and "RecursionError" in family.terminated[0]


class LaneLog:
    """What the batches of pullers sharing a lane did at once."""

    def __init__(self) -> None:
        self.recorded: list[bytes] = []
        self.writing = 0
        self.most_writing = 0
        self.prepared_while_writing = 0


@contextlib.asynccontextmanager
async def partitions(js: JetStreamContext, name: str, families: Sequence[Any], batch_size: int,
                     lane: Lane, ack_wait: float = 5.0) -> AsyncIterator[list[BatchPuller[Any]]]:
    """One started puller per family, of partitions `name.<k>.>` of stream `name.upper()`,
    sharing `lane` as a worker's recorder partitions do; stopped on the way out."""
    pullers = [make_puller(js, name, family, batch_size, durable=f"{name}{k}",
                           subject=f"{name}.{k}.>", ack_wait=ack_wait, lane=lane)
               for k, family in enumerate(families)]
    for p in pullers:
        await p.start()
    try:
        yield pullers
    finally:
        for p in pullers:
            await p.stop(5.0)


async def until(done: Callable[[], bool], seconds: float = 10.0) -> None:
    """Poll `done` every 10 ms until it holds or `seconds` pass (the asserts then say what
    did not happen)."""
    for _ in range(int(seconds / 0.01)):
        if done():
            return
        await asyncio.sleep(0.01)


class Laned(Family):
    """`Family` with a write that takes a while, preparing each batch first
    (workers.inbound.Preparing) and handing off once written, as the recorder does."""

    def __init__(self, log: LaneLog) -> None:
        super().__init__()
        self.log = log

    async def prepare(self, batch: Batch[bytes]) -> None:
        batch.prepared = len(batch.msgs)
        self.log.prepared_while_writing += self.log.writing > 0

    async def decide(self, batch: Batch[bytes]) -> None:
        assert batch.prepared == len(batch.msgs)  # prepared whole, after its top-up
        log = self.log
        log.writing += 1
        log.most_writing = max(log.most_writing, log.writing)
        try:
            await asyncio.sleep(0.05)  # the write
        finally:
            log.writing -= 1
        batch.hand_off()
        for m, r in batch.items:
            log.recorded.append(r)
            await batch.ack(m)


async def test_partitions_sharing_a_lane_read_one_batch_while_another_is_written(
        nc: nats.NATS) -> None:
    """Three partitions' pullers in one process, each with a backlog: no more batches
    are written at once than the lane has room for, batches are read and prepared
    while another is written, and every message is recorded once."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="L", subjects=["l.>"]))
    bodies = [f"p{k}m{i}".encode() for k in range(3) for i in range(300)]
    acks = [await js.publish_async(f"l.{b.decode()[1]}.x", b) for b in bodies]
    await asyncio.gather(*acks)
    log = LaneLog()
    async with partitions(js, "l", [Laned(log) for _ in range(3)], 50, Lane()):
        await until(lambda: len(log.recorded) >= len(bodies))
    assert sorted(log.recorded) == sorted(bodies)
    assert log.most_writing == WRITING
    assert log.prepared_while_writing > len(bodies) // 50 // 2


class SlowWrites(Family):
    """`Family` whose every write takes `write` seconds, noting each message's deliveries."""

    def __init__(self, write: float, deliveries: list[int]) -> None:
        super().__init__()
        self.write = write
        self.deliveries = deliveries

    async def decide(self, batch: Batch[bytes]) -> None:
        self.deliveries += [m.metadata.num_delivered for m in batch.msgs]
        await asyncio.sleep(self.write)
        await super().decide(batch)


async def test_messages_waiting_their_turn_in_a_lane_are_kept_alive(nc: nats.NATS) -> None:
    """One batch written at a time, each write longer than the ack wait: the batch read
    and waiting to be written, and the message pulled and waiting to be read, are not
    redelivered meanwhile."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="K", subjects=["k.>"]))
    for k in range(3):
        await js.publish(f"k.{k}.x", f"m{k}".encode())
    deliveries: list[int] = []
    families = [SlowWrites(1.5, deliveries) for _ in range(3)]
    async with partitions(js, "k", families, 10, Lane(ahead=1, writing=1),
                          ack_wait=1.0) as pullers:
        await until(lambda: len(deliveries) >= 3
                    and all(not p._live for p in pullers))
    assert deliveries == [1, 1, 1]
    for k in range(3):
        info = await js.consumer_info("K", f"k{k}")
        assert info.num_pending == 0 and info.num_ack_pending == 0
        assert info.num_redelivered == 0


class FailingPrepare(Laned):
    """`Laned`, whose prepare raises for a batch holding `prep-raise`."""

    async def prepare(self, batch: Batch[bytes]) -> None:
        batch.prepared = len(batch.msgs)
        if b"prep-raise" in batch.reads:
            raise RecursionError("maximum recursion depth exceeded")

    async def decide(self, batch: Batch[bytes]) -> None:
        if b"prep-raise" in batch.reads:
            assert batch.prepared is None  # decided as it is
            batch.prepared = len(batch.msgs)
        await super().decide(batch)


async def test_a_prepare_that_raises_leaves_its_batch_unprepared_not_lost(
        nc: nats.NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="F", subjects=["f.>"]))
    bodies = [b"a", b"prep-raise", b"b"]
    for body in bodies:
        await js.publish("f.x", body)
    log = LaneLog()
    puller = make_puller(js, "f", FailingPrepare(log), 10, lane=Lane())
    await puller.start()
    try:
        await until(lambda: len(log.recorded) >= len(bodies))
        await js.publish("f.x", b"after")  # the loop still pulls
        await until(lambda: b"after" in log.recorded)
        assert puller.running
    finally:
        await puller.stop(5.0)
    assert sorted(log.recorded) == sorted([*bodies, b"after"])


async def test_a_backlog_in_one_partition_does_not_starve_another_in_the_lane(
        nc: nats.NATS) -> None:
    """An agent flooding its plan's partition and another agent's one decision in the
    same worker's lane: the lane serves partitions in turn, so the lone decision is
    written within a couple of the flood's batches, not after all of them."""
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="G", subjects=["g.>"]))
    flood = [f"flood{i}".encode() for i in range(1000)]
    acks = [await js.publish_async("g.0.x", b) for b in flood]
    await asyncio.gather(*acks)
    log = LaneLog()
    async with partitions(js, "g", [Laned(log) for _ in range(2)], 50, Lane()):
        await until(lambda: bool(log.recorded))
        before = len(log.recorded)
        await js.publish("g.1.x", b"lone")
        await until(lambda: len(log.recorded) > len(flood), 20.0)
    assert sorted(log.recorded) == sorted([*flood, b"lone"])
    # Behind at most the flood's batches already in the lane (AHEAD + WRITING) and the
    # one that asked for room before it, not behind the whole flood.
    assert log.recorded.index(b"lone") <= before + (AHEAD + WRITING + 1) * 50
