"""An operator's commands on a correction: cancel it, fail it, retry it. Each reads the
correction, decides on the status it finds, and commits conditionally on the version
read; a concurrent change (the runner moved it) makes it decide again. A command the
status does not allow is refused, and the refusal published (once per status met)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from contracts.corrections.changes import Changes
from contracts.corrections.planning import validate_target
from contracts.corrections.record import Correction
from contracts.corrections.refusals import CancelRefused, FailRefused, RetryRefused
from contracts.corrections.states import CANCELLABLE, OPERATOR_FAILABLE, RETRYABLE
from contracts.corrections.states import CorrectionAttemptState as A
from contracts.corrections.states import CorrectionStatus as S
from contracts.shared.errors import DomainError
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.persistence import ConcurrentChange, ResourceNotFoundError
from contracts.trust.signing import Signature
from services.corrections.committing import Committer
from services.corrections.messages import correction_event
from services.ports.corrections import CorrectionStorePort
from services.ports.publishing import EventPublisher

Refusal = TypeVar("Refusal", CancelRefused, FailRefused, RetryRefused)


class OperatorCommands:
    def __init__(self, store: CorrectionStorePort, publisher: EventPublisher,
                 writes: Committer, *, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._publisher = publisher
        self._writes = writes
        self._clock = clock

    async def cancel(self, correction_id: str, reason: str | None = None, *,
                     plan_id: str | None = None,
                     by: Signature | None = None) -> Correction | CancelRefused:
        """CANCELLED from PENDING or ANALYZING; otherwise the refusal, which is also
        published to corrections.cancel_refused.<plan_id> (once per status met)."""
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse(correction_id, plan_id, None)
            c = v.correction
            if _cancelled_so(c, reason, by):
                return c  # this very cancel, applied as its request was recorded
            if c.status not in CANCELLABLE:
                return await self._refuse(correction_id, c.plan_id, c.status)
            cancelled = c.transition(S.CANCELLED, self._clock(), reason=reason,
                                     by=by.principal if by else None, signature=by)
            try:
                await self._writes.commit(Changes(cancelled, v.version,
                                           events=[correction_event(cancelled)]))
            except ConcurrentChange:
                continue  # the runner moved it meanwhile: decide again on what it is now
            return cancelled

    async def fail(self, correction_id: str, reason: str, *, plan_id: str | None = None,
                   by: Signature | None = None) -> Correction | FailRefused:
        """An operator ends a correction stuck in ANALYZING or EXECUTING as FAILED.

        The reason becomes the correction's error (and its executing attempt, if any,
        ends FAILED with it). A runner still working it loses its next conditional
        write and stops. Otherwise the refusal is returned and published to
        corrections.fail_refused.<plan_id> (once per status met).
        """
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse_fail(correction_id, plan_id, None)
            c = v.correction
            if c.status not in OPERATOR_FAILABLE:
                return await self._refuse_fail(correction_id, c.plan_id, c.status)
            attempts = await self._store.attempts.list_by_correction(correction_id)
            running = next((a for a in reversed(attempts) if a.state is A.EXECUTING), None)
            try:
                await self._writes.fail(v, f"failed by an operator: {reason}", None, running,
                                        reason=reason, by=by)
            except ConcurrentChange:
                continue  # the runner moved it meanwhile: decide again on what it is now
            failed = await self._writes.get(correction_id)
            return failed.correction

    async def retry(self, correction_id: str, retry_id: str, *,
                    plan_id: str | None = None, reason: str | None = None,
                    by: Signature | None = None) -> Correction | RetryRefused:
        """An operator starts a new round of a FAILED correction: FAILED -> PENDING.

        The runner (or the recovery sweep, which runs every plan with unfinished
        corrections) then analyses it again and executes it in a new attempt; the earlier
        attempts stay, so `list_attempts` shows every try. A retry whose `retry_id` is
        already in the history is not applied twice (a redelivery). Refused, and the
        refusal published to corrections.retry_refused.<plan_id>, when the correction is
        not FAILED, or when its target can no longer be corrected (a new round would
        end FAILED again, so the operator is told why instead).
        """
        while True:
            v = await self._store.corrections.get(correction_id)
            if v is None or (plan_id is not None and v.correction.plan_id != plan_id):
                return await self._refuse_retry(correction_id, plan_id, None, 1)
            c = v.correction
            if c.retried_by(retry_id):
                return c
            if c.status not in RETRYABLE:
                return await self._refuse_retry(correction_id, c.plan_id, c.status,
                                                c.round_of())
            try:  # a read to refuse early only: the runner validates the target again
                validate_target(c.request(), await self._store.decisions.get(c.decision_id))
            except DomainError as exc:
                return await self._refuse_retry(correction_id, c.plan_id, c.status,
                                                c.round_of(), target_error=str(exc))
            who = by.principal if by else "an unverified sender"
            why = f"retried by {who}" + (f": {reason}" if reason else "")
            # No attempt is added while FAILED, and the write below is conditional on the
            # version read, so this count is exact.
            before = len(await self._store.attempts.list_by_correction(correction_id))
            retried = c.transition(S.PENDING, self._clock(), reason=why[:1000],
                                   retry_id=retry_id, attempts_before=before,
                                   by=by.principal if by else None, signature=by)
            try:
                await self._writes.commit(Changes(retried, v.version,
                                           events=[correction_event(retried)]))
            except ConcurrentChange:
                continue  # retried (or cancelled) meanwhile: decide again on what it is now
            return retried

    async def _refuse(self, correction_id: str, plan_id: str | None,
                      status: S | None) -> CancelRefused:
        if plan_id is None:  # no plan to address the refusal to
            raise ResourceNotFoundError("correction", correction_id)
        return await self._publish(CancelRefused.for_status(correction_id, plan_id, status))

    async def _refuse_fail(self, correction_id: str, plan_id: str | None,
                           status: S | None) -> FailRefused:
        if plan_id is None:
            raise ResourceNotFoundError("correction", correction_id)
        return await self._publish(FailRefused.for_status(correction_id, plan_id, status))

    async def _refuse_retry(self, correction_id: str, plan_id: str | None,
                            status: S | None, round_: int, *,
                            target_error: str | None = None) -> RetryRefused:
        if plan_id is None:
            raise ResourceNotFoundError("correction", correction_id)
        return await self._publish(RetryRefused.for_status(
            correction_id, plan_id, status, round_, target_error=target_error))

    async def _publish(self, refused: Refusal) -> Refusal:
        await self._publisher.publish_all([OutgoingEvent(
            refused.subject, refused.model_dump_json().encode(), refused.msg_id)])
        return refused


def _cancelled_so(c: Correction, reason: str | None, by: Signature | None) -> bool:
    """Already CANCELLED by a cancel like this one: with its reason, by no one else.

    The correction consumer applies a cancel it finds in the stream after a queued
    request as it records the request (workers.corrections); the cancel consumer then
    meets the same cancel message. Refusing it ("is cancelled") told the operator, and
    every subscriber of cancel_refused, that a cancel which worked had failed."""
    if c.status is not S.CANCELLED or not c.history:
        return False
    last = c.history[-1]
    return last.reason == reason and last.by in (None, by.principal if by else None)
