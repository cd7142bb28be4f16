"""Archive I/O with a progress watchdog: a read or write that stops moving ends the wait.

A file system can hang a call for ever (a hung NFS server, a stuck FUSE daemon), and
no timeout reaches into a blocked read. So the archive's I/O runs in its own thread and
reports each step it completes to a `Progress`; the waiting coroutine gives up once no
step has completed for `stall_seconds`, raising `ArchiveStalled` with what the thread
was doing (the artifact it was reading), and the driver ends the attempt FAILED.

The thread is a daemon and is never joined: one stuck in the kernel must not hold the
worker's exit (asyncio.to_thread's executor is joined at shutdown, which would). An
abandoned thread that wakes up stops at its next step (`Abandoned`); it works on
folders and files opened by descriptor, so it cannot touch a folder a later attempt
made in its place.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TypeVar

T = TypeVar("T")


class ArchiveStalled(Exception):
    """No progress for the set time; `artifact` is the archive member being worked on
    (its `archived_as`), or None when the stall was not about one artifact."""

    def __init__(self, doing: str, seconds: float, artifact: str | None) -> None:
        self.artifact = artifact
        super().__init__(f"no progress for {seconds:g} s {doing} (ARCHIVE_STALL_SECONDS); "
                         "the attempt gave up on it")


class Abandoned(Exception):
    """Raised in a thread whose waiter has given up on it: nothing more to do."""


class Progress:
    """What the archive's thread is doing and when it last completed a step.

    Written by one thread, read by the watcher: each field is one reference assignment,
    so the watcher sees either the old or the new value, and both are good enough to
    decide whether a step completed within the set time.
    """

    def __init__(self) -> None:
        self.doing = "starting"
        self.artifact: str | None = None
        self.at = time.monotonic()
        self.abandoned = False

    def step(self, doing: str | None = None, *, artifact: str | None = None) -> None:
        """A step completed (and, with `doing`, the next one starts)."""
        if self.abandoned:
            raise Abandoned(self.doing)
        if doing is not None:
            self.doing, self.artifact = doing, artifact
        self.at = time.monotonic()


async def run_watched(work: Callable[[Progress], T], stall_seconds: float, *,
                      name: str = "archive") -> T:
    """`work(progress)` in a daemon thread; ArchiveStalled once `progress` has not moved
    for `stall_seconds`. Cancelling the caller abandons the thread the same way."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    progress = Progress()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return  # the waiter gave up on it
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def body() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = work(progress)
        except BaseException as exc:  # handed to the waiter, which raises it
            error = exc
        with suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=body, name=name, daemon=True).start()
    try:
        while True:
            left = progress.at + stall_seconds - time.monotonic()
            if left <= 0:
                raise ArchiveStalled(progress.doing, stall_seconds, progress.artifact)
            await asyncio.wait({done}, timeout=left)
            if done.done():
                return done.result()
    finally:
        if not done.done():
            progress.abandoned = True
            done.cancel()
