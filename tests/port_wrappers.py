"""Ports for service tests: a publisher that keeps what it was given, and ports that do
something at the worst moment (races set up through the store's ports, the same on the
memory store and the real one, instead of patching a service).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from contracts.impact.summary import CorrectionImpact
from contracts.impact.walk import ImpactWalk
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.outgoing import OutgoingEvent, StreamAck
from services.ports.publishing import NotStored
from services.ports.records import ImpactReads


class ImpactThen:
    """The impact port, doing `then` after each analysis: the tree (or the correction,
    or the lease) changes between the walk and the commit that relies on it."""

    def __init__(self, inner: ImpactReads, then: Callable[[int], Awaitable[None]]) -> None:
        self._inner = inner
        self._then = then
        self.calls = 0

    async def walk(self, target_decision_id: str, limit: int | None = None) -> ImpactWalk:
        return await self._inner.walk(target_decision_id, limit)

    async def impact(self, target_decision_id: str, limit: int | None = None
                     ) -> CorrectionImpact:
        found = await self._inner.impact(target_decision_id, limit)
        self.calls += 1
        await self._then(self.calls)
        return found

    async def sequence_mark(self, plan_id: str) -> int:
        return await self._inner.sequence_mark(plan_id)


class Published:
    """The publisher port, keeping what it was given (JetStream's dedup by msg_id)."""

    def __init__(self) -> None:
        self.events: dict[str, OutgoingEvent] = {}

    async def publish_all(self, events: Sequence[OutgoingEvent]) -> None:
        for e in events:
            self.events.setdefault(e.msg_id, e)

    def statuses(self, correction_id: str) -> list[str]:
        bodies = [json.loads(e.payload) for e in self.events.values()
                  if e.subject.startswith("corrections.events.")]
        return [b["to_status"] for b in bodies if b["correction_id"] == correction_id]

    def on(self, prefix: str) -> list[OutgoingEvent]:
        return [e for e in self.events.values() if e.subject.startswith(prefix)]


@dataclass(frozen=True)
class Message:
    subject: str
    payload: bytes
    headers: dict[str, str]


@dataclass
class Stream:
    """The one-message publisher port as JetStream answers it: a message whose subject
    starts with `prefix` is stored at the next sequence, unless its Nats-Msg-Id is in
    the duplicate window (`window`: the IDs it still remembers, with their sequence);
    any other subject, or every message while `down`, is NotStored."""

    name: str = "DECISIONS"
    prefix: str = "decisions."
    window: dict[str, int] = field(default_factory=dict)
    stored: list[Message] = field(default_factory=list)
    down: bool = False

    async def publish_message(self, subject: str, payload: bytes,
                              headers: Mapping[str, str]) -> StreamAck:
        if self.down:
            raise NotStored("no answer from JetStream within 5s")
        if not subject.startswith(self.prefix):
            raise NotStored(f"no stream takes subject {subject}")
        msg_id = headers.get(MSG_ID_HEADER)
        if msg_id is not None and msg_id in self.window:
            return StreamAck(self.name, self.window[msg_id], duplicate=True)
        self.stored.append(Message(subject, payload, dict(headers)))
        if msg_id is not None:
            self.window[msg_id] = len(self.stored)
        return StreamAck(self.name, len(self.stored), duplicate=False)
