"""How the batches of one durable's partitions take turns in one worker process.

Reading a batch (verifying signatures, parsing, checking each message) is CPU work on
the process's one event loop; writing it is mostly the database's work. asyncio runs
whatever is ready in turn, with no notion of which matters first, so six recorder
partitions that each pulled a backlog were all read at once and then all written at
once: sampled every 100 ms over a burst of 6,000 decisions (bench/bench_recorder.py),
the worker's CPU was at 100 % for its first 2.3 s while the database sat at 10 to
30 %, then the database at 100 % for the remaining 5 s while the worker idled. The two
never worked at the same time; with room for two batches at any stage they took turns
in lockstep (both batches writing, then both read).

A lane gives the stages room of their own: one batch read at a time, begun only when
no batch read before it is still waiting to be written (`AHEAD`), and one written at a
time (`WRITING`, from the start of its transaction until it hands off: workers.batch.
Batch.hand_off). So the next batch is read while one is written, whichever partitions
they come from (each stage serves its waiters first come, first served), and nothing
is read that could not be written next. The CPU spent is the same; it is spent first
on what can be written first. Writes of one process are then one at a time: what a
worker process writes in parallel, it writes to a database that takes one insert
after another (secantusd-py), or does so in less time than the next batch takes to
read (MongoDB), and more processes still write side by side.
"""

from __future__ import annotations

import asyncio

AHEAD = 1
"""Batches begun (being read, or read and waiting to be written) per lane."""
WRITING = 2
"""Batches being written per lane."""


class Permit:
    """Room in one stage of a lane, given back once (again is a no-op), so the pull loop
    may give it back from every path a batch can leave by."""

    def __init__(self, room: asyncio.Semaphore) -> None:
        self._room: asyncio.Semaphore | None = room

    def release(self) -> None:
        if self._room is not None:
            self._room.release()
            self._room = None


class Lane:
    """Shared by the pullers of one durable's partitions in one process (workers.handlers)."""

    def __init__(self, ahead: int = AHEAD, writing: int = WRITING) -> None:
        if ahead < 1 or writing < 1:
            raise ValueError("each stage of a lane needs room for at least one batch")
        self._ahead = asyncio.Semaphore(ahead)
        self._writing = asyncio.Semaphore(writing)

    async def begin(self) -> Permit:
        """Wait for room to begin (read) one more batch."""
        await self._ahead.acquire()
        return Permit(self._ahead)

    async def write(self, begun: Permit) -> Permit:
        """Wait for room to write the batch `begun` holds room for, then give that room
        back: the next batch may be read while this one is written."""
        await self._writing.acquire()
        begun.release()
        return Permit(self._writing)
