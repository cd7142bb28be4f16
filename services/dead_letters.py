"""Retrying dead letters: the one implementation `agents dead-letters retry` and the
console's Retry (one letter, or every letter a filter matches) both call.

A retry republishes the original payload, with the headers it kept, to its original
subject through JetStream, and deletes the dead letter once JetStream has stored it.
Only what a retry can fix is retried: the same bytes are refused again by a rule that
judges the message itself (its schema, its IDs, its size), so such a letter is refused
before anything is published, saying which rule, and is for discarding
(`agents dead-letters discard`, recorded through the workers). A letter refused for the
ledger's state (a parent not yet recorded, a plan blocked by an open violation, an
invariant not yet known) is retried only once that state changed; one whose deliveries
all failed (a server down) is always retried. If the worker refuses it again, that is
a new stream message and so a new dead letter (`<stream>:<new sequence>`).

The message keeps its Nats-Msg-Id, on purpose: it is the same decision or request, and
the ledger's idempotency rests on that ID. So a retry within the stream's duplicate
window (DECISIONS: 2 minutes, CORRECTIONS and INVARIANTS: 10 minutes) of the original
publish is dropped by JetStream as a duplicate: the retry is refused, the dead letter
kept, and the refusal says by when the window has passed at the latest.

A dead letter of a hostile message may hold it only in part (a payload over 64 KiB
keeps its first 64 KiB, its size and SHA-256; over-long headers or subject are cut):
such a letter is refused, since republishing a part would be a lie.

Ordering is what makes it safe: the letter is deleted only after the stream's answer,
so a publish that fails (or times out, and was stored after all) keeps the letter, and
retrying it again is deduplicated by its Nats-Msg-Id or made idempotent by the ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from contracts.families import STREAMS
from contracts.shared.dead_letter import DeadLetter
from contracts.shared.dead_letter_care import duplicate_window_end, retry_outlook, stream_of
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.timestamps import utc_now
from services.dead_letter_state import still_blocked
from services.ports.publishing import MessagePublisher, NotStored
from services.ports.records import DeadLetterShelf
from services.read_ports import LedgerReads

BULK_MAX = 500
"""Letters one bulk retry works through at most."""


class RetryRefusal(StrEnum):
    """Why a dead letter was not retried (each front end maps it to its own answer)."""

    UNKNOWN = "unknown"
    """No dead letter has that ID (never, or already retried)."""
    DISCARDED = "discarded"
    """An operator discarded it."""
    KEPT_IN_PART = "kept_in_part"
    """The letter holds the message only in part: nothing was published."""
    REFUSED_AGAIN = "refused_again"
    """A rule that judges the message itself refused it: the same bytes would be."""
    STILL_BLOCKED = "still_blocked"
    """What refused it is still so (its parent is still missing, its plan blocked)."""
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


def window_of(dead_letter_id: str) -> float | None:
    """The duplicate window of the letter's stream, in seconds."""
    name = stream_of(dead_letter_id)
    return next((s.duplicate_window for s in STREAMS if s.name == name), None)


class DeadLetterService:
    def __init__(self, letters: DeadLetterShelf, publisher: MessagePublisher,
                 reads: LedgerReads, clock: Callable[[], datetime] = utc_now) -> None:
        self._letters = letters
        self._publisher = publisher
        self._reads = reads
        self._clock = clock

    async def check(self, letter: DeadLetter) -> None:
        """RetryRefused when a retry of `letter` cannot succeed; nothing is published."""
        if letter.discarded_at is not None:
            raise RetryRefused(RetryRefusal.DISCARDED, letter.id,
                               f"dead letter {letter.id} was discarded by "
                               f"{letter.discarded_by}: {letter.discard_reason}")
        if letter.truncated:
            raise RetryRefused(RetryRefusal.KEPT_IN_PART, letter.id,
                               f"dead letter {letter.id} cannot be retried: it was "
                               f"{letter.kept_in_part()}; republish the original message "
                               "yourself, or discard it")
        outlook = retry_outlook(list(letter.errors))
        if not outlook.retryable:
            raise RetryRefused(RetryRefusal.REFUSED_AGAIN, letter.id,
                               f"dead letter {letter.id} is not retried: {outlook.why}; "
                               f"fix the sender, and discard it (agents dead-letters "
                               f"discard {letter.id} --reason ...)")
        blocked = await still_blocked(self._reads, letter)
        if blocked is not None:
            raise RetryRefused(RetryRefusal.STILL_BLOCKED, letter.id,
                               f"dead letter {letter.id} is not retried yet: {blocked}")

    async def why_not(self, letter: DeadLetter) -> str | None:
        """Why a retry of `letter` cannot succeed now (None: it may): what a front end
        shows beside the letter instead of a Retry that would fail."""
        try:
            await self.check(letter)
        except RetryRefused as exc:
            return str(exc)
        return None

    async def retry(self, dead_letter_id: str) -> Retried:
        """Republish the letter's message as first sent; delete the letter once stored.

        RetryRefused (with the reason) when it is unknown, discarded, kept in part, sure
        to be refused again, still blocked, dropped as a duplicate, or not stored; in
        the last two cases the letter is kept."""
        letter = await self._letters.get(dead_letter_id)
        if letter is None:
            raise RetryRefused(RetryRefusal.UNKNOWN, dead_letter_id,
                               f"no dead letter {dead_letter_id}")
        await self.check(letter)
        try:
            ack = await self._publisher.publish_message(letter.subject, letter.payload,
                                                        letter.headers)
        except NotStored as exc:
            raise RetryRefused(RetryRefusal.NOT_STORED, letter.id,
                               f"the retry of {letter.id} to {letter.subject} was not "
                               f"stored ({exc}); dead letter {letter.id} is kept") from None
        if ack.duplicate:
            raise RetryRefused(RetryRefusal.DUPLICATE, letter.id, self._duplicate(letter))
        deleted = await self._letters.delete(letter.id)
        return Retried(letter.id, letter.subject, ack.stream, ack.sequence, deleted)

    def _duplicate(self, letter: DeadLetter) -> str:
        msg_id = letter.headers.get(MSG_ID_HEADER)
        window = window_of(letter.id)
        when = "after the stream's duplicate window"
        if window is not None:
            end = duplicate_window_end(letter.rejected_at, window)
            wait = max(0, int((end - self._clock()).total_seconds()) + 1)
            when = (f"in {wait} s (at {end:%H:%M:%S} UTC at the latest: the window is "
                    f"{window:g} s from its first publish)")
        return (f"JetStream dropped the retry as a duplicate of Nats-Msg-Id {msg_id}; dead "
                f"letter {letter.id} is kept: retry it {when}")

    async def retry_matching(self, *, plan_id: str | None = None, rule: str | None = None,
                             limit: int = 100) -> list[Retried | RetryRefused]:
        """Retry every kept letter the filter matches (newest first, at most `limit`,
        BULK_MAX): each one's outcome, in order."""
        found = await self._reads.dead_letters.list(plan_id, min(limit, BULK_MAX), rule=rule)
        out: list[Retried | RetryRefused] = []
        for letter in found:
            try:
                out.append(await self.retry(letter.id))
            except RetryRefused as exc:
                out.append(exc)
        return out
