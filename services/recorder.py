"""Record a pulled batch of decision messages: the recorder worker's whole behaviour.

Order of effects, chosen so that a crash at any point loses and doubles nothing:
  1. read and validate each message; triage the batch against what is stored;
  2. in one transaction, reserve sequence numbers per plan and insert the accepted
     decisions with one bulk write, each noting the stream message that wrote it
     (`store`: from here on the next batch may be triaged);
  3. publish the persisted events (Nats-Msg-Id `persisted:<id>`), wait for JetStream;
  4. keep rejected messages in dead_letters, then report them;
  5. only then tell the caller to ack (`announce` does 3 to 5).
A crash before 5 means redelivery of the same stream message: its decision is found
stored, written by that very message, so its event is published again under the same
Nats-Msg-Id, which JetStream drops if it already had it. A publisher's retry is a
different stream message: it finds the decision written by another and publishes
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.decisions.subjects import (
    DECISIONS_STREAM,
    persisted,
    persisted_msg_id,
    plan_of_subject,
    rejected,
    rejected_msg_id,
)
from contracts.recording.events import DecisionRejected, persisted_body
from contracts.recording.facts import Resume
from contracts.recording.message import Candidate, Invalid, read_message
from contracts.recording.triage import triage_batch
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.ids import is_ulid
from contracts.shared.inbound import Inbound
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.tracing import trace_headers
from contracts.shared.unreadable import guarded
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords, RecordedDecisions

log = logging.getLogger(__name__)

RACE_RETRIES = 3


class Verdict(StrEnum):
    ACK = "ack"    # stored (or already stored): done
    TERM = "term"  # rejected and dead-lettered: never redeliver
    NAK = "nak"    # parent not stored yet: redeliver after `delay`


@dataclass(frozen=True, slots=True)
class Disposition:
    verdict: Verdict
    delay: float = 0.0


@dataclass(frozen=True)
class RecorderPolicy:
    parent_wait_seconds: float = 60.0
    """How long a decision may wait for its parent before it is dead-lettered."""
    min_backoff_seconds: float = 0.25
    max_backoff_seconds: float = 5.0
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """A larger message is dead-lettered unread (payload_too_large)."""

    def backoff(self, waited: float) -> float:
        """About as long again as it has waited: 0.25 s, 0.25 s, 0.5 s, 1 s, 2 s, ...
        capped; quick when the parent is merely behind."""
        return float(min(self.max_backoff_seconds, max(self.min_backoff_seconds, waited)))

    def deliveries_to_wait(self) -> int:
        """How many deliveries the whole parent wait takes at most (each nak is one); the
        recorder's MaxDeliver adds this to the deliveries allowed for failures."""
        waited, n = 0.0, 1
        while waited < self.parent_wait_seconds:
            waited += self.backoff(waited)
            n += 1
        return n


class ParentWaitClock(Protocol):
    async def since(self, keys: Iterable[str], now: datetime) -> dict[str, datetime]:
        """When each message first waited for its parent (`now` for the new ones)."""
        ...


class MemoryWaits:
    """The wait clock of one process, for tests and tools without a database clock."""

    def __init__(self) -> None:
        self._since: dict[str, datetime] = {}

    async def since(self, keys: Iterable[str], now: datetime) -> dict[str, datetime]:
        return {k: self._since.setdefault(k, now) for k in keys}


def wait_key(stream_sequence: int) -> str:
    return dead_letter_id(DECISIONS_STREAM, stream_sequence)


def subject_plan(subject: str) -> str | None:
    plan = plan_of_subject(subject)
    return plan.upper() if plan and is_ulid(plan) else None


