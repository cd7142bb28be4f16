"""What a violation report produces besides its record: the event announcing a change
to it, and the dead letter of a report that cannot be read."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from contracts.invariants import subjects
from contracts.invariants.violations import InvariantViolation
from contracts.invariants.wire import ViolationEvent, ViolationEventType, ViolationRejected
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.unreadable import Unreadable
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords

log = logging.getLogger(__name__)


def violation_event(kind: ViolationEventType, invariant_name: str | None
                    ) -> Callable[[InvariantViolation, bool], OutgoingEvent]:
    """The outbox entry announcing a change, built inside the change's transaction (which
    is where the plan's blocked state after it is known)."""
    def build(v: InvariantViolation, blocked: bool) -> OutgoingEvent:
        e = ViolationEvent(event_type=kind, violation=v, invariant_name=invariant_name,
                           plan_blocked=blocked)
        return OutgoingEvent(e.subject, e.model_dump_json().encode(), e.msg_id)
    return build


async def reject_report(dead_letters: DeadLetterRecords, publisher: EventPublisher,
                        now: datetime, *, subject: str, headers: dict[str, str], data: bytes,
                        stream_sequence: int, delivered: int,
                        unreadable: Unreadable) -> DeadLetter:
    """Keep a report that will never be stored in dead_letters, then say so on
    invariants.rejected.<plan_id>; once per stream message, whoever retries."""
    letter = DeadLetter.of_message(
        id=dead_letter_id(subjects.INVARIANTS_STREAM, stream_sequence), subject=subject,
        headers=headers, data=data, plan_id=unreadable.plan_id, decision_id=None,
        errors=unreadable.violations, rejected_at=now, delivered=delivered)
    await dead_letters.keep([letter])
    body = ViolationRejected(
        dead_letter_id=letter.id, subject=subject, plan_id=unreadable.plan_id,
        violation_id=unreadable.message_id, errors=letter.errors, rejected_at=now)
    await publisher.publish_all([OutgoingEvent(
        subjects.rejected(unreadable.plan_id), body.model_dump_json().encode(),
        subjects.rejected_msg_id(stream_sequence))])
    log.warning("rejected violation report %s on %s: %s", letter.id, subject,
                unreadable.reason)
    return letter

