"""The subscriber's side: typed correction events and a durable feed of outcomes.

    feed = outcomes(nc, statuses={"applied", "failed"}, durable="billing-sync")
    async for event in feed:          # CorrectionTransitioned
        await react(event)            # acked once this returns and the loop asks for more

The feed is a durable JetStream consumer on CORRECTIONS: the server remembers what this
`durable` name has acknowledged, so a service that was down gets what it missed when it
comes back, and several replicas sharing one name split the events between them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import BadRequestError
from pydantic import ValidationError

from contracts import correction_subjects as subjects
from contracts.correction_events import AttemptTransitioned, CancelRefused, CorrectionTransitioned
from contracts.corrections import CorrectionStatus
from contracts.ids import is_ulid

__all__ = [
    "AttemptTransitioned", "CancelRefused", "CorrectionTransitioned", "Outcomes",
    "event_subjects", "outcomes", "parse_event",
]

log = logging.getLogger(__name__)

TERMINAL: frozenset[CorrectionStatus] = frozenset(
    {CorrectionStatus.APPLIED, CorrectionStatus.FAILED, CorrectionStatus.CANCELLED})


def parse_event(msg: Msg | bytes) -> CorrectionTransitioned:
    """A `corrections.events.*.*` message as its model; pydantic's ValidationError if not one."""
    data = msg if isinstance(msg, bytes) else msg.data
    return CorrectionTransitioned.model_validate_json(data)


def event_subjects(statuses: Iterable[CorrectionStatus | str],
                   plan_id: str | None = None) -> list[str]:
    """`corrections.events.<plan_id or *>.<status>` for each status, sorted."""
    if plan_id is not None and not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID")
    plan = plan_id.upper() if plan_id else "*"
    return sorted(f"{subjects.EVENTS_PREFIX}.{plan}.{CorrectionStatus(s).value}"
                  for s in set(statuses))


class Outcomes:
    """A durable feed of CorrectionTransitioned events; iterate it with `async for`.

    Ack semantics (at least once): an event is acknowledged when the loop body that
    received it has finished and the loop asks for the next one (or, with `limit`,
    when the limit is reached). If the body raises, or the loop is left with `break`,
    the event in hand is not acknowledged: it is nak'ed and comes back, to this
    durable, on the next read. So a crash mid-processing never loses an event, and the
    price is that an event may be processed twice: make the reaction idempotent (an
    event's `event_id`, or `correction_id` with `to_status`, identifies it). An event
    not acknowledged within `ack_wait` seconds is redelivered even while the loop is
    still busy with it.

    A new durable starts with the events published after it is created (`open`);
    pass `from_start=True` to begin with everything the stream still holds.
    """

    def __init__(self, nc: Client, *, statuses: Iterable[CorrectionStatus | str],
                 durable: str, plan_id: str | None = None, limit: int | None = None,
                 ack_wait: float = 60.0, from_start: bool = False,
                 poll_timeout: float = 5.0) -> None:
        self._js = nc.jetstream()
        self._filters = event_subjects(statuses, plan_id)
        self._durable = durable
        self._limit = limit
        self._ack_wait = ack_wait
        self._from_start = from_start
        self._poll = poll_timeout
        self._sub: Any = None

    async def open(self) -> None:
        """Create (or reuse) the durable consumer; from here on nothing published is missed."""
        if self._sub is not None:
            return
        one = len(self._filters) == 1
        config = ConsumerConfig(
            durable_name=self._durable, ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self._ack_wait,
            deliver_policy=DeliverPolicy.ALL if self._from_start else DeliverPolicy.NEW,
            filter_subject=self._filters[0] if one else None,
            filter_subjects=None if one else self._filters)
        try:
            await self._js.add_consumer(subjects.CORRECTIONS_STREAM, config)
        except BadRequestError as exc:
            # It exists with another configuration: fine if it reads the same subjects.
            info = await self._js.consumer_info(subjects.CORRECTIONS_STREAM, self._durable)
            existing = sorted(info.config.filter_subjects or [info.config.filter_subject or ""])
            if existing != self._filters:
                raise ValueError(
                    f"durable {self._durable!r} already reads {existing}, not "
                    f"{self._filters}; pick another durable name") from exc
        self._sub = await self._js.pull_subscribe_bind(durable=self._durable,
                                                       stream=subjects.CORRECTIONS_STREAM)

    def __aiter__(self) -> AsyncIterator[CorrectionTransitioned]:
        return self._events()

    async def _events(self) -> AsyncIterator[CorrectionTransitioned]:
        await self.open()
        delivered = 0
        try:
            while self._limit is None or delivered < self._limit:
                msg = await self._next()
                try:
                    event = parse_event(msg)
                except ValidationError as exc:
                    # Not an event this library understands: retrying cannot help.
                    log.error("terminating unreadable event on %s: %s", msg.subject, exc)
                    await msg.term()
                    continue
                try:
                    yield event
                except BaseException:
                    await _nak_quietly(msg)
                    raise
                await msg.ack_sync()
                delivered += 1
        finally:
            await self._sub.unsubscribe()
            self._sub = None

    async def _next(self) -> Msg:
        while True:
            try:
                msgs = await self._sub.fetch(1, timeout=self._poll)
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # nothing yet; keep the pull open
            if msgs:
                return msgs[0]  # type: ignore[no-any-return]


async def _nak_quietly(msg: Msg) -> None:
    try:
        await msg.nak()
    except Exception:  # best effort: ack_wait redelivers it anyway
        log.debug("nak failed; the event is redelivered after ack_wait", exc_info=True)


def outcomes(nc: Client, *, statuses: Iterable[CorrectionStatus | str] = ("applied", "failed"),
             durable: str, plan_id: str | None = None, limit: int | None = None,
             ack_wait: float = 60.0, from_start: bool = False) -> Outcomes:
    """The durable feed of correction outcomes (see `Outcomes` for ack semantics)."""
    return Outcomes(nc, statuses=statuses, durable=durable, plan_id=plan_id, limit=limit,
                    ack_wait=ack_wait, from_start=from_start)
