"""Keeping one of the workers' durables as declared while they run.

A durable can vanish (someone deleted it) or change (updated, or deleted and created
again with another start) under a running worker. Either silences a family without an
error: the pull of a missing consumer only fails as if the server were busy, and a
changed filter skips what it no longer matches. So each puller's watch looks the
durable up every CHECK_EVERY seconds, and at once when a fetch fails, and:

- keeps the durable's ack floor (the last stream sequence below which everything is
  acknowledged) while the durable is as declared;
- when it is missing, was replaced (another creation time, not one the workers marked
  as theirs) or its configuration drifted, re-creates it to start at that floor + 1:
  what arrived meanwhile is delivered, and what was acknowledged after the floor was
  read is delivered again, which every handler takes as the duplicate it is (never
  `DeliverPolicy.NEW`, which would skip whatever the stream took in the gap);
- logs an ERROR naming the durable and why, and `problem` (what /readyz reports) says
  so until a later look finds it back as declared.

Several replicas may notice at once: the first creation wins, and the others find it
marked as re-created by the workers and keep it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from datetime import datetime

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, ConsumerInfo, DeliverPolicy
from nats.js.errors import BadRequestError, NotFoundError

from services.tasks import stop_task, wait_event
from workers.durables import WATCHED, config_changes, ensure_consumer

log = logging.getLogger(__name__)

CHECK_EVERY = 5.0
"""Seconds between looks at a durable."""
MARK = "ledger_recreated_from"
"""Metadata key the workers set on a durable they re-created (its start sequence)."""


class ConsumerWatch:
    """One durable's watch; `check` once, then `start` the loop."""

    def __init__(self, js: JetStreamContext, stream: str, want: ConsumerConfig,
                 every: float = CHECK_EVERY) -> None:
        self._js = js
        self._stream = stream
        self._want = want
        self._every = every
        self.durable = want.durable_name or ""
        self.floor: int | None = None
        """Stream sequence up to which everything was acknowledged, last seen as declared."""
        self.created: datetime | None = None
        self.problem: str | None = None
        self.recreated = 0
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"watch:{self.durable}")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None

    def poke(self) -> None:
        """Look now (a fetch failed: the durable may be gone)."""
        self._poke.set()

    async def _run(self) -> None:
        while True:
            await wait_event(self._poke, self._every)
            self._poke.clear()
            try:
                await self.check()
            except Exception as exc:  # JetStream busy or unreachable: look again later
                log.debug("could not look at consumer %s: %s", self.durable, exc)

    async def check(self) -> None:
        try:
            info = await self._js.consumer_info(self._stream, self.durable)
        except NotFoundError:
            await self._recreate("is missing (deleted)", delete=False)
            return
        why = self._changed(info)
        if why is not None:
            await self._recreate(why, delete=True)
            return
        self.created = info.created
        if info.ack_floor is not None:
            self.floor = max(self.floor or 0, info.ack_floor.stream_seq or 0)
        if self.problem is not None:
            log.warning("consumer %s on %s is back as declared", self.durable, self._stream)
            self.problem = None

    def _changed(self, info: ConsumerInfo) -> str | None:
        marked = MARK in (info.config.metadata or {})
        if self.created is not None and info.created != self.created and not marked:
            return "was replaced (created again by someone else)"
        changes = config_changes(info.config, self._want, WATCHED)
        if changes:
            return "changed: " + ", ".join(f"{k} {a!r} -> {b!r}"
                                           for k, (a, b) in changes.items())[:300]
        return None

    async def _recreate(self, why: str, *, delete: bool) -> None:
        start = (self.floor or 0) + 1
        self.problem = f"consumer {self.durable} {why}; re-created from stream sequence {start}"
        log.error("consumer %s on %s %s: re-creating it to start at stream sequence %d, "
                  "after the last one it acknowledged, so nothing that arrived meanwhile is "
                  "skipped", self.durable, self._stream, why, start)
        if delete:
            with contextlib.suppress(NotFoundError):
                await self._js.delete_consumer(self._stream, self.durable)
        config = dataclasses.replace(
            self._want, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
            metadata={**(self._want.metadata or {}), MARK: str(start)})
        try:
            info = await self._js.add_consumer(self._stream, config)
        except BadRequestError:  # another replica re-created it first
            info = await self._js.consumer_info(self._stream, self.durable)
        self.created = info.created
        self.recreated += 1


async def watch_durable(js: JetStreamContext, stream: str, config: ConsumerConfig,
                        every: float = CHECK_EVERY) -> ConsumerWatch:
    """Create the durable or bring it to `config` (workers.durables), note where it
    stands, and watch it from then on."""
    watch = ConsumerWatch(js, stream, await ensure_consumer(js, stream, config), every)
    await watch.check()
    watch.start()
    return watch
