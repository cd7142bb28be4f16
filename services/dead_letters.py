"""Retrying a dead letter: the one implementation `agents dead-letters retry` and the
console's Retry button both call.

A retry republishes the original payload, with its original headers, to its original
subject through JetStream, and deletes the dead letter once JetStream has stored it.
If the worker refuses it again, that is a new stream message and so a new dead letter
(`<stream>:<new sequence>`) with the reasons as they stand now; the old one is gone.

The message keeps its Nats-Msg-Id, on purpose: it is the same decision or request, and
the ledger's idempotency rests on that ID. So a retry within the stream's duplicate
window (DECISIONS: 2 minutes, CORRECTIONS and INVARIANTS: 10 minutes) of the original
publish is dropped by JetStream as a duplicate: the retry is refused and the dead
letter kept — retry once the window has passed.

A dead letter of a hostile message may hold it only in part (a payload over 64 KiB
keeps its first 64 KiB, its size and SHA-256; over-long headers or subject are cut):
such a letter is refused, since republishing a part would be a lie.

Ordering is what makes it safe: the letter is deleted only after the stream's answer,
so a publish that fails (or times out, and was stored after all) keeps the letter, and
retrying it again is deduplicated by its Nats-Msg-Id or made idempotent by the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contracts.shared.ids import MSG_ID_HEADER
from services.ports.publishing import MessagePublisher, NotStored
from services.ports.records import DeadLetterShelf


class RetryRefusal(StrEnum):
    """Why a dead letter was not retried (each front end maps it to its own answer)."""

    UNKNOWN = "unknown"
    """No dead letter has that ID (never, or already retried)."""
    KEPT_IN_PART = "kept_in_part"
    """The letter holds the message only in part: nothing was published."""
    DUPLICATE = "duplicate"
    """JetStream dropped it as a duplicate of its Nats-Msg-Id: the letter is kept."""
    NOT_STORED = "not_stored"
    """No stream stored it (or no answer came in time): the letter is kept."""


class RetryRefused(Exception):
    """One sentence saying what happened and what to do; `refusal` says which case."""

    def __init__(self, refusal: RetryRefusal, dead_letter_id: str, message: str) -> None:
        self.refusal = refusal
        self.dead_letter_id = dead_letter_id
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Retried:
    """The letter's message is stored again as `stream`:`stream_sequence`."""

    dead_letter_id: str
    subject: str
    stream: str
    stream_sequence: int
    deleted: bool
    """False only if another retry deleted the letter meanwhile."""


class DeadLetterService:
    def __init__(self, letters: DeadLetterShelf, publisher: MessagePublisher) -> None:
        self._letters = letters
        self._publisher = publisher

    async def retry(self, dead_letter_id: str) -> Retried:
        """Republish the letter's message as first sent; delete the letter once stored.

        RetryRefused (with the reason) when it is unknown, kept in part, dropped as a
        duplicate, or not stored; in the last two cases the letter is kept."""
        letter = await self._letters.get(dead_letter_id)
        if letter is None:
            raise RetryRefused(RetryRefusal.UNKNOWN, dead_letter_id,
                               f"no dead letter {dead_letter_id}")
        if letter.truncated:
            raise RetryRefused(RetryRefusal.KEPT_IN_PART, letter.id,
                               f"dead letter {letter.id} cannot be retried: it was "
                               f"{letter.kept_in_part()}; republish the original message "
                               "yourself")
        try:
            ack = await self._publisher.publish_message(letter.subject, letter.payload,
                                                        letter.headers)
        except NotStored as exc:
            raise RetryRefused(RetryRefusal.NOT_STORED, letter.id,
                               f"the retry of {letter.id} to {letter.subject} was not "
                               f"stored ({exc}); dead letter {letter.id} is kept") from None
        if ack.duplicate:
            msg_id = letter.headers.get(MSG_ID_HEADER)
            raise RetryRefused(RetryRefusal.DUPLICATE, letter.id,
                               f"JetStream dropped the retry as a duplicate of Nats-Msg-Id "
                               f"{msg_id} (stream {ack.stream} still remembers it); dead "
                               f"letter {letter.id} is kept — retry after the stream's "
                               "duplicate window")
        deleted = await self._letters.delete(letter.id)
        return Retried(letter.id, letter.subject, ack.stream, ack.sequence, deleted)
