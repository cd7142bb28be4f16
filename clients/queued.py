"""Correction requests still in the CORRECTIONS stream, not yet taken up by a worker.

A request is stored by JetStream before any worker records it: while the workers are
stopped (or behind), it waits there. Reading it back from the stream is how the CLI and
the console show a correction from the moment it was requested ("queued", with who and
when), instead of answering "no correction is recorded" until a worker comes.

The requests worth reading are those after the request consumer's ack floor (every
request at or before it was recorded and acked); each is read by its stream sequence
(`$JS.API.STREAM.MSG.GET`, which the operator's role may use), at most `limit` of
them. A request past the floor may be recorded already (the worker acks after running
its plan), so the caller drops those its store knows. Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import nats.js.errors
from nats.aio.client import Client
from pydantic import ValidationError

from contracts.corrections import subjects
from contracts.corrections.requests import CancelRequest, CorrectionRequest

__all__ = ["QUEUED_MAX", "Queued", "QueuedCancel", "queued_cancel", "queued_requests"]

QUEUED_MAX = 200
"""Stream messages read at most for one listing."""


@dataclass(frozen=True, slots=True)
class Queued:
    """A request the stream holds that no worker has acked yet."""

    request: CorrectionRequest
    stream_sequence: int
    stored_at: datetime | None
    """When JetStream stored it: when it was requested."""


@dataclass(frozen=True, slots=True)
class QueuedCancel:
    """A cancel the stream holds, with what its sender signed: who sent it is what a
    worker verifies from these, never read from the body."""

    request: CancelRequest
    subject: str
    headers: dict[str, str]
    data: bytes
    stored_at: datetime | None


async def _floor(js: nats.js.JetStreamContext) -> int:
    """The first stream sequence a queued request can have."""
    try:
        info = await js.consumer_info(subjects.CORRECTIONS_STREAM, subjects.CORRECTOR_DURABLE)
        return (info.ack_floor.stream_seq if info.ack_floor else 0) + 1
    except nats.js.errors.NotFoundError:  # no worker ever ran: every request is queued
        return 1


def _time(raw: object) -> datetime | None:
    """When JetStream stored a message, as a UTC datetime (nats-py parses it; an older
    one handed over the RFC 3339 text, nanoseconds and `Z`)."""
    if isinstance(raw, datetime):
        return raw.replace(tzinfo=UTC) if raw.tzinfo is None else raw.astimezone(UTC)
    if not isinstance(raw, str):
        return None
    text = raw.strip().removesuffix("Z")
    head, dot, frac = text.partition(".")
    try:
        moment = datetime.fromisoformat(head + (dot + frac[:6] if dot else ""))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


async def queued_requests(nc: Client, *, plan_id: str | None = None,
                          limit: int = QUEUED_MAX) -> list[Queued]:
    """The requests after the request consumer's ack floor, oldest first (of one plan,
    or all), at most `limit` stream messages read. Unreadable ones are skipped: the
    workers dead-letter them."""
    js = nc.jetstream()
    subject = subjects.requested(plan_id) if plan_id else f"{subjects.REQUESTED_PREFIX}.*"
    seq = await _floor(js)
    out: list[Queued] = []
    for _ in range(limit):
        try:
            raw = await js.get_msg(subjects.CORRECTIONS_STREAM, seq=seq, subject=subject,
                                   next=True)
        except nats.js.errors.NotFoundError:
            break
        if raw.seq is None:
            break
        seq = raw.seq + 1
        try:
            request = CorrectionRequest.model_validate_json(raw.data or b"")
        except ValidationError:
            continue
        out.append(Queued(request, raw.seq, _time(raw.time)))
    return out


async def queued_cancel(nc: Client, correction_id: str, plan_id: str, after: int,
                        limit: int = 50) -> QueuedCancel | None:
    """A cancel of the correction stored after its request (stream sequence `after`),
    if one is in the stream."""
    js = nc.jetstream()
    seq = after + 1
    for _ in range(limit):
        try:
            raw = await js.get_msg(subjects.CORRECTIONS_STREAM, seq=seq,
                                   subject=subjects.cancel(plan_id), next=True)
        except nats.js.errors.NotFoundError:
            return None
        if raw.seq is None:
            return None
        seq = raw.seq + 1
        try:
            cancel = CancelRequest.model_validate_json(raw.data or b"")
        except ValidationError:
            continue
        if cancel.correction_id == correction_id:
            return QueuedCancel(cancel, raw.subject or subjects.cancel(plan_id),
                                dict(raw.headers or {}), raw.data or b"", _time(raw.time))
    return None
