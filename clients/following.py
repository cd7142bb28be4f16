"""Following a correction to its outcome: every transition on
`corrections.events.<plan_id>.*`, which the stream keeps, so a correction that finished
before the call is still found."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from nats.aio.client import Client

from clients._replay import StreamReplay
from contracts.corrections import subjects
from contracts.corrections.events import CorrectionTransitioned
from contracts.corrections.states import CORRECTION_LIFECYCLE
from contracts.shared.ids import is_ulid

log = logging.getLogger("clients")


def plan_events(plan_id: str) -> str:
    """`corrections.events.<plan_id>.*`: every transition of every correction of one plan."""
    if not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID, so not a safe subject token")
    return f"{subjects.EVENTS_PREFIX}.{plan_id.upper()}.*"


class CorrectionFollowing:
    """The following half of `CorrectionClient` (clients.operator)."""

    _nc: Client
    _requested_at: dict[str, int]
    """correction_id -> stream sequence of its request: its events all come later."""

    async def follow(self, correction_id: str, plan_id: str,
                     timeout: float = 120.0) -> AsyncIterator[CorrectionTransitioned]:
        """Every transition of the correction, in order, ending with the terminal one.

        `corrections.events.<plan_id>.*` read from the request's own stream position
        when this client sent it (else from the start of the stream), so transitions
        published before the call are delivered too. A message there that is not a
        transition of this plan is skipped (logged once). Raises TimeoutError if the
        correction is not terminal within `timeout`.
        """
        start = self._requested_at.get(correction_id.upper())
        unreadable = 0
        async with StreamReplay(self._nc, subjects.CORRECTIONS_STREAM, plan_events(plan_id),
                                start, [plan_events(plan_id)]) as replay:
            async with asyncio.timeout(timeout):
                while True:
                    msg = await replay.next()
                    try:
                        event = CorrectionTransitioned.model_validate_json(msg.data or b"")
                    except Exception:  # hostile bytes on the subject: never the outcome
                        unreadable += 1
                        if unreadable == 1:
                            log.warning("skipped a message on %s that is no transition",
                                        (msg.subject or "")[:120])
                        continue
                    if (event.correction_id != correction_id.upper()
                            or event.plan_id.upper() != plan_id.upper()):
                        continue
                    yield event
                    if CORRECTION_LIFECYCLE.is_terminal(event.to_status):
                        return

    async def wait_for_outcome(self, correction_id: str, plan_id: str,
                               timeout: float = 120.0) -> CorrectionTransitioned:
        """The terminal event: to_status APPLIED, FAILED (see `error`) or CANCELLED."""
        last: CorrectionTransitioned | None = None
        async for event in self.follow(correction_id, plan_id, timeout):
            last = event
        assert last is not None  # follow returns only after a terminal event
        return last
