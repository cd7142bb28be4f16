"""The fetches of a pull loop (workers.pull): they never raise, take what a pull
delivered late, top a batch up while the stream says more is waiting, and hand on only
what the durable delivered on its family's subjects.

A pull's inbox takes whatever is published to it (nats-server does not check a reply
subject against the sender's permissions), so a message whose ack subject does not name
this stream and durable, or whose subject is not the family's, is dropped unread and
unanswered, logged once (clients._feed_guard). A failed fetch (the durable deleted under
the loop answers like a busy server) makes the durable's watch look at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from clients._feed_guard import FeedGuard

log = logging.getLogger(__name__)

READY_WAIT = 0.01
"""How long each further fetch of a round waits for messages that are not there yet."""
LATE_GRACE = 0.05
"""How long a stopping puller waits for answers to its last pulls before it takes them."""
FILL_ROUNDS = 8
"""Most fetches that top one batch up while the stream says more is waiting."""


def _delivered_late(sub: JetStreamContext.PullSubscription) -> list[Msg]:
    """What a pull delivered after its fetch had returned: nats-py keeps it in the
    subscription's queue for the next fetch (and drains it the same way there); at a
    stop there is no next fetch, so it is taken here."""
    queue = sub._sub._pending_queue
    out: list[Msg] = []
    while not queue.empty():
        msg = queue.get_nowait()
        sub._sub._pending_size -= len(msg.data)
        if not JetStreamContext.is_status_msg(msg):
            out.append(msg)
    return out


def _pending_after(msgs: Sequence[Msg]) -> int:
    """Messages the stream says are still waiting for the consumer after the last of
    `msgs` (0 when unknown: the batch then goes as it is)."""
    try:
        return int(msgs[-1].metadata.num_pending or 0) if msgs else 0
    except Exception:  # not a JetStream message: nothing known
        return 0


class Fetcher:
    """One pull subscription's fetches, for batches of up to `batch_size`."""

    def __init__(self, sub: JetStreamContext.PullSubscription, batch_size: int,
                 subject: str, *, stream: str, durable: str,
                 failed: Callable[[], None] = lambda: None) -> None:
        self._sub = sub
        self._batch_size = batch_size
        self._subject = subject
        self._guard = FeedGuard(f"the {durable} puller", [subject], stream, durable)
        self._failed = failed
        self._failures = 0

    def delivered_late(self) -> list[Msg]:
        return [m for m in _delivered_late(self._sub) if self._guard.accepts(m)]

    async def fill(self, msgs: list[Msg]) -> list[Msg]:
        """Top the batch up to batch_size while the stream says more is waiting.

        One fetch of the rest is not enough under a backlog: when its short wait runs
        out before the server's answer (both cores busy), it returns the few messages
        already in hand and the rest arrive a moment later, so batches alternated
        between full ones and slivers of two or three, each costing a whole round of
        reads, a transaction and a publish (the recorder's). The last message's `num_pending` says
        whether more is waiting; when nothing is, the batch goes as it is, so a lone
        message is not held back. A fetch that comes back empty while more was said to be
        waiting is a short wait that ran out on a busy machine, not the end of the backlog:
        the round goes on (at most FILL_ROUNDS fetches, READY_WAIT each when empty)."""
        out = list(msgs)
        waiting = _pending_after(out)
        for _ in range(FILL_ROUNDS):
            want = self._batch_size - len(out)
            if want <= 0 or waiting == 0:
                break
            more = await self.fetch(want, READY_WAIT)
            out += more
            if more:
                waiting = _pending_after(more)
        return out

    async def fetch(self, n: int, timeout: float) -> list[Msg]:
        if n <= 0:
            return []
        try:
            msgs = await self._sub.fetch(n, timeout=timeout)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError):
            await asyncio.sleep(0.5)
            return []
        except Exception as exc:
            # Never let the loop die: retried; the watch looks at the durable at once. The
            # first of a run of failures is logged whole, the rest counted.
            self._failed()
            self._failures += 1
            if self._failures == 1:
                log.warning("fetch failed on %s (%s); retrying every second while the "
                            "durable is checked", self._subject, type(exc).__name__)
            await asyncio.sleep(1.0)
            return []
        if self._failures:
            log.info("fetch on %s works again after %d failures", self._subject,
                     self._failures)
            self._failures = 0
        return [m for m in msgs if self._guard.accepts(m)]
