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
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from contracts.decisions.model import Decision
from contracts.decisions.subjects import (
    DECISIONS_STREAM,
    PERSISTED_PREFIX,
    RECORDED_PREFIX,
    RECORDER_DURABLE,
    REJECTED_PREFIX,
)
from contracts.recording.events import DecisionPersisted, DecisionRejected
from contracts.recording.message import Candidate, Invalid, read_message
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from services.recorder import RecorderService
from services.recorder_batch import subject_plan
from services.recorder_policy import Disposition, RecorderPolicy, Verdict
from store.deliveries import DeliveryFailures
from workers.inbound import Batch, Retry, to_inbound
from workers.pull import BatchPuller, durable_config
from workers.settings import Settings

log = logging.getLogger(__name__)

RECORDED_DOC = (
    "Agents publish one Decision per message, with header Nats-Msg-Id = decision_id "
    "(JetStream drops a retry within the 2-minute duplicate window). Leave out "
    "sequence_number, superseded_by and the correction fields: the recorder assigns the "
    "first, the correction workflow the others. The recorder validates each message, "
    "writes each pulled batch with one bulk write, and acks after the write."
)


def consumer_config(settings: Settings) -> ConsumerConfig:
    """MaxDeliver and BackOff are set by the puller from `recorder_retry`."""
    return durable_config(RECORDER_DURABLE, f"{RECORDED_PREFIX}.*",
                          ack_wait=settings.recorder_ack_wait_seconds,
                          max_ack_pending=max(20_000, settings.recorder_batch_size * 4))


def recorder_retry(settings: Settings) -> Retry:
    """CONSUMER_MAX_DELIVER failures, plus the deliveries a wait for a parent may take
    (those naks are waits, not failures)."""
    policy = RecorderPolicy(parent_wait_seconds=settings.recorder_parent_wait_seconds)
    return settings.retry(extra_deliveries=policy.deliveries_to_wait())


Read = Candidate | Invalid
SETTLE_SLICE = 50


class RecorderConsumer:
    """Maps a pulled batch onto the service and its verdicts onto ack / nak / term."""

    def __init__(self, service: Callable[[], RecorderService]) -> None:
        self._service = service
        # Batches announce in the order they committed (asyncio's lock is first come,
        # first served, and each batch asks for it as soon as it hands off).
        self._announcing = asyncio.Lock()

    def read(self, m: Msg, now: datetime) -> Read:
        return read_message(to_inbound(m), now, self._service().policy.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> Read:
        return Invalid(m.metadata.sequence.stream, subject_plan(m.subject), (why,))

    async def decide(self, batch: Batch[Read]) -> None:
        """Write, then hand off: the next batch reads and writes the store while this
        one's events go out and its messages are settled."""
        svc = self._service()
        inbound = [to_inbound(m) for m in batch.msgs]
        stored = await svc.store(svc.collect(inbound, batch.now, batch.reads))
        batch.hand_off()
        async with self._announcing:
            verdicts = await svc.announce(stored)
            await self._settle(batch, inbound, verdicts)

    @staticmethod
    async def _settle(batch: Batch[Read], inbound: list[Inbound],
                      verdicts: dict[int, Disposition]) -> None:
        for i, (m, msg) in enumerate(zip(batch.msgs, inbound, strict=True)):
            if i and not i % SETTLE_SLICE:
                await asyncio.sleep(0)  # an ack does not yield: let the next batch's I/O in
            v = verdicts[msg.stream_sequence]
            if v.verdict is Verdict.ACK:
                await batch.ack(m)
            elif v.verdict is Verdict.TERM:
                await batch.term(m)
            else:
                await batch.nak(m, v.delay)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().dead_letter(msg, violations)


def recorder_puller(js: JetStreamContext, settings: Settings,
                    service: Callable[[], RecorderService],
                    failures: DeliveryFailures | None = None) -> BatchPuller[Read]:
    """No consumer BackOff: JetStream indexes it by delivery count, and a decision's
    deliveries count its waits for a parent (naks), so one that had waited a few times
    and was then held by a worker that died came back only after 120 to 300 s, and
    its children, waiting meanwhile, outlasted their parent wait: the three-worker
    fault run with six SIGKILLs dead-lettered 94 acknowledged decisions as
    parent_exists that way. Failed deliveries still back off by their failures (the
    worker's nak delay, CONSUMER_BACKOFF); a worker that died hands its messages back
    after the ack wait, MaxDeliver times at most."""
    return BatchPuller(js, stream=DECISIONS_STREAM, subject=f"{RECORDED_PREFIX}.*",
                       config=consumer_config(settings),
                       batch_size=settings.recorder_batch_size,
                       max_wait=settings.recorder_batch_timeout,
                       consumer=RecorderConsumer(service), retry=recorder_retry(settings),
                       failures=failures, backoff_after_ack_wait=False)


def document_recorder(broker: NatsBroker, *, for_docs: bool) -> None:
    """Describe the recorder's subjects in the AsyncAPI document.

    The running consumer is our own pull loop (see workers.pull for why), so the
    subscriber that describes it is registered only when building the document; the
    publishers are the events it emits.
    """
    if for_docs:
        @broker.subscriber(f"{RECORDED_PREFIX}.{{plan_id}}", title="decisions.recorded",
                           description=RECORDED_DOC)
        async def record(decision: Decision) -> None:  # pragma: no cover - documentation only
            raise NotImplementedError

    broker.publisher(
        f"{PERSISTED_PREFIX}.{{plan_id}}", title="decisions.persisted", schema=DecisionPersisted,
        description="One per recorded decision, after its write committed (also for the "
        "decisions a correction writes, from its outbox). "
        "Nats-Msg-Id: persisted:<decision_id>.")
    broker.publisher(
        f"{REJECTED_PREFIX}.{{plan_id}}", title="decisions.rejected", schema=DecisionRejected,
        description="One per rejected message (plan_id 'unknown' when unreadable); the "
        "message is kept in the dead_letters collection. Nats-Msg-Id: rejected:<stream seq>.")
