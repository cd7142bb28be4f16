"""What a durable's retries ran out on, dead-lettered with the error of every attempt.

The consumer's MaxDeliver is finite; when JetStream gives up on a message it publishes
a max-deliveries advisory (core NATS), on which the message is fetched by its stream
sequence and dead-lettered through its handler (rule `max_deliveries`). The advisory
is not durable: a message exhausted while no worker listened is found at the next
start from `delivery_failures` (when its failures were recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from bootstrap.setting_types import Retry
from contracts.shared.dead_letter import dead_letter_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import describe
from services.tasks import stop_tasks
from store.deliveries import Attempt, DeliveryFailures
from workers.failures import FailureLog
from workers.inbound import Handler

log = logging.getLogger(__name__)

ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
ADVISORY_QUEUE = "ledger-max-deliveries"
"""Queue group: one worker of many handles each advisory."""
DEAD_LETTER_TRIES = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Waits between tries at dead-lettering an exhausted message (the database may be down)."""
STALE_FAILURES = timedelta(days=1)
"""Failure records this old belong to messages another worker settled since."""


class Exhaustion:
    """Listens for one durable's max-deliveries advisories and dead-letters each message."""

    def __init__(self, js: JetStreamContext, *, stream: str, durable: str, retry: Retry,
                 handler: Handler[Any], failures: FailureLog,
                 store: DeliveryFailures | None) -> None:
        self._js = js
        self._stream = stream
        self._durable = durable
        self._retry = retry
        self._handler = handler
        self._failures = failures
        self._store = store
        self._advisories: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        nc = self._js._nc  # the advisory is core NATS, on the same connection
        self._advisories = await nc.subscribe(
            f"{ADVISORY}.{self._stream}.{self._durable}", queue=ADVISORY_QUEUE,
            cb=self._on_advisory)
        self._spawn(self._sweep())

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        if self._advisories is not None:
            with contextlib.suppress(Exception):
                await self._advisories.unsubscribe()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_advisory(self, msg: Msg) -> None:
        try:
            body = json.loads(msg.data)
            seq, deliveries = int(body["stream_seq"]), int(body.get("deliveries") or 0)
        except Exception as exc:  # not an advisory we can use
            log.error("unreadable max-deliveries advisory on %s: %s", msg.subject,
                      describe(exc))
            return
        self._spawn(self._exhausted(seq, deliveries))

    async def _sweep(self) -> None:
        """Dead-letter what exhausted its deliveries while no worker heard the advisory."""
        if self._store is None:
            return
        try:
            keys = await self._store.exhausted(self._durable, self._retry.max_deliver)
        except Exception as exc:  # tried again at the next start
            log.warning("could not look for exhausted messages of %s: %s", self._durable,
                        describe(exc))
            return
        for key in keys:
            await self._exhausted(int(key.rsplit(":", 1)[1]), self._retry.max_deliver)
        with contextlib.suppress(Exception):
            await self._store.forget_older_than(self._durable, utc_now() - STALE_FAILURES)

    async def _exhausted(self, seq: int, deliveries: int) -> None:
        key = dead_letter_id(self._stream, seq)
        for wait in (*DEAD_LETTER_TRIES, None):
            try:
                await self._dead_letter(seq, deliveries)
                return
            except Exception as exc:  # retried, then logged as lost
                if wait is None:
                    log.error("could not dead-letter %s after its last delivery: %s; it "
                              "stays in the stream, unacknowledged", key, describe(exc))
                    return
                await asyncio.sleep(wait)

    async def _dead_letter(self, seq: int, deliveries: int) -> None:
        key = dead_letter_id(self._stream, seq)
        try:
            raw = await self._js.get_msg(self._stream, seq)
        except NotFoundError:
            log.error("%s exhausted its deliveries on %s but the stream no longer holds it",
                      key, self._durable)
            await self._failures.forget(key)
            return
        msg = Inbound(subject=raw.subject or "", headers=dict(raw.headers or {}),
                      data=raw.data or b"", stream_sequence=seq, delivered=deliveries)
        attempts = await self._failures.attempts(key)
        await self._handler.dead_letter(msg, exhausted_violations(
            self._durable, deliveries, self._retry.max_deliver, attempts))
        await self._failures.forget(key)
        log.error("%s on %s was delivered %d times without success; dead-lettered",
                  key, msg.subject, deliveries,
                  extra={"dead_letter_id": key, "subject": msg.subject})


def exhausted_violations(durable: str, deliveries: int, max_deliver: int,
                         attempts: Sequence[Attempt]) -> list[RuleViolation]:
    """The dead letter's errors: that retries ran out, then each attempt's error."""
    head = RuleViolation(
        rule=Rule.MAX_DELIVERIES,
        message=f"consumer {durable} delivered it {deliveries} times (MaxDeliver "
        f"{max_deliver}) without success; " + (
            f"{len(attempts)} failed attempt(s) follow" if attempts else
            "no failure was recorded (each delivery timed out: a worker died or hung "
            "holding it, or it was still waiting)"))
    return [head, *(RuleViolation(
        rule=Rule.MAX_DELIVERIES, field=None,
        message=f"delivery {a.delivered} at {a.at:%Y-%m-%dT%H:%M:%SZ}: {a.error}")
        for a in attempts)]
