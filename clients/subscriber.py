"""The subscriber's side: typed correction events and a durable feed of outcomes.

    feed = outcomes(nc, statuses={"applied", "failed"}, durable="billing-sync")
    async for event in feed:          # CorrectionTransitioned
        await react(event)            # acked once this returns and the loop asks for more

The feed is a durable JetStream consumer on CORRECTIONS: the server remembers what this
`durable` name has acknowledged, so a service that was down gets what it missed when it
comes back, and several replicas sharing one name split the events between them.

Under per-principal permissions the durable is one the subscriber declares in the
principals file (`consumers`), created with one filter within `corrections.events`:
one status's subject, or every status's when several are asked for (the others are
acknowledged and skipped). Only what the durable delivers on its subject is read
(clients._feed_guard); an event whose body names another plan or status than its
subject is terminated, never yielded.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence

from nats.aio.client import Client
from nats.aio.msg import Msg

from clients._durable import (
    BACKOFF,
    MAX_DELIVER,
    DurablePull,
    DurableSpec,
    bounded,
    settle_quietly,
)
from contracts.corrections import subjects
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.states import CorrectionStatus
from contracts.shared.ids import is_ulid
from contracts.shared.subject_tokens import plan_of

__all__ = ["Outcomes", "event_subjects", "outcomes", "parse_event"]

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


def events_filter(statuses: Iterable[CorrectionStatus | str], plan_id: str | None = None
                  ) -> str:
    """The one filter of a feed of `statuses`: that status's subject, or every status's
    (`corrections.events.<plan_id or *>.*`) when there are several."""
    wanted = event_subjects(statuses, plan_id)
    return wanted[0] if len(wanted) == 1 else wanted[0].rsplit(".", 1)[0] + ".*"


def _consistent(subject: str, event: CorrectionTransitioned) -> bool:
    """The body names the plan and the status its subject does."""
    token = (plan_of(subject, subjects.EVENTS_PREFIX) or "").upper()
    return token == event.plan_id.upper() and subject.rsplit(".", 1)[-1] == event.to_status


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
        statuses = {CorrectionStatus(s) for s in statuses}
        self._pull = DurablePull(nc, DurableSpec(
            stream=subjects.CORRECTIONS_STREAM, durable=durable,
            filter_subject=events_filter(statuses, plan_id), ack_wait=ack_wait,
            from_start=from_start, max_deliver=max_deliver, backoff=backoff))
        self._statuses = statuses
        self._limit = limit
        self._poll = poll_timeout

    async def open(self) -> None:
        """Create (or reuse) the durable consumer; from here on nothing published is missed."""
        await self._pull.open()

    def __aiter__(self) -> AsyncIterator[CorrectionTransitioned]:
        return self._events()

    async def _events(self) -> AsyncIterator[CorrectionTransitioned]:
        await self.open()
        delivered = 0
        try:
            while self._limit is None or delivered < self._limit:
                msg = await self._pull.next(self._poll)
                try:
                    event = parse_event(msg)
                    if not _consistent(msg.subject, event):
                        raise ValueError(f"its body is about plan {event.plan_id}, status "
                                         f"{event.to_status}")
                except Exception as exc:
                    # Not an event this library understands (whatever the parser raised),
                    # or not the one its subject names: retrying cannot help, and it must
                    # not hold back the others.
                    log.error("terminating unreadable event on %s: %s", msg.subject,
                              bounded(exc))
                    await settle_quietly(msg.term())
                    continue
                if event.to_status not in self._statuses:
                    await settle_quietly(msg.ack())  # a status this feed does not yield
                    continue
                try:
                    yield event
                except BaseException:
                    # The loop body raised or broke off (an async generator cannot tell
                    # which: both arrive as its closing): back after the backoff delay.
                    await settle_quietly(msg.nak(delay=self._pull.spec.delay(msg)))
                    raise
                await msg.ack_sync()
                delivered += 1
        finally:
            await self._pull.close()


def outcomes(nc: Client, *, statuses: Iterable[CorrectionStatus | str] = ("applied", "failed"),
             durable: str, plan_id: str | None = None, limit: int | None = None,
             ack_wait: float = 60.0, from_start: bool = False,
             max_deliver: int = MAX_DELIVER, backoff: Sequence[float] = BACKOFF) -> Outcomes:
    """The durable feed of correction outcomes (see `Outcomes` for ack semantics)."""
    return Outcomes(nc, statuses=statuses, durable=durable, plan_id=plan_id, limit=limit,
                    ack_wait=ack_wait, from_start=from_start, max_deliver=max_deliver,
                    backoff=backoff)
