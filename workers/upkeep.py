"""The upkeep workers: thin adapters from NATS to `services.upkeep`.

- comments (`decisions.comment.*`): stored with their author and time;
- plan endings (`decisions.end_plan.*`): a plan marked completed or abandoned;
- discards (`decisions.discard.*`): a dead letter marked discarded.

Each is a durable pull consumer declared with its family
(contracts.recording.families) running the inbound pipeline (workers.inbound). Who
sent it comes from workers.actors, never from the body. A command the rules refuse is
logged and acked (the same command would be refused again); an unreadable one is kept
as a dead letter and terminated.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from nats.aio.msg import Msg
from pydantic import BaseModel

from contracts.decisions.comments import CommentRequest
from contracts.decisions.plan_ending import EndPlanRequest
from contracts.recording import families
from contracts.recording.upkeep_wire import read_upkeep
from contracts.shared.actor import Actor
from contracts.shared.dead_letter import DeadLetter, dead_letter_id
from contracts.shared.dead_letter_care import DiscardRequest
from contracts.shared.families import MessageFamily
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable
from services.upkeep import Refused, UpkeepService
from workers.actors import actor_of
from workers.batch import Batch
from workers.deps import Deps, HandlerClass
from workers.inbound import to_inbound

log = logging.getLogger(__name__)

C = TypeVar("C", bound=BaseModel)


class _Upkeep(Generic[C]):
    """What the three handlers share: reading, dead-lettering, settling."""

    model: type[C]
    family: MessageFamily
    stream = families.DECISIONS.name

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self.prefix = self.family.name
        self.trust = deps.trust_for(self.family)

    def extra_deliveries(self) -> int:
        return 0

    def read(self, m: Msg, now: datetime) -> C | Unreadable:
        return read_upkeep(self.model, m.subject, self.prefix, m.data,
                           self._deps.settings.max_payload_bytes)

    def unreadable(self, m: Msg, why: RuleViolation) -> Unreadable:
        return Unreadable(None, None, (why,))

    async def dead_letter(self, msg: Inbound, violations: Sequence[RuleViolation]) -> None:
        await self._keep(msg, None, violations)

    async def _keep(self, msg: Inbound, plan_id: str | None,
                    violations: Sequence[RuleViolation]) -> None:
        """Kept as a dead letter (its ID from its stream position: a redelivery is kept
        once); no rejection event, as no sender waits for one."""
        letter = DeadLetter.of_message(
            id=dead_letter_id(self.stream, msg.stream_sequence), subject=msg.subject,
            headers=msg.headers, data=msg.data, plan_id=plan_id, decision_id=None,
            errors=violations, rejected_at=utc_now(), delivered=msg.delivered)
        await self._deps.dead_letters().keep([letter])

    def _service(self) -> UpkeepService:
        return self._deps.upkeep()

    async def apply(self, command: C, actor: Actor) -> None:
        raise NotImplementedError

    async def decide(self, batch: Batch[C | Unreadable]) -> None:
        async def one(m: Msg, r: C | Unreadable) -> None:
            if isinstance(r, Unreadable):
                await self._keep(to_inbound(m), r.plan_id, r.violations)
                await batch.term(m)
                return
            try:
                await self.apply(r, actor_of(batch.identity(m)))
            except Refused as exc:
                log.info("%s refused: %s", self.prefix, exc)
            await batch.ack(m)

        await batch.each(one)


class CommentConsumer(_Upkeep[CommentRequest]):
    model = CommentRequest
    family = families.COMMENT

    async def apply(self, command: CommentRequest, actor: Actor) -> None:
        await self._service().comment(command, actor)


class EndPlanConsumer(_Upkeep[EndPlanRequest]):
    model = EndPlanRequest
    family = families.END_PLAN

    async def apply(self, command: EndPlanRequest, actor: Actor) -> None:
        await self._service().end_plan(command, actor)


class DiscardConsumer(_Upkeep[DiscardRequest]):
    model = DiscardRequest
    family = families.DISCARD

    async def apply(self, command: DiscardRequest, actor: Actor) -> None:
        await self._service().discard(command, actor)


HANDLERS: dict[str, HandlerClass[Any]] = {
    families.COMMENT.name: CommentConsumer, families.END_PLAN.name: EndPlanConsumer,
    families.DISCARD.name: DiscardConsumer}
"""The upkeep families the workers consume, and the handler of each (merged into the
recording path's HANDLERS: they travel on its stream)."""
