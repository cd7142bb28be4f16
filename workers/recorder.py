"""The recorder worker: a durable JetStream pull consumer over `services.recorder`.

Each message is read on its own (the pipeline's guard makes one that raises an
`unreadable` dead letter); the batch goes to the service in two calls: `store` (plan
and write, one transaction), after which the batch hands off so the next one is
planned and written meanwhile, then `announce` (events out, batches in commit order),
which says per message whether to ack, nak with a delay (its parent is not stored
yet), or terminate (dead-lettered). An exception from the service (the database is
down) fails the batch: each message is nak'ed with the consumer's backoff and the error
is remembered, and after MaxDeliver deliveries it is dead-lettered (rule
max_deliveries). The service is idempotent, so redelivery is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from nats.aio.msg import Msg

from bootstrap.settings import Settings
from contracts.recording.families import RECORDED
from contracts.recording.message import Candidate, Invalid, read_message
from contracts.shared.inbound import Inbound
from contracts.shared.partitions import unpartitioned
from contracts.shared.persistence import LeaseLost
from contracts.shared.rules import RuleViolation
from services.recorder import RecorderService
from services.recorder_batch import Committed, ReadBatch, subject_plan
from services.recorder_policy import Disposition, RecorderPolicy, Verdict
from services.turns import Turns
from workers import upkeep
from workers.batch import Batch
from workers.deps import Deps, HandlerClass
from workers.inbound import to_inbound
from workers.parent_wakes import ParentWakes

log = logging.getLogger(__name__)

def parent_waits(settings: Settings) -> int:
    """The deliveries a wait for a parent may take (those naks are waits, not failures)."""
    policy = RecorderPolicy(parent_wait_seconds=settings.recorder_parent_wait_seconds)
    return policy.deliveries_to_wait()


Read = Candidate | Invalid


class Prepared(NamedTuple):
    """A batch as `RecorderConsumer.prepare` left it: its messages as read, collected."""

    inbound: list[Inbound]
    read: ReadBatch


def published(msg: Inbound) -> Inbound:
    """The message with the subject it was published to: the stream stores a partitioned
    recording by partition (`decisions.recorded.<k>.<plan_id>`: contracts.shared.
    partitions), and everything past the read (the subject's plan checked against the
    decision's, a rejection's subject, a dead letter retried through the same mapping
    again) speaks of the subject the agent used."""
    subject = unpartitioned(RECORDED.name, msg.subject)
    return msg if subject == msg.subject else dataclasses.replace(msg, subject=subject)


class RecorderConsumer:
    """Maps a pulled batch onto the service and its verdicts onto ack / nak / term.

    Its durable has no consumer BackOff (the declaration's backoff_after_ack_wait):
    JetStream indexes it by delivery count, and a decision's deliveries count its waits
    for a parent (naks), so one that had waited a few times and was then held by a
    worker that died came back only after 120 to 300 s, and its children, waiting
    meanwhile, would outlast their parent wait and be dead-lettered as parent_exists
    though acknowledged (docs/operations.md, Fault runs at scale). Failed deliveries
    still back off by their failures (the worker's nak delay, CONSUMER_BACKOFF); a
    worker that died hands its messages back after the ack wait, MaxDeliver times at
    most."""

    def __init__(self, deps: Deps) -> None:
        self._service: Callable[[], RecorderService] = deps.recorder
        self._settings = deps.settings
        self.trust = deps.trust_for(RECORDED)
        # Batches announce in the order they committed (asyncio's lock is first come,
        # first served, and each batch asks for it as soon as it hands off).
        self._announcing = asyncio.Lock()
        self._read: dict[int, Inbound] = {}
        """Each message as `read` saw it, by stream sequence, until its batch is decided
        (a batch decided again message by message reads the rest afresh)."""
        self._nc = deps.nc
        self._wakes = ParentWakes()
        """The deliveries nak'ed while their parent was not stored, woken once a batch
        stores it (workers.parent_wakes)."""

    def read(self, m: Msg, now: datetime) -> Read:
        msg = published(to_inbound(m))
        self._read[msg.stream_sequence] = msg  # for `decide`, read once per delivery
        policy = self._service().policy
        return read_message(msg, now, policy.max_payload_bytes, policy.created_at_max_skew)

    def unreadable(self, m: Msg, why: RuleViolation) -> Read:
        return Invalid(m.metadata.sequence.stream,
                       subject_plan(unpartitioned(RECORDED.name, m.subject)), (why,))

    async def prepare(self, batch: Batch[Read]) -> None:
        """Redact the batch's decisions and lay out their records (workers.inbound.
        Preparing): most of the CPU between the start of a batch's write and its insert,
        done while the batch before it is written instead, giving the loop a turn every
        few milliseconds so that batch's round trips are not held up (services.turns)."""
        svc = self._service()
        inbound, read = self._collect(batch, svc)
        todo, read.candidates = read.candidates, []
        turns = Turns()
        for c in todo:
            await turns.take()
            read.candidates += svc.lay_out([c])
        batch.prepared = Prepared(inbound, read)

    def _collect(self, batch: Batch[Read], svc: RecorderService) -> Prepared:
        inbound = [self._inbound(m) for m in batch.msgs]
        return Prepared(inbound, svc.collect(inbound, batch.now, batch.reads,
                                             batch.identities))

    async def decide(self, batch: Batch[Read]) -> None:
        """Write, then hand off: the next batch reads and writes the store while this
        one's events go out and its messages are settled."""
        svc = self._service()
        prepared = batch.prepared
        inbound, read = (prepared if isinstance(prepared, Prepared)
                         else self._collect(batch, svc))
        try:
            stored = await svc.write_batch(
                read, batch.lease.fence if batch.lease is not None else None)
        except LeaseLost as exc:
            batch.hand_off()
            await self._not_ours(batch, exc)
            return
        batch.hand_off()
        async with self._announcing:
            verdicts = await svc.announce(stored)
            await self._settle(batch, inbound, verdicts)
            self._note_waits(batch, stored, verdicts)
            await self._wake(batch, stored)

    def _note_waits(self, batch: Batch[Read], stored: Committed,
                    verdicts: dict[int, Disposition]) -> None:
        replies = {m.metadata.sequence.stream: m.reply for m in batch.msgs}
        for c in stored.read.candidates:
            v = verdicts.get(c.stream_sequence)
            parent = c.decision.parent_decision_id
            reply = replies.get(c.stream_sequence)
            if v is not None and v.verdict is Verdict.NAK and parent and reply:
                self._wakes.sleep(parent, c.decision.decision_id, reply, v.delay)

    async def _wake(self, batch: Batch[Read], stored: Committed) -> None:
        """Nak again, without a delay, the deliveries that waited for what this batch
        stored (best effort: one not woken comes back after its delay)."""
        if self._nc is None:
            return
        for reply in self._wakes.wake(d.decision_id for d in stored.written):
            with contextlib.suppress(Exception):
                await self._nc.publish(reply, Msg.Ack.Nak)
                if batch.count is not None:
                    batch.count("woken")

    async def _not_ours(self, batch: Batch[Read], exc: LeaseLost) -> None:
        """The partition is another replica's now (this one stalled past its lease):
        nothing was written; the messages go straight back to the durable, which the
        holder pulls, and this replica stops pulling it. Not a failure of the messages."""
        log.warning("a batch of %d was not written: %s (another replica took the "
                    "partition after this one's lease expired); it goes back to the "
                    "partition's durable", len(batch.msgs), exc)
        if batch.lease is not None:
            batch.lease.lost()
        # Its waiting deliveries are the new holder's now: a wake from here would only
        # deliver one twice.
        self._wakes.clear()
        for m in batch.unsettled():
            await batch.nak(m, 0)

    def _inbound(self, m: Msg) -> Inbound:
        found = self._read.pop(m.metadata.sequence.stream, None)
        return found if found is not None else published(to_inbound(m))

    @staticmethod
    async def _settle(batch: Batch[Read], inbound: list[Inbound],
                      verdicts: dict[int, Disposition]) -> None:
        turns = Turns()  # an ack does not yield: let the next batch's I/O in
        for m, msg in zip(batch.msgs, inbound, strict=True):
            await turns.take()
            v = verdicts[msg.stream_sequence]
            if v.verdict is Verdict.ACK:
                await batch.ack(m)
            elif v.verdict is Verdict.TERM:
                await batch.term(m)
            else:
                await batch.nak(m, v.delay)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().dead_letter(published(msg), violations)

    def extra_deliveries(self) -> int:
        return parent_waits(self._settings)


HANDLERS: dict[str, HandlerClass[Any]] = {RECORDED.name: RecorderConsumer,
                                          **upkeep.HANDLERS}
"""The recording families the workers consume, and the handler of each (the upkeep
commands travel on the recording path's stream: workers.upkeep)."""
