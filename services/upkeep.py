"""Upkeep: what an operator or an agent records beside the tree without changing it: a
comment on a decision, a plan marked completed or abandoned, a dead letter discarded.

Each arrives over NATS like every other action (contracts.recording.families: COMMENT,
END_PLAN, DISCARD) and the workers call this service with the message's `Actor`: the
principal the inbound pipeline verified, or nobody verified (contracts.shared.actor).
Who did it is taken from there and only there, never from the body. A command its
rules refuse returns the refusal (the worker logs it and acks: a redelivery would be
refused alike); anything else a redelivery repeats harmlessly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from contracts.decisions.comments import Comment, CommentRequest
from contracts.decisions.model import Decision
from contracts.decisions.plan_ending import EndPlanRequest, PlanEndRefused, end_plan
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord
from contracts.shared.actor import Actor
from contracts.shared.dead_letter_care import DiscardRequest
from contracts.shared.timestamps import utc_now
from services.ports.upkeep import UpkeepFacts, UpkeepRecords
from services.read_ports import LedgerReads

END_RACE_TRIES = 3
"""Times an ending is judged again when the plan moved between the read and the write
(a revert rolled it back): then the rules see the new status and refuse it."""


class Refused(Exception):
    """A command its rules refuse: the sentence says why."""


class ReadFacts:
    """UpkeepFacts over the read port."""

    def __init__(self, reads: LedgerReads) -> None:
        self._reads = reads

    async def decision(self, decision_id: str) -> Decision | None:
        return await self._reads.decisions.get(decision_id)

    async def plan(self, plan_id: str) -> PlanRecord | None:
        return await self._reads.plans.get(plan_id)

    async def plan_recorded(self, plan_id: str) -> bool:
        return await self._reads.views.plan_exists(plan_id)

    async def plan_owner(self, plan_id: str) -> str | None:
        return await self._reads.plans.owner(plan_id)

    async def open_corrections(self, plan_id: str) -> int:
        return (await self._reads.views.counts([plan_id]))[plan_id].open_corrections


class UpkeepService:
    def __init__(self, records: UpkeepRecords, facts: UpkeepFacts,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self._records = records
        self._facts = facts
        self._clock = clock

    async def comment(self, request: CommentRequest, actor: Actor) -> Comment:
        """Store the comment; Refused when its decision is not recorded in its plan."""
        target = await self._facts.decision(request.decision_id)
        if target is None or target.plan_id != request.plan_id:
            raise Refused(f"no decision {request.decision_id} is recorded in plan "
                          f"{request.plan_id}")
        owner = await self._facts.plan_owner(request.plan_id)
        if owner is not None and not actor.is_operator() and actor.name != owner:
            raise Refused(f"plan {request.plan_id} belongs to {owner}; {actor.label} is "
                          "neither its owner nor an operator")
        comment = Comment(comment_id=request.comment_id, plan_id=request.plan_id,
                          decision_id=request.decision_id, text=request.text,
                          author=actor.label, verified=actor.verified,
                          created_at=self._clock())
        await self._records.add_comment(comment)
        return comment

    async def end_plan(self, request: EndPlanRequest, actor: Actor) -> PlanRecord:
        """Mark the plan completed or abandoned; Refused with the rule's sentence."""
        to = PlanStatus(request.status)
        for _ in range(END_RACE_TRIES):
            record = await self._facts.plan(request.plan_id)
            if record is not None and record.status is to and record.ended_as is to:
                return record  # a redelivery of what was done
            try:
                ended = end_plan(
                    request.plan_id, record,
                    recorded=await self._facts.plan_recorded(request.plan_id), to=to,
                    actor=actor, owner=await self._facts.plan_owner(request.plan_id),
                    open_corrections=await self._facts.open_corrections(request.plan_id),
                    at=self._clock(), reason=request.reason)
            except PlanEndRefused as exc:
                raise Refused(str(exc)) from None
            if await self._records.end_plan(ended, record.status if record else None):
                return ended
        raise Refused(f"plan {request.plan_id} kept changing while it was being ended; "
                      "send it again")

    async def discard(self, request: DiscardRequest, actor: Actor) -> None:
        """Mark the dead letter discarded; Refused when none is kept under its ID."""
        if not await self._records.discard_letter(request.dead_letter_id, actor.label,
                                                  self._clock(), request.reason):
            raise Refused(f"no dead letter {request.dead_letter_id} is kept (discarded "
                          "already, retried, or never)")
