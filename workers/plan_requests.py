"""A consumer of operators' requests addressed to one plan (contracts.shared.
plan_requests): each readable request is applied and acked (its outcome, applied or
refused with its rule, is kept under its request_id by the service); an unreadable one
is dead-lettered and reported on invariants.rejected.<plan_id>, never retried.

`agents plan use` (workers.templates) and approval verdicts (workers.approvals) are
such requests; each says only how to read and how to apply its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Generic, TypeVar

from nats.aio.msg import Msg

from contracts.invariants import subjects
from contracts.shared.families import MessageFamily
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.unreadable import Unreadable, ulid_or_none
from contracts.trust.policy import Identity
from services.invariants import InvariantService
from workers.batch import Batch
from workers.deps import Deps

R = TypeVar("R")


class PlanRequestConsumer(Generic[R]):
    """The pipeline's handler for one family of plan requests; subclasses give
    `family`, `prefix`, `read_request` and `apply`."""

    family: MessageFamily
    prefix: str

    def __init__(self, deps: Deps) -> None:
        self._service: Callable[[], InvariantService] = deps.invariants
        self._settings = deps.settings
        self.trust = deps.trust_for(self.family)

    @staticmethod
    def read_request(subject: str, headers: Mapping[str, str], data: bytes, *,
                     max_payload_bytes: int) -> R | Unreadable:
        raise NotImplementedError

    async def apply(self, request: R, identity: Identity) -> None:
        raise NotImplementedError

    def extra_deliveries(self) -> int:
        return 0

    def read(self, m: Msg, now: datetime) -> R | Unreadable:
        return self.read_request(m.subject, dict(m.headers or {}), m.data,
                                 max_payload_bytes=self._settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> R | Unreadable:
        return Unreadable(self._subject_plan(m.subject), None, (why,))

    async def decide(self, batch: Batch[R | Unreadable]) -> None:
        async def handle(m: Msg, read: R | Unreadable) -> None:
            if not isinstance(read, Unreadable):
                await self.apply(read, batch.identity(m))
                await batch.ack(m)
                return
            meta = m.metadata
            await self._service().reject_report(
                m.subject, dict(m.headers or {}), m.data, stream_sequence=meta.sequence.stream,
                delivered=meta.num_delivered, unreadable=read)
            await batch.term(m)

        await batch.each(handle)

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._service().reject_report(
            msg.subject, dict(msg.headers), msg.data, stream_sequence=msg.stream_sequence,
            delivered=msg.delivered,
            unreadable=Unreadable(self._subject_plan(msg.subject), None, tuple(violations)))

    def _subject_plan(self, subject: str) -> str | None:
        return ulid_or_none(subjects.plan_of(subject, self.prefix))
