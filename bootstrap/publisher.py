"""JetStream side of `services.ports.publishing.EventPublisher` and `MessagePublisher`.

`JetStreamPublisher` publishes over a connection it is given; `PublisherOnDemand` is
the one an opened ledger hands its services, which takes the connection from its
source only when something is first published (a CLI command that only reads never
connects to NATS).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from bootstrap.event_log import log_event
from bootstrap.nats_source import NatsSource
from contracts.families import FAMILIES, event_headers
from contracts.shared.cloudevents import DEFAULT_SCHEMA_BASE
from contracts.shared.families import Direction
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.outgoing import OutgoingEvent, StreamAck
from contracts.shared.timestamps import utc_now
from contracts.trust.signing import Signer
from services.ports.publishing import EventPublisher, MessagePublisher, NotStored
from services.turns import Turns

__all__ = ["JetStreamPublisher", "Publisher", "PublisherOnDemand"]


class Publisher(EventPublisher, MessagePublisher, Protocol):
    """Both publishing ports: events for the services, one message as given for a dead
    letter's retry."""


def inbound_kind(subject: str) -> str | None:
    """The inbound family `subject` belongs to (what a worker must sign: the reconciler's
    invariant_enforced decisions), or None for an event."""
    return next((f.name for f in FAMILIES if f.direction is Direction.INBOUND
                 and subject.startswith(f.name + ".")), None)


class JetStreamPublisher:
    """Every event the services publish goes out here, with its CloudEvents headers
    (contracts.families.event_headers) beside its trace context and Nats-Msg-Id; what it
    sends to an inbound family (the reconciler's decisions) is signed with the worker's key."""

    def __init__(self, nc: Client, ack_timeout: float = 10.0,
                 signer: Signer | None = None,
                 schema_base: str = DEFAULT_SCHEMA_BASE) -> None:
        """`signer`: the worker's own key, which signs what it sends to an inbound family
        (events need no signature: only workers may publish them)."""
        self._js: JetStreamContext = nc.jetstream(publish_async_max_pending=10_000)
        self._ack_timeout = ack_timeout
        self._signer = signer
        self._schema_base = schema_base

    def _headers(self, e: OutgoingEvent, now: datetime) -> dict[str, str]:
        ce = event_headers(e.subject, e.msg_id, e.payload, e.time or now, self._schema_base,
                           known=dict(e.known) if e.known else None)
        headers = {**ce, **dict(e.headers), MSG_ID_HEADER: e.msg_id}
        kind = inbound_kind(e.subject) if self._signer is not None else None
        if self._signer is not None and kind is not None:
            headers |= self._signer.headers(kind=kind, subject=e.subject, msg_id=e.msg_id,
                                            body=e.payload)
        return headers

    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        # Pipelined: send all, then wait for every PubAck, instead of one round trip each.
        # Sending does not yield on its own, so the loop gets a turn every few
        # milliseconds: the other batch in flight gets its database replies taken up
        # meanwhile (services.turns).
        futures = []
        sent: list[tuple[dict[str, str], bytes]] = []
        turns = Turns()
        now = utc_now()  # published together: one time (and its text written once)
        for e in events:
            await turns.take()
            headers = self._headers(e, now)
            futures.append(await self._js.publish_async(e.subject, e.payload, headers=headers))
            sent.append((headers, e.payload))
        if futures:
            await asyncio.wait_for(asyncio.gather(*futures), self._ack_timeout)
        # Once the stream has them: corrections and violations as log events too.
        for headers, payload in sent:
            log_event(headers, payload)

    async def publish_message(self, subject: str, payload: bytes,
                              headers: Mapping[str, str]) -> StreamAck:
        """One message as given, and JetStream's answer (duplicate flag included)."""
        try:
            ack = await self._js.publish(subject, payload, headers=dict(headers) or None,
                                         timeout=self._ack_timeout)
        except nats.js.errors.NoStreamResponseError:
            raise NotStored(f"no stream takes subject {subject}") from None
        except nats.errors.TimeoutError:
            raise NotStored(f"no answer from JetStream within {self._ack_timeout:g}s") from None
        except nats.errors.Error as exc:  # APIError (a refusal), a closed connection
            raise NotStored(f"{type(exc).__name__}: {exc}") from None
        return StreamAck(ack.stream, ack.seq, bool(ack.duplicate))


class PublisherOnDemand:
    """A JetStreamPublisher made over the source's connection at the first publish."""

    def __init__(self, nats: NatsSource, ack_timeout: float,
                 signer: Signer | None = None,
                 schema_base: str = DEFAULT_SCHEMA_BASE) -> None:
        self._nats = nats
        self._ack_timeout = ack_timeout
        self._signer = signer
        self._schema_base = schema_base
        self._publisher: JetStreamPublisher | None = None

    async def _made(self) -> JetStreamPublisher:
        if self._publisher is None:
            self._publisher = JetStreamPublisher(await self._nats.client(), self._ack_timeout,
                                                 self._signer, self._schema_base)
        return self._publisher

    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        await (await self._made()).publish_all(events)

    async def publish_message(self, subject: str, payload: bytes,
                              headers: Mapping[str, str]) -> StreamAck:
        return await (await self._made()).publish_message(subject, payload, headers)
