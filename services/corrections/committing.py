"""The write path every step and every operator command shares: commit a correction's
changes together with the events announcing them, publish those from the outbox, and
end a correction FAILED.

A commit is conditional on the version read (and, for the runner's steps, on its
lease), so each end is committed, counted and announced once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime

from contracts.corrections.attempts import CorrectionAttemptRecord
from contracts.corrections.changes import AttemptChange, Changes, Versioned
from contracts.corrections.states import CorrectionAttemptState as A
from contracts.corrections.states import CorrectionMode
from contracts.corrections.states import CorrectionStatus as S
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.persistence import ResourceNotFoundError
from contracts.trust.signing import Signature
from services import outbox
from services.archive.writer import Archive
from services.corrections.messages import attempt_event, correction_event
from services.corrections.policy import CrashHook
from services.ports.corrections import CorrectionStorePort
from services.ports.publishing import CorrectionObserver, EventPublisher

log = logging.getLogger(__name__)


class Committer:
    """Commits and publishes for one service; holds no state between calls."""

    def __init__(self, store: CorrectionStorePort, publisher: EventPublisher,
                 archive: Archive, *, clock: Callable[[], datetime], crash: CrashHook,
                 observer: CorrectionObserver | None) -> None:
        self._store = store
        self._publisher = publisher
        self._archive = archive
        self._clock = clock
        self._crash = crash
        self._observer = observer

    async def get(self, correction_id: str) -> Versioned:
        v = await self._store.corrections.get(correction_id)
        if v is None:
            raise ResourceNotFoundError("correction", correction_id)
        return v

    async def commit(self, changes: Changes) -> None:
        now = self._clock()
        c = changes.correction
        if c.trace_context:  # every event of the correction continues the request's trace
            carried = tuple(c.trace_context.items())
            changes = dataclasses.replace(changes, events=[
                dataclasses.replace(e, headers=carried) for e in changes.events])
        await self._store.writer.commit(changes, now)
        if self._observer is not None and c.is_terminal:
            # The commit is conditional on the version read, so each end is counted once.
            self._observer.correction_ended(c.mode.value, c.status.value,
                                            (now - c.requested_at).total_seconds())
        status = changes.correction.status.value
        self._crash(f"after_commit:{status}")
        await self.flush(changes.correction.correction_id)
        self._crash(f"after_publish:{status}")

    async def fail(self, v: Versioned, error: str, owner: str | None,
                    attempt: CorrectionAttemptRecord | None, *, reason: str | None = None,
                    attempt_error: str | None = None, by: Signature | None = None) -> None:
        """FAILED with `error`; `owner` None for an operator's fail, which holds no lease
        (its write is conditional on the version read, like a cancel)."""
        c = v.correction
        now = self._clock()
        failed = c.transition(S.FAILED, now, error=error, reason=reason,
                              by=by.principal if by else None, signature=by)
        changes: list[AttemptChange] = []
        events: list[OutgoingEvent] = []
        if attempt is not None:
            gave_up = attempt.transition(A.FAILED, now, error=attempt_error or error)
            changes.append(AttemptChange(gave_up, A.EXECUTING))
            events.append(attempt_event(gave_up, A.EXECUTING, now))
        events.append(correction_event(failed))
        await self.commit(Changes(failed, v.version, lease_owner=owner, attempts=changes,
                                   events=events))
        if c.mode is CorrectionMode.REVERT:
            await self._archive.discard(c.plan_id, c.correction_id)
        log.info("correction %s FAILED: %s", c.correction_id, error,
                 extra={"correction_id": c.correction_id, "plan_id": c.plan_id})

    async def flush(self, correction_id: str) -> None:
        await outbox.flush(self._store.outbox, self._publisher, correction_id)
