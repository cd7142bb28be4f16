"""Approvals in the in-memory store: what the read port asks of them (the queue, one
approval, a verdict's outcome), and the two writes a scene needs, an approval opened and
an outcome kept, with the MongoDB store's rules (store.approvals): one approval per
decision (opened once), the first outcome of a verdict stays."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from contracts.invariants import approvals as rules
from contracts.invariants.approval_wire import VerdictOutcome
from contracts.invariants.approvals import MAX_LISTED, Approval, ApprovalStatus
from contracts.invariants.holds import Hold, HoldStatus

if TYPE_CHECKING:
    from tests.memory_store import Database, State


class MemoryApprovals:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, decision_id: str) -> Approval | None:
        return self._db.state.approvals.get(decision_id.upper())

    async def find(self, status: ApprovalStatus | None = None, plan_id: str | None = None,
                   limit: int = MAX_LISTED) -> list[Approval]:
        found = [a for a in self._db.state.approvals.values()
                 if (status is None or a.status is status)
                 and (plan_id is None or a.plan_id == plan_id.upper())]
        return sorted(found, key=lambda a: a.decision_id)[:min(limit, MAX_LISTED)]

    async def outcome(self, request_id: str) -> VerdictOutcome | None:
        return self._db.state.approval_verdicts.get(request_id.upper())

    async def keep(self, outcome: VerdictOutcome) -> None:
        def write(st: State) -> None:
            st.approval_verdicts.setdefault(outcome.request_id, outcome)
        self._db.transaction(write)

    async def open(self, holds: list[Hold], now: datetime, ttl: timedelta) -> None:
        """An approval in `requested` for each hold awaiting approval, kept once."""
        def write(st: State) -> None:
            for h in holds:
                if h.status is HoldStatus.AWAITING_APPROVAL:
                    st.approvals.setdefault(h.decision_id, rules.requested(h, now, ttl))
        self._db.transaction(write)
