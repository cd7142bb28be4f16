"""The worker process's garbage collector, tuned for batches of a thousand messages.

A recorder batch keeps thousands of messages, models and documents alive at once, so
with CPython's default thresholds (a young collection every 700 allocations, a full one
every hundred of those) the collector ran about 730 times while one worker recorded
6,180 decisions, 0.91 s of its 5.9 s of CPU; its five full collections walked the whole
heap, about 0.13 s each, pausing the event loop (lease renewals and acks included).
With the thresholds below it ran eight times, 0.22 s, and the peak resident size stayed
the same (137 against 141 MB; `bench/bench_recorder.py --unsigned`, measured with gc
callbacks). Full collections still happen, ten times rarer. What the process imported
and built before serving is frozen first (`gc.freeze`): it lives as long as the process,
so no collection needs to walk it.

Called by each entry point that runs the workers as a process of their own
(`python -m workers`, `agents workers`, `agents up`), not by the app itself: tests run
the app inside the test process, whose collector stays as it is.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)
"""Allocations before a young collection; young collections before a middle one; middle
ones before a full one (CPython's defaults: 700, 10, 10)."""


def tune() -> None:
    """Freeze what is alive now and raise the thresholds; once, before serving."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
