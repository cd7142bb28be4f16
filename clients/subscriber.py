"""The subscriber's side: typed correction events and a durable feed of outcomes.

    feed = outcomes(nc, statuses={"applied", "failed"}, durable="billing-sync")
    async for event in feed:          # CorrectionTransitioned
        await react(event)            # acked once this returns and the loop asks for more

The feed is a durable JetStream consumer on CORRECTIONS: the server remembers what this
`durable` name has acknowledged, so a service that was down gets what it missed when it
comes back, and several replicas sharing one name split the events between them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import BadRequestError

from contracts import correction_subjects as subjects
from contracts.correction_events import AttemptTransitioned, CancelRefused, CorrectionTransitioned
from contracts.corrections import CorrectionStatus
from contracts.ids import is_ulid

__all__ = [
    "AttemptTransitioned", "CancelRefused", "CorrectionTransitioned", "Outcomes",
    "event_subjects", "outcomes", "parse_event",
]

log = logging.getLogger(__name__)

MAX_DELIVER = 10
"""Deliveries of one event before the server gives up on it (then logged as an ERROR)."""
BACKOFF: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds before an event whose loop body raised comes back, by failure count."""
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"

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

    Bounded retries: when the loop body raises (or breaks), the event comes back after
    `backoff[n]` seconds (n = how many times it failed, the last value repeating); after
    `max_deliver` deliveries the server gives up on it and this feed logs an ERROR with
    its stream sequence (read it with `js.get_msg("CORRECTIONS", seq)`). A body that is
    not an event this library can read (whatever the parser raises) is terminated and
    logged, never retried, and never holds back the events behind it. The durable's
    settings are brought to these values when the feed opens.
    """

    def __init__(self, nc: Client, *, statuses: Iterable[CorrectionStatus | str],
                 durable: str, plan_id: str | None = None, limit: int | None = None,
                 ack_wait: float = 60.0, from_start: bool = False,
                 poll_timeout: float = 5.0, max_deliver: int = MAX_DELIVER,
                 backoff: Sequence[float] = BACKOFF) -> None:
        self._js = nc.jetstream()
        self._filters = event_subjects(statuses, plan_id)
        self._durable = durable
        self._limit = limit
        self._ack_wait = ack_wait
        self._from_start = from_start
        self._poll = poll_timeout
        self._max_deliver = max_deliver
        self._backoff = tuple(backoff) or BACKOFF
        self._sub: Any = None
        self._advisory: Any = None
        self._nc = nc

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
            filter_subjects=None if one else self._filters,
            max_deliver=self._max_deliver,
            # JetStream takes the first value as the ack wait; fewer values than MaxDeliver.
            backoff=[max(self._ack_wait, b) for b in self._backoff][:max(1,
                                                                    self._max_deliver - 1)])
        try:
            # Creates the durable, or updates an existing one to these settings.
            await self._js.add_consumer(subjects.CORRECTIONS_STREAM, config)
        except BadRequestError as exc:
            # It exists with another configuration: fine if it reads the same subjects.
            info = await self._js.consumer_info(subjects.CORRECTIONS_STREAM, self._durable)
            existing = sorted(info.config.filter_subjects or [info.config.filter_subject or ""])
            if existing != self._filters:
                raise ValueError(
                    f"durable {self._durable!r} already reads {existing}, not "
                    f"{self._filters}; pick another durable name") from exc
        self._advisory = await self._nc.subscribe(
            f"{MAX_DELIVERIES_ADVISORY}.{subjects.CORRECTIONS_STREAM}.{self._durable}",
            cb=self._exhausted)
        self._sub = await self._js.pull_subscribe_bind(durable=self._durable,
                                                       stream=subjects.CORRECTIONS_STREAM)

    async def _exhausted(self, msg: Msg) -> None:
        try:
            seq = json.loads(msg.data).get("stream_seq")
        except Exception:  # the advisory itself is unreadable: say so anyway
            seq = None
        log.error("durable %s gave up on the event at stream sequence %s of %s after %d "
                  "deliveries: it will not be delivered again", self._durable, seq,
                  subjects.CORRECTIONS_STREAM, self._max_deliver)

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
                except Exception as exc:
                    # Not an event this library understands (whatever the parser raised):
                    # retrying cannot help, and it must not hold back the others.
                    log.error("terminating unreadable event on %s: %s", msg.subject,
                              _bounded(exc))
                    await _settle_quietly(msg.term())
                    continue
                try:
                    yield event
                except BaseException:
                    # The loop body raised or broke off (an async generator cannot tell
                    # which: both arrive as its closing): back after the backoff delay.
                    await _settle_quietly(msg.nak(delay=self._delay(msg)))
                    raise
                await msg.ack_sync()
                delivered += 1
        finally:
            await self._sub.unsubscribe()
            self._sub = None
            if self._advisory is not None:
                await _settle_quietly(self._advisory.unsubscribe())
                self._advisory = None

    def _delay(self, msg: Msg) -> float:
        try:
            n = msg.metadata.num_delivered
        except Exception:
            n = 1
        return self._backoff[min(max(n, 1), len(self._backoff)) - 1]

    async def _next(self) -> Msg:
        while True:
            try:
                msgs = await self._sub.fetch(1, timeout=self._poll)
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # nothing yet; keep the pull open
            if msgs:
                return msgs[0]  # type: ignore[no-any-return]


async def _settle_quietly(reply: Awaitable[None]) -> None:
    try:
        await reply
    except Exception:  # best effort: ack_wait redelivers it anyway
        log.debug("nak/term failed; the event is redelivered after ack_wait", exc_info=True)


def _bounded(exc: BaseException, limit: int = 300) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    return text if len(text) <= limit else f"{text[:limit]}..."


def outcomes(nc: Client, *, statuses: Iterable[CorrectionStatus | str] = ("applied", "failed"),
             durable: str, plan_id: str | None = None, limit: int | None = None,
             ack_wait: float = 60.0, from_start: bool = False,
             max_deliver: int = MAX_DELIVER, backoff: Sequence[float] = BACKOFF) -> Outcomes:
    """The durable feed of correction outcomes (see `Outcomes` for ack semantics)."""
    return Outcomes(nc, statuses=statuses, durable=durable, plan_id=plan_id, limit=limit,
                    ack_wait=ack_wait, from_start=from_start, max_deliver=max_deliver,
                    backoff=backoff)
