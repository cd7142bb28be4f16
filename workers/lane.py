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

A lane gives the stages room of their own. A batch is begun (read, topped up, prepared:
workers.inbound.Preparing) only when no batch begun before it is still waiting to be
written (`AHEAD`), and at most `WRITING` batches are written at once (from the start of
a transaction until it hands off: workers.batch.Batch.hand_off). So the next batch is
read while others are written, whichever partitions they come from (each stage serves
its waiters first come, first served), and nothing is read that could not be written
next. The CPU spent is the same; it is spent first on what can be written first.

Why two writing: the start of a write is itself CPU and round trips in the worker (the
facts, the triage, the counters) before its insert reaches the database, so with one
the database idled through each of them; with two, one batch's insert runs while the
next one gets that far. More than two would only queue inserts at a database that takes
them one after another (secantusd-py) or in less time than a batch takes to read
(MongoDB); more processes still write side by side.

Measured in docs/benchmarks.md ("Batches taking turns"): recorder / bare insert_many
0.68 and 0.66 against 0.61 and 0.54 before, interleaved, publish-to-persisted p50
about 4 s against about 6 s.
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
