"""The recorder worker: a durable JetStream pull consumer over `services.recorder`.

Each pulled batch goes to the service in one call; the service says per message
whether to ack, nak with a delay, or terminate. Any exception leaves the whole batch
unacked and naks it with a delay: the service is idempotent, so redelivery is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from contracts.decision import Decision
from contracts.recording import DecisionPersisted, DecisionRejected, Inbound
from contracts.subjects import (
    DECISIONS_STREAM,
    PERSISTED_PREFIX,
    RECORDED_PREFIX,
    RECORDER_DURABLE,
    REJECTED_PREFIX,
)
from services.recorder import ReadBatch, RecorderService, Verdict
from workers.pull import BatchPuller
from workers.settings import Settings

log = logging.getLogger(__name__)

RETRY_BATCH_AFTER_ERROR = 2.0

RECORDED_DOC = (
    "Agents publish one Decision per message, with header Nats-Msg-Id = decision_id "
    "(JetStream drops a retry within the 2-minute duplicate window). Leave out "
    "sequence_number, superseded_by and the correction fields: the recorder assigns the "
    "first, the correction workflow the others. The recorder validates each message, "
    "writes each pulled batch with one bulk write, and acks after the write."
)


def consumer_config(settings: Settings) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=RECORDER_DURABLE,
        filter_subject=f"{RECORDED_PREFIX}.*",
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.recorder_ack_wait_seconds,
        max_deliver=-1,  # the service bounds retries by time, then dead-letters
        max_ack_pending=max(20_000, settings.recorder_batch_size * 4),
    )


def to_inbound(m: Msg) -> Inbound:
    meta = m.metadata
    return Inbound(subject=m.subject, headers=dict(m.headers or {}), data=m.data,
                   stream_sequence=meta.sequence.stream, delivered=meta.num_delivered)


class RecorderConsumer:
    """Maps a pulled batch onto the service and its verdicts onto ack / nak / term."""

    def __init__(self, service: Callable[[], RecorderService]) -> None:
        self._service = service

    def prepare(self, msgs: list[Msg]) -> ReadBatch:
        return self._service().read([to_inbound(m) for m in msgs])

    async def commit(self, msgs: list[Msg], prepared: ReadBatch) -> None:
        try:
            verdicts = await self._service().record_read(prepared)
        except Exception:
            log.exception("batch of %d failed; it will be redelivered", len(msgs))
            for m in msgs:
                await m.nak(delay=RETRY_BATCH_AFTER_ERROR)
            return
        for m in msgs:
            v = verdicts[m.metadata.sequence.stream]
            if v.verdict is Verdict.ACK:
                await m.ack()
            elif v.verdict is Verdict.TERM:
                await m.term()
            else:
                await m.nak(delay=v.delay)


def recorder_puller(js: JetStreamContext, settings: Settings,
                    service: Callable[[], RecorderService]) -> BatchPuller[ReadBatch]:
    return BatchPuller(js, stream=DECISIONS_STREAM, subject=f"{RECORDED_PREFIX}.*",
                       config=consumer_config(settings),
                       batch_size=settings.recorder_batch_size,
                       max_wait=settings.recorder_batch_timeout,
                       consumer=RecorderConsumer(service))


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
        description="One per recorded decision, after its write committed. "
        "Nats-Msg-Id: persisted:<decision_id>.")
    broker.publisher(
        f"{REJECTED_PREFIX}.{{plan_id}}", title="decisions.rejected", schema=DecisionRejected,
        description="One per rejected message (plan_id 'unknown' when unreadable); the "
        "message is kept in the dead_letters collection. Nats-Msg-Id: rejected:<stream seq>.")
