"""What the upkeep service (services/upkeep.py) needs of the store: comments, plan
endings and dead-letter discards, each one conditional write (store/upkeep.py), and the
reads its rules are judged on."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from contracts.decisions.comments import Comment
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.plans import PlanRecord


class UpkeepRecords(Protocol):
    async def add_comment(self, comment: Comment) -> bool:
        """False when its ID is taken (a redelivery)."""
        ...

    async def end_plan(self, ended: PlanRecord, was: PlanStatus | None) -> bool:
        """False when the plan is no longer in `was` (None: it had no record)."""
        ...

    async def discard_letter(self, dead_letter_id: str, by: str, at: datetime,
                             reason: str) -> bool:
        """False when there is no such letter or it is already discarded."""
        ...


class UpkeepFacts(Protocol):
    """The reads the rules are judged on (the read port offers them all)."""

    async def decision(self, decision_id: str) -> Decision | None: ...

    async def plan(self, plan_id: str) -> PlanRecord | None: ...

    async def plan_recorded(self, plan_id: str) -> bool: ...

    async def plan_owner(self, plan_id: str) -> str | None:
        """The principal that recorded the plan's root; None when none was verified."""
        ...

    async def open_corrections(self, plan_id: str) -> int: ...
