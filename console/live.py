"""Live updates: the NATS events the ledger publishes, fanned out to open pages.

One core NATS subscription per subject family for the whole process (a view needs no
JetStream guarantees: a page that missed something reloads what it shows), and one
bounded queue per open page, filtered by plan. The bytes on those subjects come from
anyone allowed to publish there, so a message is forwarded only when it is a JSON
object of bounded size naming a well-formed plan; everything else is counted and
dropped. A page too slow to keep up loses its stream (the browser reconnects and
reloads) rather than making the console hold an unbounded backlog.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from contracts.corrections import subjects as correction_subjects
from contracts.decisions import subjects
from contracts.invariants import subjects as invariant_subjects
from contracts.shared.ids import is_ulid

log = logging.getLogger("console.live")

MAX_EVENT_BYTES = 64 * 1024
"""Larger payloads are not ledger events (those are a few KB at most): dropped."""
QUEUE_SIZE = 1000
"""Events held per page before that page is dropped as too slow."""
SUBJECTS = {
    f"{subjects.PERSISTED_PREFIX}.>": "decision",
    f"{correction_subjects.EVENTS_PREFIX}.>": "correction",
    invariant_subjects.ALL_EVENTS: "violation",
    f"{invariant_subjects.APPROVAL_PREFIX}.>": "approval",
    f"{invariant_subjects.HOLD_PREFIX}.>": "hold",
}
"""Subject family -> the SSE event name the page listens for."""
NESTED = {"approval": "approval", "hold": "hold"}
"""Kinds whose event carries what it is about under one key (ApprovalEvent.approval,
HoldEvent.hold): the fields are read there."""
KEPT_FIELDS = ("decision_id", "plan_id", "sequence_number", "decision_type",
               "parent_decision_id", "correction_id", "mode", "from_status", "to_status",
               "new_decision_id", "violation_id", "reason", "error", "status")
"""What a page needs from an event; anything else in it is not forwarded."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    kind: str
    plan_id: str
    data: dict[str, Any]

    def sse(self) -> bytes:
        return f"event: {self.kind}\ndata: {json.dumps(self.data)}\n\n".encode()


def parse(kind: str, raw: bytes) -> LiveEvent | None:
    """The event to forward, or None when the bytes are not a ledger event."""
    if len(raw) > MAX_EVENT_BYTES:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if isinstance(body, dict) and kind in NESTED:
        body = body.get(NESTED[kind])
    if not isinstance(body, dict):
        return None
    plan_id = body.get("plan_id")
    if not isinstance(plan_id, str) or not is_ulid(plan_id):
        return None
    kept = {k: v for k in KEPT_FIELDS
            if isinstance(v := body.get(k), str | int | float | bool | None) and k in body}
    for k, v in kept.items():
        if isinstance(v, str) and len(v) > 2000:
            kept[k] = v[:2000]
    return LiveEvent(kind, plan_id.upper(), kept)


@dataclass(eq=False)
class Listener:
    plan_id: str | None
    queue: asyncio.Queue[LiveEvent | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_SIZE))


class Hub:
    """Subscribes once; `listen(plan_id)` yields the events of one plan (or all)."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._subs: list[Subscription] = []
        self._listeners: set[Listener] = set()
        self.dropped = 0
        """Messages on the subjects that were not ledger events (hostile or foreign)."""
        self.forwarded = 0

    async def start(self) -> None:
        for subject, kind in SUBJECTS.items():
            self._subs.append(await self._nc.subscribe(subject, cb=self._handler(kind)))

    async def stop(self) -> None:
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be closing already
                log.debug("unsubscribe failed", exc_info=True)
        self._subs.clear()
        for listener in list(self._listeners):
            self._end(listener)

    def _handler(self, kind: str) -> Any:
        async def on_msg(msg: Msg) -> None:
            event = parse(kind, msg.data)
            if event is None:
                self.dropped += 1
                return
            self.publish(event)
        return on_msg

    def publish(self, event: LiveEvent) -> None:
        for listener in list(self._listeners):
            if listener.plan_id is not None and listener.plan_id != event.plan_id:
                continue
            try:
                listener.queue.put_nowait(event)
                self.forwarded += 1
            except asyncio.QueueFull:
                self._end(listener)

    def _end(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        while True:  # make room for the end marker
            try:
                listener.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                listener.queue.get_nowait()

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    async def listen(self, plan_id: str | None, keepalive: float = 15.0
                     ) -> AsyncIterator[bytes]:
        """SSE frames for one page until it goes away or falls behind."""
        listener = Listener(plan_id)
        self._listeners.add(listener)
        try:
            yield b"retry: 2000\n: connected\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(listener.queue.get(), keepalive)
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                if event is None:
                    return
                yield event.sse()
        finally:
            self._listeners.discard(listener)