def read_guarded(msg: Inbound, now: datetime,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Candidate | Invalid:
    """`read_message`, with any exception it raises made this message's `unreadable`."""
    result = guarded(lambda: read_message(msg, now, max_payload_bytes))
    if isinstance(result, RuleViolation):
        return Invalid(msg.stream_sequence, subject_plan(msg.subject), (result,))
    return result


def persisted_event(d: Decision,
                    trace: Mapping[str, str] | None = None) -> OutgoingEvent:
    """The decision's persisted event; `trace` is the trace context its message carried,
    continued on the event (contracts.shared.tracing)."""
    return OutgoingEvent(persisted(d.plan_id), persisted_body(d),
                         persisted_msg_id(d.decision_id),
                         tuple(trace.items()) if trace else ())


@dataclass
class ReadBatch:
    """A batch after the single-message rules: candidates, and the messages to dead-letter."""

    batch: Sequence[Inbound]
    now: datetime
    candidates: list[Candidate] = field(default_factory=list)
    letters: dict[int, DeadLetter] = field(default_factory=dict)
    resume: dict[int, Resume] = field(default_factory=dict)
    """By stream sequence: where the agent of a decision refused as stale goes on."""
    by_seq: dict[int, Inbound] = field(init=False)
    """The batch's messages by stream sequence."""

    def __post_init__(self) -> None:
        self.by_seq = {m.stream_sequence: m for m in self.batch}

    def reject(self, msg: Inbound, plan_id: str | None, decision_id: str | None,
               violations: Sequence[RuleViolation]) -> None:
        self.letters[msg.stream_sequence] = DeadLetter.of_message(
            id=dead_letter_id(DECISIONS_STREAM, msg.stream_sequence), subject=msg.subject,
            headers=msg.headers, data=msg.data, plan_id=plan_id, decision_id=decision_id,
            errors=violations, rejected_at=self.now, delivered=msg.delivered)


@dataclass
class Committed:
    """A batch after its transaction: what to announce, and the waits already decided."""

    read: ReadBatch
    written: list[Decision] = field(default_factory=list)
    redelivered: list[Candidate] = field(default_factory=list)
    verdicts: dict[int, Disposition] = field(default_factory=dict)


class RecorderService:
    def __init__(self, decisions: RecordedDecisions, dead_letters: DeadLetterRecords,
                 publisher: EventPublisher,
                 policy: RecorderPolicy | None = None,
                 waits: ParentWaitClock | None = None) -> None:
        self._decisions = decisions
        self._dead_letters = dead_letters
        self._publisher = publisher
        self.policy = policy or RecorderPolicy()
        self._waits = waits or MemoryWaits()

    async def record(self, batch: Sequence[Inbound]) -> dict[int, Disposition]:
        """Dispositions by stream sequence, for every message of the batch."""
        return await self.record_read(self.read(batch))

    def read(self, batch: Sequence[Inbound]) -> ReadBatch:
        """The CPU-only first half: the worker runs it for the next batch while the
        current one waits on the database."""
        now = utc_now()
        limit = self.policy.max_payload_bytes
        return self.collect(batch, now, [read_guarded(msg, now, limit) for msg in batch])

    def collect(self, batch: Sequence[Inbound], now: datetime,
                results: Sequence[Candidate | Invalid]) -> ReadBatch:
        """The batch's read results (one per message, in order) as a ReadBatch."""
        read = ReadBatch(batch, now)
        for msg, result in zip(batch, results, strict=True):
            if isinstance(result, Invalid):
                read.reject(msg, result.plan_id, None, result.violations)
            else:
                read.candidates.append(result)
        return read

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        """Keep and report one message outside a batch (its retries were exhausted)."""
        read = ReadBatch([msg], utc_now())
        read.reject(msg, subject_plan(msg.subject), None, violations)
        await self._reject(read.letters, read.now)

    async def record_read(self, read: ReadBatch) -> dict[int, Disposition]:
        """The second half: decide against the store, write, publish, report."""
        return await self.announce(await self.store(read))

    async def store(self, read: ReadBatch) -> Committed:
        """Decide against the store and write, in one transaction: once this returns, a
        later batch may read the store (`announce` does not change what it reads)."""
        now, candidates = read.now, read.candidates
        by_seq = read.by_seq
        reject = read.reject
        out = Committed(read)

        todo = candidates
        # A first delivery is nearly always of a decision not stored yet, so the first
        # try skips asking which are (one read per 50 IDs): a triage that accepts the
        # whole batch is then the triage the full facts would give, unless an ID is taken,
        # which the insert finds (unique _id) and which sends the batch round again with
        # the full facts. So does a triage that does not accept every decision, since a
        # stored one would have been a redelivery or a duplicate instead.
        optimistic = all(m.delivered == 1 for m in read.batch)
        for _ in range(RACE_RETRIES + optimistic):
            facts = await self._decisions.facts_for(todo, existing=not optimistic)
            triage = triage_batch(todo, facts)
            if optimistic and len(triage.accept) != len(todo):
                optimistic = False
                continue
            stored = await self._decisions.insert_recorded(triage.accept, now, facts.epochs)
            optimistic = False
            if stored is None:
                # Another worker stored one of these first (or its triage's root), or a
                # revert changed one of their plans, or (optimistic) one of them was
                # stored already: triage them again against the store.
                continue
            out.written, out.redelivered, waiting = stored, triage.redelivered, triage.wait
            read.resume.update(triage.resume)
            for c, violations in triage.reject:
                reject(by_seq[c.stream_sequence], c.decision.plan_id, c.decision.decision_id,
                       violations)
            break
        else:
            raise RuntimeError("a batch kept racing with another writer; it will be redelivered")

        # Only when something waits: one more round trip, for when each began waiting
        # (in seconds: deliveries spent in a database outage are not waiting).
        clock = utc_now()
        since = await self._waits.since(
            (wait_key(c.stream_sequence) for c in waiting), clock) if waiting else {}
        for c in waiting:
            msg = by_seq[c.stream_sequence]
            waited = (clock - since[wait_key(c.stream_sequence)]).total_seconds()
            if waited < self.policy.parent_wait_seconds:
                out.verdicts[c.stream_sequence] = Disposition(Verdict.NAK,
                                                              self.policy.backoff(waited))
            else:
                reject(msg, c.decision.plan_id, c.decision.decision_id, (RuleViolation(
                    rule=Rule.PARENT_EXISTS, field="parent_decision_id",
                    message=f"parent not found: {c.decision.parent_decision_id} was not "
                    f"recorded within {self.policy.parent_wait_seconds:g}s"),))
        return out

    async def announce(self, stored: Committed) -> dict[int, Disposition]:
        """Publish the persisted events, keep and report the rejected messages; then
        every message's disposition (ack only now: after its events are out)."""
        read, verdicts = stored.read, stored.verdicts
        by_seq = read.by_seq
        traces = {c.decision.decision_id: trace for c in read.candidates
                  if (trace := trace_headers(by_seq[c.stream_sequence].headers))}
        await self._publish_persisted(stored.written, stored.redelivered, traces)
        await self._reject(read.letters, read.now, read.resume)
        for seq in read.letters:
            verdicts[seq] = Disposition(Verdict.TERM)
        for c in read.candidates:
            verdicts.setdefault(c.stream_sequence, Disposition(Verdict.ACK))
        return verdicts

    async def _publish_persisted(self, written: list[Decision],
                                 redelivered: list[Candidate],
                                 traces: Mapping[str, Mapping[str, str]]) -> None:
        events = [persisted_event(d, traces.get(d.decision_id)) for d in written]
        if redelivered:
            stored = await self._decisions.get_many(c.decision.decision_id for c in redelivered)
            events += [persisted_event(d, traces.get(d.decision_id)) for d in stored.values()]
        if events:
            await self._publisher.publish_all(events)

    async def _reject(self, letters: dict[int, DeadLetter], now: datetime,
                      resume: dict[int, Resume] | None = None) -> None:
        """Keep first, then report: a crash between the two redelivers the message,
        which is kept once (its ID is its stream position) and reported again under
        the same Nats-Msg-Id."""
        if not letters:
            return
        await self._dead_letters.keep(list(letters.values()))
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
        await self._publisher.publish_all(events)


