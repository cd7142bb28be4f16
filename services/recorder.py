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

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from contracts.decisions.model import Decision
from contracts.recording.message import Candidate, Invalid
from contracts.recording.triage import triage_batch
from contracts.redaction.decisions import redact_decision
from contracts.shared.inbound import Inbound
from contracts.shared.persistence import LeaseFence
from contracts.shared.rules import Rule, RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.tracing import trace_headers
from contracts.trust.policy import Identity
from services.invariant_gate import GateService
from services.ports.publishing import EventPublisher
from services.ports.records import DeadLetterRecords, RecordedDecisions
from services.recorder_batch import (
    Committed,
    ReadBatch,
    announced,
    read_guarded,
    subject_plan,
)
from services.recorder_policy import (
    Disposition,
    MemoryWaits,
    ParentWaitClock,
    RecorderPolicy,
    Verdict,
    wait_key,
)
from services.recorder_rejections import reject_letters

RACE_RETRIES = 3


class RecorderService:
    def __init__(self, decisions: RecordedDecisions, dead_letters: DeadLetterRecords,
                 publisher: EventPublisher,
                 policy: RecorderPolicy | None = None,
                 waits: ParentWaitClock | None = None, *,
                 gates: GateService | None = None) -> None:
        self._decisions = decisions
        self._gates = gates
        """The invariants' gate (services.invariant_gate); None: no invariant is evaluated."""
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
        limit, skew = self.policy.max_payload_bytes, self.policy.created_at_max_skew
        return self.collect(batch, now, [read_guarded(msg, now, limit, skew) for msg in batch])

    def collect(self, batch: Sequence[Inbound], now: datetime,
                results: Sequence[Candidate | Invalid],
                identities: Sequence[Identity] | None = None) -> ReadBatch:
        """The batch's read results (one per message, in order) as a ReadBatch, each
        candidate with who sent it as verified (`identities`; None: unverified)."""
        read = ReadBatch(batch, now)
        rules = self.policy.redaction
        for msg, result, who in zip(batch, results, identities or [None] * len(batch),
                                    strict=True):
            if isinstance(result, Invalid):
                read.reject(msg, result.plan_id, None, result.violations)
                continue
            # Redacted after the content hash (a redelivery compares what was sent) and
            # before anything is stored or announced.
            decision, marks = redact_decision(rules, result.decision)
            kept = replace(result, decision=decision, redactions=marks) if marks else result
            read.candidates.append(replace(kept, identity=who) if who else kept)
        return read

    def lay_out(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with their records laid out ahead of `write_batch` (CPU only:
        the worker does it while the batch before is written)."""
        return self._decisions.lay_out(candidates)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        """Keep and report one message outside a batch (its retries were exhausted)."""
        read = ReadBatch([msg], utc_now())
        read.reject(msg, subject_plan(msg.subject), None, violations)
        await reject_letters(self._dead_letters, self._publisher, read.letters, read.now)

    async def record_read(self, read: ReadBatch) -> dict[int, Disposition]:
        """The second half: decide against what is stored, write, publish, report."""
        return await self.announce(await self.write_batch(read))

    async def write_batch(self, read: ReadBatch, fence: LeaseFence | None = None
                          ) -> Committed:
        """Decide against what is stored and write the batch, in one transaction: once
        this returns, a later batch may read the decisions (`announce` does not change
        what it reads). `fence`: the partition's lease the transaction holds (LeaseLost,
        nothing written, once another replica took it)."""
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
        gates = self._gates.begin(len(todo)) if self._gates is not None and todo else None
        for _ in range(RACE_RETRIES + optimistic):
            if gates is None:
                facts, gate = await self._decisions.facts_for(todo, existing=not optimistic), None
            else:
                facts, gate = await gates.facts(self._decisions, todo, existing=not optimistic)
            triage = triage_batch(todo, facts, gate)
            if optimistic and len(triage.accept) != len(todo):
                optimistic = False
                continue
            effects = gates.effects(gate, facts, now) if gates is not None else None
            stored = await self._decisions.insert_recorded(triage.accept, now, facts.epochs,
                                                           facts.ownership, effects, fence=fence)
            optimistic = False
            if stored is None:
                # Another worker stored one of these first (or its triage's root), or a
                # revert changed one of their plans, or (optimistic) one of them was
                # stored already: triage them again against the store.
                continue
            out.written, out.redelivered, waiting = stored, triage.redelivered, triage.wait
            if gates is not None and effects is not None:
                await gates.committed(gate, effects)
                out.holds = {h.decision_id: h.status.value for h in effects.holds}
            read.resume.update(triage.resume)
            for c, violations in triage.reject:
                reject(by_seq[c.stream_sequence], c.decision.plan_id, c.decision.decision_id,
                       violations)
            break
        else:
            raise RuntimeError("a batch kept racing with another writer; it will be redelivered")

        await self._judge_waits(out, waiting)
        return out

    async def _judge_waits(self, out: Committed, waiting: Sequence[Candidate]) -> None:
        """Nak each decision still waiting for its parent, with a backoff; dead-letter it
        once it waited parent_wait_seconds. Only when something waits: one more round
        trip, for how long each has waited (in seconds between sightings, a gap counted
        as at most wait_gap_max_seconds: a database outage, a hand-over or a step of the
        clock is not waiting)."""
        if not waiting:
            return
        waits = await self._waits.waited((wait_key(c.stream_sequence) for c in waiting),
                                         self.policy.wait_gap_max_seconds)
        for c in waiting:
            msg = out.read.by_seq[c.stream_sequence]
            waited = waits[wait_key(c.stream_sequence)]
            if waited < self.policy.parent_wait_seconds:
                out.verdicts[c.stream_sequence] = Disposition(Verdict.NAK,
                                                              self.policy.backoff(waited))
            else:
                out.read.reject(msg, c.decision.plan_id, c.decision.decision_id, (RuleViolation(
                    rule=Rule.PARENT_EXISTS, field="parent_decision_id",
                    message=f"parent not found: {c.decision.parent_decision_id} was not "
                    f"recorded within {self.policy.parent_wait_seconds:g}s"),))

    async def announce(self, stored: Committed) -> dict[int, Disposition]:
        """Publish the persisted events, keep and report the rejected messages; then
        every message's disposition (ack only now: after its events are out)."""
        read, verdicts = stored.read, stored.verdicts
        by_seq = read.by_seq
        traces = {c.decision.decision_id: trace for c in read.candidates
                  if (trace := trace_headers(by_seq[c.stream_sequence].headers))}
        await self._publish_persisted(stored.written, stored.redelivered, traces,
                                      stored.holds)
        await reject_letters(self._dead_letters, self._publisher, read.letters, read.now,
                             read.resume)
        for seq in read.letters:
            verdicts[seq] = Disposition(Verdict.TERM)
        for c in read.candidates:
            verdicts.setdefault(c.stream_sequence, Disposition(Verdict.ACK))
        return verdicts

    async def _publish_persisted(self, written: list[Decision],
                                 redelivered: list[Candidate],
                                 traces: Mapping[str, Mapping[str, str]],
                                 holds: Mapping[str, str]) -> None:
        events = [e for d in written
                  for e in announced(d, traces.get(d.decision_id), holds.get(d.decision_id))]
        if redelivered:
            stored = await self._decisions.get_many(c.decision.decision_id for c in redelivered)
            events += [e for d in stored.values()
                       for e in announced(d, traces.get(d.decision_id))]
        if events:
            await self._publisher.publish_all(events)
