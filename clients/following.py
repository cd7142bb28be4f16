"""Following a correction to its outcome: every transition on
`corrections.events.<plan_id>.*`, which the stream keeps, so a correction that finished
before the call is still found."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from nats.js.client import JetStreamContext

from clients._durable import replay_from
from contracts.corrections import subjects
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.states import CORRECTION_LIFECYCLE
from contracts.shared.ids import is_ulid


def plan_events(plan_id: str) -> str:
    """`corrections.events.<plan_id>.*`: every transition of every correction of one plan."""
    if not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID, so not a safe subject token")
    return f"{subjects.EVENTS_PREFIX}.{plan_id.upper()}.*"


class CorrectionFollowing:
    """The following half of `CorrectionClient` (clients.operator)."""

    _js: JetStreamContext
    _requested_at: dict[str, int]
    """correction_id -> stream sequence of its request: its events all come later."""

    async def follow(self, correction_id: str, plan_id: str,
                     timeout: float = 120.0) -> AsyncIterator[CorrectionTransitioned]:
        """Every transition of the correction, in order, ending with the terminal one.

        An ordered consumer on `corrections.events.<plan_id>.*` from the request's own
        stream position when this client sent it (else from the start of the stream),
        so transitions published before the call are delivered too. Raises TimeoutError
        if the correction is not terminal within `timeout`.
        """
        start = self._requested_at.get(correction_id.upper())
        sub = await self._js.subscribe(plan_events(plan_id),
                                       ordered_consumer=True, config=replay_from(start))
        try:
            async with asyncio.timeout(timeout):
                while True:
                    msg = await sub.next_msg(timeout=None)
                    event = CorrectionTransitioned.model_validate_json(msg.data)
                    if event.correction_id != correction_id.upper():
                        continue
                    yield event
                    if CORRECTION_LIFECYCLE.is_terminal(event.to_status):
                        return
        finally:
            await sub.unsubscribe()

    async def wait_for_outcome(self, correction_id: str, plan_id: str,
                               timeout: float = 120.0) -> CorrectionTransitioned:
        """The terminal event: to_status APPLIED, FAILED (see `error`) or CANCELLED."""
        last: CorrectionTransitioned | None = None
        async for event in self.follow(correction_id, plan_id, timeout):
            last = event
        assert last is not None  # follow returns only after a terminal event
        return last
