"""The judge's service: take one decision awaiting the judge, ask about each word-only
invariant it waits on, and settle its hold with what was found.

Runs beside the recorder, never in its batch (a judge takes seconds, a batch
milliseconds): the recorder records the decision with a hold `awaiting_judge`, and this
moves it on (released, refused, awaiting approval). Every failure is an outcome, never
a retry: a timeout, an HTTP error, a garbage answer holds the decision for a person
(error invariants) or is recorded beside it (warning, info). The one thing retried is a
claim whose worker died before settling: after its lease, at most JUDGE_MAX_ATTEMPTS
claims, then the decision is held as never judged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from contracts.decisions.model import Decision
from contracts.invariants import hold_wire
from contracts.invariants.approvals import outbox_key
from contracts.invariants.holds import Hold, HoldStatus
from contracts.invariants.judge import Ruling, failed, messages, read_answer, settle
from contracts.invariants.model import Invariant
from contracts.invariants.outcomes import GateEffects, found
from contracts.invariants.severity import Severity
from contracts.shared.timestamps import utc_now
from services import outbox
from services.ports.gates import HoldRecords
from services.ports.invariants import InvariantRecords
from services.ports.judge import ChatJudge, JudgeUnavailable
from services.ports.publishing import EventPublisher
from services.ports.records import DecisionRecords, OutboxRecords

log = logging.getLogger(__name__)


class JudgeService:
    def __init__(self, judge: ChatJudge, *, holds: HoldRecords, decisions: DecisionRecords,
                 invariants: InvariantRecords, outbox: OutboxRecords,
                 publisher: EventPublisher, lease: timedelta, max_attempts: int,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.judge = judge
        self._holds = holds
        self._decisions = decisions
        self._invariants = invariants
        self._outbox = outbox
        self._publisher = publisher
        self._lease = lease
        self._max_attempts = max_attempts
        self._clock = clock

    async def judge_next(self, owner: str) -> bool:
        """Judge one decision awaiting the judge; False when none is waiting."""
        claimed = await self._holds.claim(owner, self._clock(), self._lease)
        if claimed is None:
            return False
        hold, attempt = claimed
        d = await self._decisions.get(hold.decision_id)
        invariants = [inv for i in hold.judge_invariant_ids
                      if (inv := await self._invariants.get(i)) is not None]
        if d is None:  # never happens: the hold was written with the decision
            log.error("decision %s of a hold is not stored", hold.decision_id)
            return True
        if attempt > self._max_attempts:
            why = failed(f"claimed {attempt - 1} times and never settled")
            rulings = [(inv, why) for inv in invariants]
        else:
            rulings = list(zip(invariants, await asyncio.gather(
                *(self._ask(inv, d) for inv in invariants)), strict=True))
        await self._settle(hold, owner, d, rulings)
        return True

    async def _ask(self, inv: Invariant, d: Decision) -> Ruling:
        try:
            return read_answer(await self.judge.complete(messages(inv, d)))
        except JudgeUnavailable as exc:
            return failed(str(exc))
        except Exception as exc:  # the adapter's bug is this decision's failure, not a pass
            log.warning("asking the judge about %s failed: %s", d.decision_id, exc)
            return failed(type(exc).__name__)

    async def _settle(self, hold: Hold, owner: str, d: Decision,
                      rulings: list[tuple[Invariant, Ruling]]) -> None:
        now = self._clock()
        status, reasons, outcomes = settle(d, rulings)
        effects = GateEffects([found(o, now, o.invariant.severity is Severity.ERROR)
                               for o in outcomes])
        if not await self._holds.settle(hold, owner, status, reasons=reasons,
                                        effects=effects, now=now):
            return  # the lease ran out and another worker settles it
        log.info("judged decision %s: %s", d.decision_id, status.value)
        for f in effects.found:
            await outbox.flush(self._outbox, self._publisher, f.violation.violation_id)
        if status is HoldStatus.AWAITING_APPROVAL:
            await outbox.flush(self._outbox, self._publisher, outbox_key(d.decision_id))
        elif status in hold_wire.ANNOUNCED:
            await outbox.flush(self._outbox, self._publisher,
                               hold_wire.outbox_key(d.decision_id))
