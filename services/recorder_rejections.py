"""The recorder's rejected messages: kept in dead_letters, then reported on
decisions.rejected.<plan_id|unknown> (with where to resume, for a stale decision)."""

from __future__ import annotations

import logging
from datetime import datetime

from contracts.decisions.subjects import rejected, rejected_msg_id
from contracts.recording.events import DecisionRejected
from contracts.recording.facts import Resume
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.outgoing import OutgoingEvent
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords

log = logging.getLogger(__name__)


async def reject_letters(dead_letters: DeadLetterRecords, publisher: EventPublisher,
                         letters: dict[int, DeadLetter], now: datetime,
                         resume: dict[int, Resume] | None = None) -> None:
    """Keep first, then report: a crash between the two redelivers the message,
    which is kept once (its ID is its stream position) and reported again under
    the same Nats-Msg-Id."""
    if not letters:
        return
    await dead_letters.keep(list(letters.values()))
    events = []
    for seq, dl in letters.items():
        body = DecisionRejected(
            dead_letter_id=dl.id, subject=dl.subject, plan_id=dl.plan_id,
            decision_id=dl.decision_id, errors=dl.errors, rejected_at=now,
            resume=(resume or {}).get(seq))
        events.append(OutgoingEvent(rejected(dl.plan_id), body.model_dump_json().encode(),
                                    rejected_msg_id(seq)))
        log.warning("rejected %s on %s: %s", dl.id, dl.subject,
                    "; ".join(str(e) for e in dl.errors))
    await publisher.publish_all(events)


