"""Ports for service tests: a publisher that keeps what it was given, and ports that do
something at the worst moment (races set up through the store's ports, the same on the
memory store and the real one, instead of patching a service).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from contracts.impact import CorrectionImpact, ImpactWalk
from contracts.outgoing import OutgoingEvent
from services.ports import ImpactReads


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
