"""A stream's messages on one filter, in order from a sequence, read without a consumer.

The wait helpers (a decision's persisted event, a correction's transitions) replay what
the stream holds from their own publish's sequence, so an outcome published before the
wait began is not missed. They read message by message (`$JS.API.STREAM.MSG.GET` with
`next_by_subj`) rather than through an ephemeral consumer: creating a consumer without
a name in the subject (what nats-py's ordered consumer does) takes the name from the
request's body, and a body naming an existing durable updates it, so no principal but
the workers is allowed that request (deploy.grants). A core subscription to the
family's subjects says when something new was published; without one (or when a wake-up
is missed) the read is tried again every `poll` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError

from clients._feed_guard import subject_matches

POLL = 1.0
"""Seconds between reads when no wake-up came."""


class StreamReplay:
    """`async with StreamReplay(...) as r: msg = await r.next()`, forever or until a
    timeout around it: the next message on `filter_subject` from `start` on."""

    def __init__(self, nc: Client, stream: str, filter_subject: str, start: int | None,
                 wake: Sequence[str], *, poll: float = POLL) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._stream = stream
        self._filter = filter_subject
        self._seq = max(start or 1, 1)
        self._wake_subjects = list(wake)
        self._poll = poll
        self._woken = asyncio.Event()
        self._subs: list[Any] = []

    async def __aenter__(self) -> StreamReplay:
        # Before the first read, so nothing published after it goes unnoticed.
        for subject in self._wake_subjects:
            self._subs.append(await self._nc.subscribe(subject, cb=self._wake))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()

    async def _wake(self, _: Msg) -> None:
        self._woken.set()

    async def next(self) -> RawStreamMsg:
        """The next message on the filter; waits as long as it takes."""
        while True:
            self._woken.clear()
            try:
                msg = await self._js.get_msg(self._stream, seq=self._seq, next=True,
                                             subject=self._filter)
            except NotFoundError:
                # Not asyncio.wait_for: on Python 3.11 it can drop a cancel that arrives as
                # the event fires (cpython#86296), and this loop would go on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll):
                        await self._woken.wait()
                continue
            self._seq = (msg.seq or self._seq) + 1
            if subject_matches(self._filter, msg.subject or ""):
                return msg
