"""Why each delivery of a message failed, kept until the message is settled.

When JetStream gives up on a message after MaxDeliver, its dead letter says what every
attempt ran into (workers.exhaustion): the errors are kept under `<stream>:<seq>`,
in memory and in `delivery_failures`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import describe
from store.deliveries import MAX_ATTEMPTS_KEPT, Attempt, DeliveryFailures, Failure

log = logging.getLogger(__name__)

PERSIST_TIMEOUT = 5.0
"""How long recording one batch's failures may take; they stay in memory regardless."""
MEMORY_KEYS = 10_000
"""Messages whose failures this process keeps in memory (the oldest are forgotten)."""


class FailureLog:
    """The error of each failed delivery, by `<stream>:<seq>`: in this process's memory
    (always, so a database outage loses nothing here) and in `delivery_failures` (so
    another worker, or this one after a restart, can list them)."""

    def __init__(self, store: DeliveryFailures | None, consumer: str) -> None:
        self._store = store
        self._consumer = consumer
        self._memory: OrderedDict[str, list[Attempt]] = OrderedDict()
        self._queued: list[Failure] = []
        self._settled: list[str] = []

    def add(self, key: str, delivered: int, error: str) -> None:
        attempt = Attempt(delivered, error, utc_now())
        kept = self._memory.setdefault(key, [])
        self._memory.move_to_end(key)
        kept.append(attempt)
        del kept[:-MAX_ATTEMPTS_KEPT]
        while len(self._memory) > MEMORY_KEYS:
            self._memory.popitem(last=False)
        self._queued.append(Failure(key, self._consumer, attempt))

    def count(self, key: str) -> int:
        """Failed deliveries of the message this process remembers (at most
        MAX_ATTEMPTS_KEPT), the one just added included."""
        return len(self._memory.get(key, ()))

    def settled(self, key: str) -> None:
        """The message succeeded (or was dead-lettered) after failing here."""
        if self._memory.pop(key, None) is not None:
            self._settled.append(key)

    async def persist(self) -> None:
        """Write what was queued; on failure (the database is what failed, usually) it
        stays in memory only."""
        queued, self._queued = self._queued, []
        settled, self._settled = self._settled, []
        if self._store is None or not (queued or settled):
            return
        try:
            await asyncio.wait_for(self._write(queued, settled), PERSIST_TIMEOUT)
        except Exception as exc:  # best effort; memory still has them
            log.warning("could not record %d delivery failure(s): %s", len(queued),
                        describe(exc))

    async def _write(self, queued: list[Failure], settled: list[str]) -> None:
        assert self._store is not None
        if queued:
            await self._store.record(queued)
        if settled:
            await self._store.forget_many(settled)

    async def attempts(self, key: str) -> list[Attempt]:
        stored: list[Attempt] = []
        if self._store is not None:
            stored = await self._store.attempts(key)
        merged = {a.delivered: a for a in stored}
        merged.update({a.delivered: a for a in self._memory.get(key, [])})
        return [merged[k] for k in sorted(merged)][-MAX_ATTEMPTS_KEPT:]

    async def forget(self, key: str) -> None:
        self._memory.pop(key, None)
        if self._store is not None:
            await self._store.forget(key)
