"""A correction command that cannot be read (request, cancel, fail or retry): kept in
dead_letters and reported on corrections.rejected.<plan_id|unknown>, never retried."""

from __future__ import annotations

import logging
from datetime import datetime

from contracts.corrections import subjects
from contracts.corrections.refusals import CorrectionRejected
from contracts.corrections.subjects import CORRECTIONS_STREAM
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.unreadable import Unreadable
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords

log = logging.getLogger(__name__)


async def reject(dead_letters: DeadLetterRecords, publisher: EventPublisher, now: datetime,
                 *, subject: str, headers: dict[str, str], data: bytes,
                 stream_sequence: int, delivered: int, unreadable: Unreadable) -> None:
    """Keep an unreadable request or cancel in dead_letters, then report it (once per
    stream message, whoever retries): bad input is never retried."""
    letter = DeadLetter.of_message(
        id=dead_letter_id(CORRECTIONS_STREAM, stream_sequence), subject=subject,
        headers=headers, data=data, plan_id=unreadable.plan_id, decision_id=None,
        errors=unreadable.violations, rejected_at=now, delivered=delivered)
    await dead_letters.keep([letter])
    body = CorrectionRejected(
        dead_letter_id=letter.id, subject=subject, plan_id=unreadable.plan_id,
        correction_id=unreadable.message_id, errors=letter.errors, rejected_at=now)
    await publisher.publish_all([OutgoingEvent(
        subjects.rejected(unreadable.plan_id), body.model_dump_json().encode(),
        subjects.rejected_msg_id(stream_sequence))])
    log.warning("rejected %s on %s: %s", letter.id, subject, unreadable.reason,
                extra={"dead_letter_id": letter.id, "subject": subject,
                       "plan_id": unreadable.plan_id})
