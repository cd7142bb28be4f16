"""Giving the event loop a turn during long CPU work, by the clock rather than by count.

A worker's event loop runs one thing at a time. Reading a batch (verifying signatures,
parsing), laying it out, settling its messages and publishing its events are loops of
thousands of CPU steps, while another batch's write waits on the database one round trip
at a time: each reply is taken up only when the loop next turns. With a turn every 50
messages (about 25 ms of reading signed decisions), every round trip of a write waited
behind a slice of reading: the first write of a burst (312 decisions) sent its first
update 250 ms after it began and handed off 650 ms after, while the database idled
(bench/bench_recorder.py with a command listener and a batch timeline, 2026-12-05).

A turn every `TURN` seconds of work bounds that wait whatever one message costs (a large
one, a signed one, a slow machine). A turn is one pass of the loop: a few microseconds when
nothing else is ready (2.4 us measured here).
"""

from __future__ import annotations

import asyncio
import time

TURN = 0.002
"""Seconds of work between two turns of the loop."""


class Turns:
    """One loop's clock: `take` gives the event loop a turn once `every` seconds have gone
    by since the last one (or since it was made)."""

    __slots__ = ("_every", "_last")

    def __init__(self, every: float = TURN) -> None:
        self._every = every
        self._last = time.perf_counter()

    async def take(self) -> None:
        if time.perf_counter() - self._last >= self._every:
            await asyncio.sleep(0)
            self._last = time.perf_counter()
